import { createServer as createTcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createApiClient } from '../src/api-client.js';
import { deliveryList } from '../src/response-shapes.js';
import { sendDelivery } from '../src/send-delivery.js';
import { runCli, useSandbox } from './cli-process.js';
import { useLocalServers } from './local-servers.js';

// --base-url pointing at something that is not svc: another JSON API on the port, a proxy's error page.
const sandbox = useSandbox();
const servers = useLocalServers();
const foreign = servers.answering;

const ID = 'whd_0123456789abcdef0123456789abcdef';

describe('a base URL answering JSON that is not svc’s', () => {
  it.each([
    [['deliveries', 'list'], '/v1/webhooks/deliveries', 'a delivery list'],
    [['deliveries', 'show', ID], `/v1/webhooks/deliveries/${ID}`, 'a delivery'],
    [['deliveries', 'show', '89abcdef'], '/v1/webhooks/deliveries?limit=100', 'a delivery list'],
    [['deliveries', 'redeliver', '--status', 'failed'], '/v1/webhooks/deliveries/redeliver', 'a redelivery result'],
    [['webhooks', 'test'], '/v1/webhooks/test', 'a test delivery result'],
    [['chat', '--no-stream', 'hi'], '/v1/chat/completions', 'a chat completion'],
  ])('%j: one line naming what was expected, exit 1 (was "unexpected error: Cannot read properties of undefined")', async (args, path, what) => {
    const base = await foreign(200, 'application/json', '{"ok":true,"data":{"items":[]}}');
    const result = await runCli(args, { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(result.stderr).toBe(`svc-cli: unexpected response from ${base}${path}: JSON, but not ${what} (is --base-url an svc server?)\n`);
    expect(result.code).toBe(1);
  });
});

describe('a base URL answering an HTML page (a proxy in front of svc, a login page)', () => {
  const NGINX_502 = '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n';

  it.each([
    [['deliveries', 'list']],
    [['deliveries', 'redeliver', ID]],
    [['webhooks', 'test']],
  ])("%j to a proxy's 502 page: its title, and that svc never answers so", async (args) => {
    const base = await foreign(502, 'text/html', NGINX_502);
    const result = await runCli(args, { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(result.stderr).toBe(
      `svc-cli: unexpected response from ${base}: HTTP 502, an HTML page ("502 Bad Gateway"), not svc's JSON error: a proxy's error page? (is svc running behind it, is --base-url right?)\n`,
    );
    expect(result.code).toBe(1);
  });

  it('a 200 HTML page (a sign-in page) names its title', async () => {
    const base = await foreign(200, 'text/html; charset=utf-8', '<!doctype html><html><head><title>Sign in \u001b[2J</title></head><body></body></html>');
    const result = await runCli(['deliveries', 'list'], { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(result.stderr).toBe(`svc-cli: unexpected response from ${base}/v1/webhooks/deliveries: an HTML page ("Sign in \\u001b[2J") (is --base-url an svc server?)\n`);
    expect(result.code).toBe(1);
  });

  it('chat (streamed) against a 200 page or JSON that is not an event stream: one line, nothing on stdout', async () => {
    const page = await foreign(200, 'text/html', '<!doctype html><title>Sign in</title>');
    const html = await runCli(['chat', 'hi'], { cwd: sandbox.path, env: { SVC_BASE_URL: page, SVC_API_KEY: 'sk-x' } });
    // Was an empty line on stdout and "the stream ended before the grounding result arrived".
    expect(html.stderr).toBe(`svc-cli: unexpected response from ${page}/v1/chat/completions: an HTML page ("Sign in") (is --base-url an svc server?)\n`);
    expect(html.stdout).toBe('');
    expect(html.code).toBe(1);
    const api = await foreign(200, 'application/json', '{"ok":true}');
    const json = await runCli(['chat', 'hi'], { cwd: sandbox.path, env: { SVC_BASE_URL: api, SVC_API_KEY: 'sk-x' } });
    expect(json.stderr).toBe(`svc-cli: unexpected response from ${api}/v1/chat/completions: not an event stream (is --base-url an svc server?)\n`);
  });
});

describe('a --base-url with a path svc does not serve', () => {
  it('svc’s own 404 for /api/v1/…: names the path and the root to use', async () => {
    const body = '{"error":{"message":"Unknown request URL: GET /api/v1/webhooks/deliveries. Please check the URL and method.","type":"invalid_request_error","code":"not_found","param":null}}';
    const base = await foreign(404, 'application/json', body);
    const result = await runCli(['deliveries', 'list'], { cwd: sandbox.path, env: { SVC_BASE_URL: `${base}/api`, SVC_API_KEY: 'sk-x' } });
    expect(result.stderr).toBe(
      `svc-cli: Unknown request URL: GET /api/v1/webhooks/deliveries. Please check the URL and method. (404 not_found): --base-url ends in /api, and svc serves its API at its root (try --base-url ${base})\n`,
    );
    expect(result.code).toBe(1);
    // Without a path, or a 404 that names none (a missing delivery, behind a proxy serving svc under /api): svc's message alone.
    const root = await runCli(['deliveries', 'show', ID], { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(root.stderr).toBe('svc-cli: Unknown request URL: GET /api/v1/webhooks/deliveries. Please check the URL and method. (404 not_found)\n');
    const missing = await foreign(404, 'application/json', `{"error":{"message":"No webhook delivery '${ID}' exists for this API key.","type":"invalid_request_error","code":"not_found","param":null}}`);
    const proxied = await runCli(['deliveries', 'show', ID], { cwd: sandbox.path, env: { SVC_BASE_URL: `${missing}/api`, SVC_API_KEY: 'sk-x' } });
    expect(proxied.stderr).toBe(`svc-cli: No webhook delivery '${ID}' exists for this API key. (404 not_found)\n`);
  });
});

describe('a port where something answers, but not in HTTP', () => {
  /** A TCP server that greets as NATS does (no HTTP), and closes. */
  async function notHttp(): Promise<{ port: number; close(): Promise<void> }> {
    const sockets = new Set<Socket>();
    const server = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.end('INFO {"server_id":"x"}\r\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    return {
      port: (server.address() as AddressInfo).port,
      close: async () => {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  }

  it('another service on the port, or https:// to a plain HTTP server: says which, not the parser or OpenSSL message', async () => {
    const { port, close } = await notHttp();
    try {
      const other = await runCli(['deliveries', 'list'], { cwd: sandbox.path, env: { SVC_BASE_URL: `http://127.0.0.1:${port}`, SVC_API_KEY: 'sk-x' } });
      expect(other.stderr).toBe(`svc-cli: cannot reach the server at http://127.0.0.1:${port}: the answer is not HTTP: is another service listening on that port?\n`);
      expect(other.code).toBe(1);
    } finally {
      await close();
    }
    const plain = new URL(await foreign(200, 'application/json', '{}'));
    const tls = await runCli(['deliveries', 'list'], { cwd: sandbox.path, env: { SVC_BASE_URL: `https://${plain.host}`, SVC_API_KEY: 'sk-x' } });
    expect(tls.stderr).toBe(`svc-cli: cannot reach the server at https://${plain.host}: no TLS on that port (https:// to a plain HTTP server?): use http://\n`);
    expect(tls.code).toBe(1);
  });
});

describe('a server whose answer has no end, or is far longer than svc sends', () => {
  /**
   * A server answering `status` with `head`, then 64 KiB pieces as fast as they are read (32 MiB), or a byte every
   * 50 ms (100 bytes): far more, or far longer, than the client under test waits for. Either ends on its own, so a
   * client without the limits fails the test rather than hanging it.
   */
  async function endless(status: number, head: string, pace: 'fast' | 'trickle'): Promise<string> {
    const piece = Buffer.alloc(64 * 1024, 'a');
    return servers.serve((req, res) => {
      req.resume();
      res.writeHead(status, { 'content-type': 'application/json' });
      res.write(head);
      if (pace === 'trickle') {
        let sent = 0;
        const timer = setInterval(() => (++sent < 100 ? res.write(' ') : res.end()), 50);
        res.on('close', () => clearInterval(timer));
        return;
      }
      let left = 512;
      const pump = () => {
        while (!res.destroyed && left > 0 && res.write(piece)) left--;
        if (left === 0) res.end();
        else if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
  }

  it('a 200 body without end: one line once past the limit (was: held until memory ran out)', async () => {
    const base = await endless(200, '{"data":["', 'fast');
    const api = createApiClient({ baseUrl: base, apiKey: 'sk-x', maxResponseBytes: 1024 * 1024 });
    await expect(api.json('GET', '/v1/webhooks/deliveries', deliveryList)).rejects.toThrow(
      `the server at ${base} sent a response over 1 MiB, more than svc sends (is --base-url an svc server?)`,
    );
  });

  it('an error body without end: one line once past 1 MiB, through the binary (exit 1)', async () => {
    const base = await endless(500, '{"error":{"message":"', 'fast');
    const result = await runCli(['webhooks', 'test'], { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(result.stderr).toBe(`svc-cli: the server at ${base} sent a response over 1 MiB, more than svc sends (is --base-url an svc server?)\n`);
    expect(result.code).toBe(1);
  });

  it('a body trickling a byte at a time: given up on at the timeout of the whole answer (was: only between two bytes, so never)', async () => {
    const base = await endless(200, '{', 'trickle');
    const api = createApiClient({ baseUrl: base, apiKey: 'sk-x', timeoutMs: 1000 });
    await expect(api.json('GET', '/v1/webhooks/deliveries', deliveryList)).rejects.toThrow(`the server at ${base} did not finish its answer within 1 s`);
  });

  it('a receiver trickling its answer (replay, listen --forward-to): the attempt ends at its timeout, not the answer\'s end', async () => {
    const base = await endless(200, '{', 'trickle');
    // The answer takes 5 s, a byte every 50 ms: no gap between two bytes comes near the 1 s timeout.
    expect(await sendDelivery(`${base}/webhooks`, Buffer.from('{}'), { 'content-type': 'application/json' }, 1000)).toEqual({
      ok: false,
      status: null,
      error: 'timed out',
      body: '',
    });
  });

  it("a 400 whose message is megabytes long: the message's start on one line", async () => {
    const message = `m${'x'.repeat(3_000_000)}`;
    const base = await foreign(400, 'application/json', JSON.stringify({ error: { message: message.slice(0, 900_000), type: 'invalid_request_error', code: 'invalid_value', param: null } }));
    const result = await runCli(['deliveries', 'list'], { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(result.stderr).toBe(`svc-cli: ${message.slice(0, 1000)}… (400 invalid_value)\n`);
    expect(result.code).toBe(1);
  });
});
