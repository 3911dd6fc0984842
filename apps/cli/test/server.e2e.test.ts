import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '@svc/verify';
import type { DeliveryDetail, DeliveryList } from '@svc/protocol';
import { startFakeUpstream, type FakeUpstream } from '../../server/test/support/fake-upstream.js';
import { startTestServer, type TestServer } from '../../server/test/support/test-server.js';
import { runCli, startCli, startListen, useSandbox, type CliResult } from './cli-process.js';
import { SECRET } from './deliveries-fixture.js';
import type { Receiver } from './receiver.js';
import { expressJsonFirstReceiver } from './check-receivers.js';

// The built CLI against a real server (offline model, SQLite, real delivery worker).
let server: TestServer;
const sandbox = useSandbox();

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

/** Runs svc-cli against the test server with `token` in SVC_API_KEY (as a user would configure it). */
function cli(args: string[], token?: string, env: Record<string, string> = {}): Promise<CliResult> {
  return runCli(args, { cwd: sandbox.path, env: { SVC_BASE_URL: server.url, ...(token ? { SVC_API_KEY: token } : {}), ...env } });
}

async function receiver(status = 200): Promise<Receiver> {
  return sandbox.receiver({ status });
}

async function deliveryFor(token: string, requestId: string): Promise<DeliveryDetail> {
  const list = await cli(['deliveries', 'list', '--json'], token);
  expect(list.code).toBe(0);
  const found = (JSON.parse(list.stdout) as DeliveryList).data.find((d) => d.request_id === requestId);
  expect(found, `a delivery for ${requestId}`).toBeDefined();
  const show = await cli(['deliveries', 'show', found!.id, '--json'], token);
  expect(show.code).toBe(0);
  return JSON.parse(show.stdout) as DeliveryDetail;
}

describe('listen receives real deliveries from the server', () => {
  it('a chat completion: summary line with ✔, --json byte-equal to the stored payload, the log entry', async () => {
    const log = join(sandbox.path, 'deliveries.jsonl');
    const listen = await startListen(['--secret', SECRET, '--json', '--log', log], { cwd: sandbox.path });
    const { token } = await server.createKey({ webhookUrl: listen.url, signingSecret: SECRET });

    const chat = await cli(['chat', 'What is the capital of France?', '--system', 'Paris is the capital of France.', '--no-stream'], token);
    expect(chat.code).toBe(0);
    const requestId = chat.stderr.match(/(chatcmpl-\S+)/)![1]!;

    // stderr is a pipe here: the line is whole, the full request id and every detail in it.
    const [line] = await listen.waitFor('stderr', new RegExp(`--> llm\\.request\\.completed \\[${requestId}\\][^\\n]*`));
    expect(line).toMatch(/\] {2}svc01 200 · \d+\+\d+=\d+ tokens · \d+ ms · (grounded|not grounded) \(hallucination \d\.\d\d\) · signature ✔ {2}whd_[0-9a-f]{32}$/);
    expect(line).not.toContain('· test ·');

    const delivery = await deliveryFor(token, requestId);
    expect(listen.stdout()).toBe(`${delivery.payload}\n`);
    const payload = JSON.parse(delivery.payload) as Record<string, unknown>;
    expect(payload).toMatchObject({ event: 'llm.request.completed', request_id: requestId, streaming: false, status_code: 200 });

    const entries = readFileSync(log, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ id: delivery.id, event: 'llm.request.completed', url: listen.url, signature: 'valid', status: 200 });
    expect(Buffer.from(entries[0].body_base64, 'base64').toString('utf8')).toBe(delivery.payload);
    expect(entries[0].headers['x-svc-delivery']).toBe(delivery.id);
    expect(entries[0].headers['user-agent']).toMatch(/^svc-webhooks\//);
    expect(verifySignature(Buffer.from(entries[0].body_base64, 'base64'), entries[0].headers['x-svc-signature'], SECRET)).toBe(true);
  });

  it('webhooks test: exit 0, where it went; the listener prints the test marker and ✔', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    const { token } = await server.createKey({ webhookUrl: listen.url, signingSecret: SECRET });
    const result = await cli(['webhooks', 'test'], token);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`✔ Test delivery to ${listen.url} succeeded\n`);
    expect(listen.stdout()).toMatch(/--> llm\.request\.completed \[test-[^\]]+\][^\n]* · test · signature ✔ {2}whd_\w+\n/);
  });

  it('listen --trigger with SVC_API_KEY: a test delivery through svc arrives; a key pointing elsewhere is named', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const { token } = await server.createKey({ webhookUrl: `http://localhost:${port}/`, signingSecret: SECRET });
    const env = { SVC_BASE_URL: server.url, SVC_API_KEY: token };
    const listen = await startListen(['--port', String(port), '--secret', SECRET, '--trigger'], { cwd: sandbox.path, env });
    await listen.waitFor('stderr', /✔ A test delivery through svc arrived/);
    expect(listen.stdout()).toMatch(/--> llm\.request\.completed \[test-[^\]]+\][^\n]* · test · signature ✔ {2}whd_\w+\n/);
    listen.child.kill('SIGINT');

    const elsewhere = await server.createKey({ webhookUrl: 'http://localhost:9/hooks', signingSecret: SECRET });
    const other = await startListen(['--trigger'], { cwd: sandbox.path, env: { SVC_BASE_URL: server.url, SVC_API_KEY: elsewhere.token } });
    await other.waitFor('stderr', /! The key's webhook URL is http:\/\/localhost:9\/hooks, not this listener: set it to http:\/\/127\.0\.0\.1:\d+\//);
    other.child.kill('SIGINT');

    const noUrl = await server.createKey({});
    const unset = await startListen(['--trigger'], { cwd: sandbox.path, env: { SVC_BASE_URL: server.url, SVC_API_KEY: noUrl.token } });
    await unset.waitFor('stderr', /! The key has no webhook URL: set it to http:\/\/127\.0\.0\.1:\d+\/\S* \(dashboard: Settings → API Keys; or on the server: svc-server keys update KEY --webhook-url URL\)/);
    unset.child.kill('SIGINT');

    const keyless = await startListen(['--trigger'], { cwd: sandbox.path, env: { SVC_BASE_URL: server.url, SVC_API_KEY: '' } });
    await keyless.waitFor('stderr', /svc-cli: --trigger: no API key: pass --api-key or set SVC_API_KEY/);
    keyless.child.kill('SIGINT');
  });

  it("a wrong secret: the listener prints ✘ and answers 401, so webhooks test exits 1 with the status and the listener's reason", async () => {
    const listen = await startListen(['--secret', 'whsec_not-the-one'], { cwd: sandbox.path });
    const { token } = await server.createKey({ webhookUrl: listen.url, signingSecret: SECRET });
    const result = await cli(['webhooks', 'test'], token);
    expect(result.code).toBe(1);
    const prefix = `svc-cli: test delivery to ${listen.url} failed: the receiver answered 401: `;
    expect(result.stderr.startsWith(prefix), result.stderr).toBe(true);
    const answer = JSON.parse(result.stderr.slice(prefix.length)) as { error: { code: string; message: string } };
    expect(answer.error.code).toBe('signature_mismatch');
    expect(answer.error.message).toMatch(/does not match/);
    expect(listen.stdout()).toContain('signature ✘');
  });

  it('webhooks test to a receiver that redirects says where it points (a trailing slash, http to https)', async () => {
    const target = createHttpServer((req, res) => void res.writeHead(308, { location: `${req.url}/` }).end());
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(target.address() as AddressInfo).port}/hooks`;
      const { token } = await server.createKey({ webhookUrl: url, signingSecret: SECRET });
      const result = await cli(['webhooks', 'test'], token);
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`svc-cli: test delivery to ${url} failed: the receiver answered 308 (redirects are not followed: it points to /hooks/)\n`);
    } finally {
      target.closeAllConnections();
      await new Promise((resolve) => target.close(resolve));
    }
  });

  it("webhooks test to an Express receiver with express.json() mounted first: the error page's first line, not 2 KB of HTML", async () => {
    const target = await expressJsonFirstReceiver(SECRET);
    try {
      const { token } = await server.createKey({ webhookUrl: target.url, signingSecret: SECRET });
      const result = await cli(['webhooks', 'test'], token);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^svc-cli: test delivery to \S+ failed: the receiver answered 500: TypeError: \[@svc\/verify\] req\.body is already set, so a body parser/);
      expect(result.stderr).not.toMatch(/<!DOCTYPE|<pre>|&#39;/);
    } finally {
      await target.close();
    }
  });

  it('webhooks test to a URL nothing listens at: says so, and the listen command that would take its deliveries', async () => {
    // A port that was free a moment ago: closed again before the test delivery.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const url = `http://127.0.0.1:${port}/webhooks/svc`;
    const { token } = await server.createKey({ webhookUrl: url, signingSecret: SECRET });
    const result = await cli(['webhooks', 'test'], token);
    expect(result.code).toBe(1);
    // Was "failed: connect ECONNREFUSED 127.0.0.1:…" and nothing on what to do.
    expect(result.stderr).toBe(
      `svc-cli: test delivery to ${url} failed: nothing accepts connections there (connect ECONNREFUSED 127.0.0.1:${port}): start your receiver, or run \`svc-cli listen --port ${port} --path /webhooks/svc\` to see the deliveries arrive\n`,
    );
  });

  it('webhooks test --json prints the server result', async () => {
    const target = await receiver(500);
    const { token } = await server.createKey({ webhookUrl: target.url });
    const result = await cli(['webhooks', 'test', '--json'], token);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ success: false, delivered_to: target.url, status_code: 500, response_body: 'status 500' });
    expect(result.stderr).toBe(`svc-cli: test delivery to ${target.url} failed: the receiver answered 500: status 500\n`);
  });

  it('webhooks test with no webhook URL: the server message and exit 1', async () => {
    const { token } = await server.createKey();
    const result = await cli(['webhooks', 'test'], token);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^svc-cli: No webhook URL is configured for this API key\.[^\n]* \(400 invalid_request\)\n$/);
    expect(result.stdout).toBe('');
  });

  it('--forward-to passes real deliveries on byte-for-byte with headers; a down target does not stop the listener', async () => {
    const target = await receiver();
    const listen = await startListen(['--forward-to', target.url], { cwd: sandbox.path });
    const { token } = await server.createKey({ webhookUrl: listen.url, signingSecret: SECRET });
    expect((await cli(['webhooks', 'test'], token)).code).toBe(0);
    const [forwarded] = await target.waitForRequests(1);
    const list = JSON.parse((await cli(['deliveries', 'list', '--json'], token)).stdout) as DeliveryList;
    const delivery = JSON.parse((await cli(['deliveries', 'show', list.data[0]!.id, '--json'], token)).stdout) as DeliveryDetail;
    expect(forwarded!.body.toString('utf8')).toBe(delivery.payload);
    expect(forwarded!.headers['x-svc-delivery']).toBe(delivery.id);
    expect(forwarded!.headers['x-svc-event']).toBe('llm.request.completed');
    expect(forwarded!.headers['content-type']).toMatch(/^application\/json/);
    expect(verifySignature(forwarded!.body, forwarded!.headers['x-svc-signature'] as string, SECRET)).toBe(true);
    // A pipe: the full delivery id (a terminal shows its last 8 characters).
    await listen.waitFor('stdout', new RegExp(`<-- \\[200\\] POST ${target.url} \\[${delivery.id}\\]`));

    // A down target: the listener keeps going, and svc is told (502), so the test delivery is a failure.
    await target.close();
    const down = await cli(['webhooks', 'test'], token);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain('the receiver answered 502');
    await listen.waitFor('stderr', /✘ POST \S+ failed: connection refused/);
    expect((await cli(['webhooks', 'test'], token)).code).toBe(1);
    listen.child.kill('SIGINT');
    const result = await listen.exited;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('3 deliveries received, 1 forwarded, 2 failed to forward');
  });
});

describe('replay and deliveries against the server', () => {
  it('deliveries show prints a receiver’s answer escaped: its control characters cannot drive the terminal, its lines stay lines', async () => {
    const hostile = createHttpServer((_req, res) => res.writeHead(500, { 'content-type': 'text/plain' }).end('no\u001b[2J\u009b31m\u202eway\nline two'));
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}/`;
      const { token } = await server.createKey({ webhookUrl: url, signingSecret: SECRET });
      expect((await cli(['webhooks', 'test'], token)).code).toBe(1);
      const list = JSON.parse((await cli(['deliveries', 'list', '--json'], token)).stdout) as DeliveryList;
      const shown = await cli(['deliveries', 'show', list.data[0]!.id], token);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain('no\\u001b[2J\\u009b31m\\u202eway\nline two\n');
      expect(shown.stdout).not.toMatch(/[\u001b\u009b\u202e]/);
    } finally {
      await new Promise<void>((resolve) => hostile.close(() => resolve()));
    }
  });

  it('replay resends a real delivery byte-for-byte; the signature still verifies', async () => {
    const listen = await startListen([], { cwd: sandbox.path });
    const { token } = await server.createKey({ webhookUrl: listen.url, signingSecret: SECRET });
    expect((await cli(['webhooks', 'test'], token)).code).toBe(0);
    const target = await receiver();
    const result = await cli(['replay', '--last', '1', '--to', target.url], token);
    expect(result.code).toBe(0);
    const [replayed] = target.requests;
    const entry = JSON.parse(readFileSync(join(sandbox.path, '.svc', 'deliveries.jsonl'), 'utf8').trim());
    expect(replayed!.body.equals(Buffer.from(entry.body_base64, 'base64'))).toBe(true);
    expect(replayed!.headers['x-svc-delivery']).toBe(entry.id);
    expect(verifySignature(replayed!.body, replayed!.headers['x-svc-signature'] as string, SECRET)).toBe(true);
    const delivery = await deliveryFor(token, JSON.parse(replayed!.body.toString('utf8')).request_id);
    expect(replayed!.body.toString('utf8')).toBe(delivery.payload);
  });

  it('deliveries list searches by request id, the last attempt\'s HTTP status and creation time; the next page keeps the search', async () => {
    const target = await receiver();
    const { token } = await server.createKey({ webhookUrl: target.url });
    expect((await cli(['webhooks', 'test'], token)).code).toBe(0);
    expect((await cli(['webhooks', 'test'], token)).code).toBe(0);
    const all = (JSON.parse((await cli(['deliveries', 'list', '--json'], token)).stdout) as DeliveryList).data;
    const wanted = all[1]!;
    const byRequest = JSON.parse((await cli(['deliveries', 'list', '--request-id', wanted.request_id, '--json'], token)).stdout) as DeliveryList;
    expect(byRequest.data.map((d) => d.id)).toEqual([wanted.id]);
    expect((await cli(['deliveries', 'list', '--last-status-code', '5xx'], token)).stderr).toBe('No deliveries.\n');
    const ok = JSON.parse((await cli(['deliveries', 'list', '--last-status-code', '2XX', '--json'], token)).stdout) as DeliveryList;
    expect(ok.data).toHaveLength(2);
    const since = new Date(Date.parse(all[0]!.created_at) + 1).toISOString();
    expect((await cli(['deliveries', 'list', '--since', since], token)).stderr).toBe('No deliveries.\n');
    const recent = await cli(['deliveries', 'list', '--since', '1h', '--last-status-code', '200', '--limit', '1'], token);
    expect(recent.stderr).toMatch(new RegExp(`^More: svc-cli deliveries list --before ${all[0]!.id} --limit 1 --since \\S+Z --last-status-code 200\n$`));
    const badCode = await cli(['deliveries', 'list', '--last-status-code', '600'], token);
    expect(badCode.code).not.toBe(0);
    expect(badCode.stderr).toContain('Must be an HTTP status (503) or a class of them (5xx).');
  });

  it('deliveries list, show and redeliver', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    const { token } = await server.createKey({ webhookUrl: listen.url, signingSecret: SECRET });
    expect((await cli(['webhooks', 'test'], token)).code).toBe(0);
    expect((await cli(['webhooks', 'test'], token)).code).toBe(0);

    // In an 80-column terminal: short ids, the request id cut to fit.
    const list = await runCli(['deliveries', 'list'], { cwd: sandbox.path, env: { SVC_BASE_URL: server.url, SVC_API_KEY: token }, terminal: { stream: 'stdout', columns: 80 } });
    expect(list.code).toBe(0);
    const lines = list.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+CODE\s+ATTEMPTS\s+CREATED\s+REQUEST$/);
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(lines[1]).toMatch(/^[0-9a-f]{8}  delivered  200\s+1\s+\d{4}-\d\d-\d\d \d\d:\d\d  test-\S+$/);

    // To a pipe: the whole table, as with --wide.
    const piped = await cli(['deliveries', 'list'], token);
    const wide = await cli(['deliveries', 'list', '--wide'], token);
    expect(piped.stdout).toBe(wide.stdout);
    const wideLines = wide.stdout.trimEnd().split('\n');
    expect(wideLines[0]).toMatch(/^ID\s+STATUS\s+CODE\s+ATTEMPTS\s+CREATED\s+REQUEST\s+URL$/);
    expect(wideLines[1]).toMatch(new RegExp(`^whd_[0-9a-f]{32}  delivered  200\\s+1\\s+\\S+Z  test-\\S+\\s+${listen.url}$`));
    const id = wideLines[1]!.split(/\s+/)[0]!;
    expect(id.endsWith(lines[1]!.split(/\s+/)[0]!)).toBe(true);

    const limited = await cli(['deliveries', 'list', '--limit', '1'], token);
    expect(limited.stdout.trimEnd().split('\n')).toHaveLength(2);
    const cursor = limited.stderr.match(/svc-cli deliveries list --before (whd_\w+) --limit 1\n/)?.[1];
    expect(cursor).toBeDefined();
    const next = JSON.parse((await cli(['deliveries', 'list', '--before', cursor!, '--json'], token)).stdout) as DeliveryList;
    expect(next.data).toHaveLength(1);
    expect(next.data[0]!.id).not.toBe(cursor);

    // The next page's command keeps the filter and the page size.
    const filtered = await cli(['deliveries', 'list', '--status', 'delivered', '--limit', '1'], token);
    expect(filtered.stderr).toBe(`More: svc-cli deliveries list --before ${id} --limit 1 --status delivered\n`);

    const failedOnly = await cli(['deliveries', 'list', '--status', 'failed'], token);
    expect(failedOnly.code).toBe(0);
    expect(failedOnly.stderr).toBe('No deliveries.\n');

    // The short id from the narrow list names the delivery.
    const show = await cli(['deliveries', 'show', lines[1]!.split(/\s+/)[0]!], token);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(new RegExp(`^id\\s+${id}\\n`));
    expect(show.stdout).toMatch(/status\s+delivered/);
    expect(show.stdout).toMatch(/Attempts\n#\s+TIME\s+CODE\s+DURATION\s+ERROR\n1\s+\S+Z\s+200\s+\d+ ms/);
    expect(show.stdout).toContain('Payload\n{\n  "event": "llm.request.completed",');

    const before = listen.stdout().split('\n').filter(Boolean).length;
    const redeliver = await cli(['deliveries', 'redeliver', id], token);
    expect(redeliver.code).toBe(0);
    expect(redeliver.stdout).toMatch(new RegExp(`^Redelivery of ${id} to ${listen.url} requested \\(now \\w+; its last attempt got 200\\)\\n$`));
    await listen.waitFor('stdout', new RegExp(`(?:.*\\n){${before}}.*signature ✔ {2}${id}\\n`));
    const detail = JSON.parse((await cli(['deliveries', 'show', id, '--json'], token)).stdout) as DeliveryDetail;
    const log = readFileSync(join(sandbox.path, '.svc', 'deliveries.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const copies = log.filter((e) => e.id === id);
    expect(copies).toHaveLength(2);
    for (const copy of copies) expect(Buffer.from(copy.body_base64, 'base64').toString('utf8')).toBe(detail.payload);

    const cancel = await cli(['deliveries', 'cancel', id], token);
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toMatch(/is delivered; only pending deliveries can be cancelled\. \(400 invalid_request\)\n$/);
  });

  it('deliveries cancel stops a pending delivery; with --json, redeliver prints the answer as sent', async () => {
    const failing = await receiver(500);
    const { token } = await server.createKey({ webhookUrl: failing.url });
    expect((await cli(['chat', 'What is the capital of France?', '--no-stream'], token)).code).toBe(0);
    const [pending] = (JSON.parse((await cli(['deliveries', 'list', '--json'], token)).stdout) as DeliveryList).data;
    expect(pending?.status).toBe('pending');

    const cancel = await cli(['deliveries', 'cancel', pending!.id], token);
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toBe(`Delivery ${pending!.id} cancelled\n`);

    const redeliver = await cli(['deliveries', 'redeliver', pending!.id, '--json'], token);
    expect(redeliver.code).toBe(0);
    expect(JSON.parse(redeliver.stdout)).toMatchObject({ id: pending!.id, object: 'webhook.delivery', status: 'pending' });
  });

  it.each([
    [['deliveries', 'show', 'whd_00000000000000000000000000000000'], /^svc-cli: No webhook delivery 'whd_0+' exists for this API key\. \(404 not_found\)\n$/, 1],
    [['deliveries', 'redeliver', 'whd_00000000000000000000000000000000'], /\(404 not_found\)\n$/, 1],
    [['deliveries', 'cancel', 'whd_00000000000000000000000000000000'], /\(404 not_found\)\n$/, 1],
    // The option parser's usage error exits 2.
    [['deliveries', 'list', '--status', 'lost'], /^svc-cli: option '--status <status>' argument 'lost' is invalid\. Allowed choices are pending, delivered, failed, cancelled\.\n$/, 2],
    [['deliveries', 'list', '--before', 'nope'], /^svc-cli: 'before' must be a delivery id .* \(400 invalid_value\)\n$/, 1],
  ])('%j: one line on stderr, exit %i', async (args, message, code) => {
    const { token } = await server.createKey();
    const result = await cli(args, token);
    expect(result.code).toBe(code);
    expect(result.stderr).toMatch(message);
  });
});

describe('chat against the offline model', () => {
  const system = 'The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall.';

  it('streams the answer to stdout, then the grounding result to stderr', async () => {
    const { token } = await server.createKey();
    const result = await cli(['chat', 'When was the Eiffel Tower completed?', '--system', system], token);
    expect(result.stderr).not.toMatch(/svc-cli:/);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Eiffel Tower');
    expect(result.stdout.endsWith('\n')).toBe(true);
    expect(result.stderr).toMatch(/chatcmpl-\S+ · \d+\+\d+=\d+ tokens/);
    expect(result.stderr).toMatch(/Grounding: (✔ grounded|✘ not grounded), score \d\.\d\d/);
  });

  it('--no-stream prints the same kind of answer; --json prints the completion', async () => {
    const { token } = await server.createKey();
    const plain = await cli(['chat', 'How tall is the Eiffel Tower?', '--system', system, '--no-stream'], token);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain('Eiffel Tower');
    expect(plain.stderr).toMatch(/Grounding: /);

    const json = await cli(['chat', 'How tall is the Eiffel Tower?', '--system', system, '--no-stream', '--json'], token);
    expect(json.code).toBe(0);
    const completion = JSON.parse(json.stdout);
    expect(completion).toMatchObject({ object: 'chat.completion', model: 'svc01', svc: { dehallucinate_requested: true } });
    expect(json.stderr).toBe('');
  });

  it('--json while streaming prints every chunk on its own line', async () => {
    const { token } = await server.createKey();
    const result = await cli(['chat', 'Where is the Eiffel Tower?', '--system', system, '--json'], token);
    expect(result.code).toBe(0);
    const chunks = result.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks.some((c) => c.svc?.checked === true)).toBe(true);
  });

  it('--no-dehallucinate and --thinking reach the server', async () => {
    const { token } = await server.createKey();
    const off = await cli(['chat', 'Hello there', '--no-dehallucinate', '--no-stream', '--json'], token);
    expect(JSON.parse(off.stdout).svc).toMatchObject({ dehallucinate_requested: false, checked: false });
    const human = await cli(['chat', 'Hello there', '--no-dehallucinate'], token);
    expect(human.code).toBe(0);
    expect(human.stderr).toContain('Grounding: not requested (--no-dehallucinate)');
    const thinking = await cli(['chat', 'Where is the Eiffel Tower?', '--system', system, '--thinking'], token);
    expect(thinking.code).toBe(0);
    expect(thinking.stdout.trim().length).toBeGreaterThan(0);
  });
});

describe('chat shows flagged spans', () => {
  let upstream: FakeUpstream;
  let fakeServer: TestServer;
  beforeAll(async () => {
    upstream = await startFakeUpstream({ answer: 'The Eiffel Tower is in Paris. It was completed in 1925.' });
    fakeServer = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
  });
  afterAll(async () => {
    await fakeServer?.close();
    await upstream?.close();
  });

  it.each([[[]], [['--no-stream']]])('an unsupported claim is highlighted and listed %j', async (extra) => {
    const { token } = await fakeServer.createKey();
    const result = await runCli(['chat', 'When was it completed?', '--system', 'The Eiffel Tower is in Paris. It was completed in 1889.', ...extra], {
      cwd: sandbox.path,
      env: { SVC_BASE_URL: fakeServer.url, SVC_API_KEY: token },
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('The Eiffel Tower is in Paris. It was completed in 1925.\n');
    expect(result.stderr).toMatch(/Grounding: ✘ not grounded, score \d\.\d\d, \d flagged spans?/);
    expect(result.stderr).toMatch(/»[^«]*1925[^«]*«/);
    expect(result.stderr).toMatch(/ {2}1\. "[^"]*1925[^"]*" — .+ \(score \d\.\d\d\)/);
  });
});

describe('chat when the upstream fails', () => {
  let upstream: FakeUpstream;
  let fakeServer: TestServer;
  beforeAll(async () => {
    upstream = await startFakeUpstream({ answer: 'one two three four' });
    fakeServer = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
  });
  afterAll(async () => {
    await fakeServer?.close();
    await upstream?.close();
  });

  const chat = (token: string, extra: string[] = []) =>
    runCli(['chat', 'Count', ...extra], { cwd: sandbox.path, env: { SVC_BASE_URL: fakeServer.url, SVC_API_KEY: token } });

  it('an error event mid-stream: the partial answer, then one line on stderr and exit 1', async () => {
    const { token } = await fakeServer.createKey();
    upstream.nextBehavior({ errorEvent: true, errorMessage: 'upstream fell over' });
    const result = await chat(token);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^svc-cli: the answer stopped: [^\n]+\n$/m);
    expect(result.stderr.split('\n').filter((l) => l.startsWith('svc-cli:'))).toHaveLength(1);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('an upstream error before the answer: the server message and exit 1', async () => {
    const { token } = await fakeServer.createKey();
    upstream.nextBehavior({ status: 500 });
    const result = await chat(token, ['--no-stream']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^svc-cli: [^\n]+ \(502 upstream_error\)\n$/);
  });
});

describe('bad input against the server', () => {
  it('server unreachable: one line, exit 1', async () => {
    const down = await receiver();
    const origin = new URL(down.url).origin;
    await down.close();
    const result = await cli(['webhooks', 'test', '--base-url', origin], 'sk-anything');
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`svc-cli: cannot reach the server at ${origin}: connection refused\n`);
  });

  it.each([
    [['webhooks', 'test']],
    [['deliveries', 'list']],
    [['chat', 'hi']],
  ])('%j with no API key: one line, exit 1', async (args) => {
    const result = await cli(args);
    expect(result.code).toBe(1);
    // It says where a first run gets a key.
    expect(result.stderr).toBe(
      'svc-cli: no API key: pass --api-key or set SVC_API_KEY. svc-server prints one on its first start; create more in the dashboard (Settings → API Keys) or with `svc-server keys create`\n',
    );
  });

  it.each([
    [['webhooks', 'test']],
    [['deliveries', 'list']],
    [['chat', 'hi']],
    [['chat', 'hi', '--no-stream']],
  ])('%j with an invalid API key: the server message, one line, exit 1', async (args) => {
    const result = await cli([...args, '--api-key', 'sk-svc-not-a-real-key']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^svc-cli: [^\n]+ \(401 invalid_api_key\)\n$/);
  });

  it('an invalid --base-url or SVC_BASE_URL: one line, exit 2 (a usage error)', async () => {
    const flag = await cli(['webhooks', 'test', '--base-url', 'localhost:8080'], 'sk-x');
    expect(flag.code).toBe(2);
    expect(flag.stderr).toBe("svc-cli: option '--base-url <url>' argument 'localhost:8080' is invalid. Must be an absolute http:// or https:// URL.\n");
    const env = await runCli(['deliveries', 'list'], { cwd: sandbox.path, env: { SVC_BASE_URL: 'nonsense', SVC_API_KEY: 'sk-x' } });
    expect(env.code).toBe(2);
    expect(env.stderr).toMatch(/^svc-cli: option '--base-url <url>' value 'nonsense' from env 'SVC_BASE_URL' is invalid\. Must be an absolute http:\/\/ or https:\/\/ URL\.\n$/);
  });

  it('a base URL that is not an svc server: one line, exit 1', async () => {
    const other = await receiver(200);
    const result = await cli(['deliveries', 'list', '--base-url', new URL(other.url).origin], 'sk-x');
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^svc-cli: unexpected response from http:\/\/127\.0\.0\.1:\d+\/v1\/webhooks\/deliveries: not JSON \(is --base-url an svc server\?\)\n$/);
  });
});

describe('output into a pipe that closes early', () => {
  let upstream: FakeUpstream;
  let pacedServer: TestServer;

  beforeAll(async () => {
    // A long answer, one frame every 20 ms: the CLI is still writing chunks when its reader goes away.
    upstream = await startFakeUpstream({ answer: 'word '.repeat(60).trim(), trickle: { intervalMs: 20 } });
    pacedServer = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url } });
  });

  afterAll(async () => {
    await pacedServer?.close();
    await upstream?.close();
  });

  it('a reader that stops early (| head -1) ends the output quietly: exit 0, no EPIPE stack', async () => {
    const { token } = await pacedServer.createKey();
    const run = startCli(['chat', 'Say many words.', '--json'], { cwd: sandbox.path, env: { SVC_BASE_URL: pacedServer.url, SVC_API_KEY: token } });
    // Like `head -1`: read the first line, then close the pipe while the CLI is still writing chunks.
    await run.waitFor('stdout', /\n/);
    run.child.stdout!.destroy();
    const result = await run.exited;
    expect(result.stderr).not.toMatch(/EPIPE|Error|\bat /);
    expect(result.code).toBe(0);
  });
});

describe('the local loop and recovery against a server that retries once after 200 ms', () => {
  let retrying: TestServer;

  beforeAll(async () => {
    retrying = await startTestServer({ env: { SVC_WEBHOOK_RETRY_SCHEDULE: '200ms' } });
  });
  afterAll(async () => {
    await retrying?.close();
  });

  const run = (args: string[], token: string) => runCli(args, { cwd: sandbox.path, env: { SVC_BASE_URL: retrying.url, SVC_API_KEY: token } });

  async function chatOnce(token: string): Promise<void> {
    const res = await fetch(`${retrying.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'What is the capital of France?' }] }),
    });
    expect(res.status).toBe(200);
  }

  /** The key's only delivery once both attempts are made (it is then failed). */
  async function settled(token: string): Promise<DeliveryDetail> {
    for (let i = 0; i < 100; i++) {
      const list = JSON.parse((await run(['deliveries', 'list', '--json'], token)).stdout) as DeliveryList;
      const d = list.data[0];
      if (d && d.status === 'failed') return JSON.parse((await run(['deliveries', 'show', d.id, '--json'], token)).stdout) as DeliveryDetail;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the delivery did not settle');
  }

  it.each([
    ['answers 500', 500],
    ['is a dead port', null],
  ] as const)('listen --forward-to a target that %s: svc gets that answer, so it retries', async (_name, status) => {
    let target: string;
    if (status === null) {
      const dead = await sandbox.receiver();
      target = dead.url;
      await dead.close();
    } else {
      target = (await sandbox.receiver({ status })).url;
    }
    const listen = await startListen(['--forward-to', target], { cwd: sandbox.path });
    const { token } = await retrying.createKey({ webhookUrl: listen.url });
    await chatOnce(token);

    const delivery = await settled(token);
    expect(delivery.attempts).toBe(2);
    expect(delivery.request_status_code).toBe(200);
    for (const attempt of delivery.attempt_log) {
      expect(attempt.status_code).toBe(status ?? 502);
      expect(attempt.response_body).toContain(status === null ? 'could not reach' : `status ${status}`);
    }
    // The receiver's answer is shown on failed attempts.
    const shown = await run(['deliveries', 'show', delivery.id], token);
    expect(shown.stdout).toContain("Receiver's answer to attempt 2");
    expect(shown.stdout).toMatch(/request\s+answered 200/);
    expect(shown.stdout).toMatch(/Headers sent with attempt 2\ncontent-type: application\/json\n/);
  });

  it('deliveries redeliver --status failed --since 2h sends every failed delivery again, once the receiver is fixed', async () => {
    const receiver = await sandbox.receiver({ status: 503 });
    const { token } = await retrying.createKey({ webhookUrl: receiver.url });
    await chatOnce(token);
    await chatOnce(token);
    for (let i = 0; i < 100; i++) {
      const list = JSON.parse((await run(['deliveries', 'list', '--status', 'failed', '--json'], token)).stdout) as DeliveryList;
      if (list.data.length === 2) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const dry = await run(['deliveries', 'redeliver', '--status', 'failed', '--since', '2h', '--dry-run'], token);
    expect(dry.stdout).toBe('2 deliveries match; nothing was sent (--dry-run)\n');
    // Every term the list takes: what a list filtered so shows is what is sent again.
    const byCode = async (code: string) => (await run(['deliveries', 'redeliver', '--last-status-code', code, '--dry-run'], token)).stdout;
    expect(await byCode('503')).toBe('2 deliveries match; nothing was sent (--dry-run)\n');
    expect(await byCode('5xx')).toBe('2 deliveries match; nothing was sent (--dry-run)\n');
    expect(await byCode('500')).toBe('0 deliveries match; nothing was sent (--dry-run)\n');
    const [first] = (JSON.parse((await run(['deliveries', 'list', '--json'], token)).stdout) as DeliveryList).data;
    const byRequest = await run(['deliveries', 'redeliver', '--request-id', first!.request_id, '--status', 'failed', '--dry-run'], token);
    expect(byRequest.stdout).toBe('1 delivery matches; nothing was sent (--dry-run)\n');
    const none = await run(['deliveries', 'redeliver', '--status', 'failed', '--until', '2h'], token);
    expect(none.stdout).toBe('Redelivery of 0 deliveries requested\n');

    receiver.setStatus(200);
    const before = receiver.requests.length;
    const result = await run(['deliveries', 'redeliver', '--status', 'failed', '--since', '2h'], token);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('Redelivery of 2 deliveries requested\n');
    await receiver.waitForRequests(before + 2);
    for (let i = 0; i < 100; i++) {
      const list = JSON.parse((await run(['deliveries', 'list', '--json'], token)).stdout) as DeliveryList;
      if (list.data.every((d) => d.status === 'delivered')) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('the redelivered deliveries were not delivered');
  });

  it('webhooks test --sample sends each shape; a bad sample is refused by the CLI', async () => {
    const listen = await startListen(['--json'], { cwd: sandbox.path });
    const { token } = await retrying.createKey({ webhookUrl: listen.url });
    for (const sample of ['ok', 'failed', 'ungrounded', 'streamed']) {
      const result = await run(['webhooks', 'test', '--sample', sample], token);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toBe(`✔ Test delivery${sample === 'ok' ? '' : ` (${sample})`} to ${listen.url} succeeded\n`);
    }
    const bodies = listen.stdout().trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(bodies.map((b) => [b.status_code, b.streaming, b.grounded])).toEqual([
      [200, false, true],
      [502, false, true],
      [200, false, false],
      [200, true, true],
    ]);
    expect(bodies.every((b) => b.test === true)).toBe(true);
    const [span] = bodies[2]!.flagged_spans as Array<{ start: number; end: number; text: string }>;
    expect((bodies[2]!.response_text as string).slice(span!.start, span!.end)).toBe(span!.text);

    const bad = await run(['webhooks', 'test', '--sample', 'weird'], token);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--sample <kind>' argument 'weird' is invalid/);
  });
});
