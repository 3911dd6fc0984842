import { createSecureServer, type Http2SecureServer, type SecureServerOptions, type ServerHttp2Stream } from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Pool } from '../../../src/http/undici-dispatchers.js';
import { H2Upstream } from '../../../src/upstream/h2-upstream.js';
import { selfSignedCert } from '../../support/self-signed-cert.js';

/**
 * h2-upstream.ts at its edges, each against a real node:http2 server that misbehaves one way: what a call then
 * gets, and that nothing is sent twice that the server may have processed.
 */

const { key, cert } = selfSignedCert();
const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

interface TestServer {
  port: number;
  /** TLS connections accepted. */
  connections(): number;
}

async function h2Server(options: Partial<SecureServerOptions>, onStream: (stream: ServerHttp2Stream) => void): Promise<TestServer> {
  const server: Http2SecureServer = createSecureServer({ key, cert, allowHTTP1: true, ...options });
  let connections = 0;
  const sockets = new Set<Socket>();
  server.on('secureConnection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
  });
  server.on('stream', (stream) => {
    stream.on('error', () => {});
    onStream(stream);
  });
  await listening(server, sockets);
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

/** Listens on a port of loopback; the test's end closes it, its `sockets` first. */
async function listening(server: Server | Http2SecureServer, sockets: Set<Socket>): Promise<void> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
}

function dispatcher(port: number, connections = 100): H2Upstream {
  const origin = `https://127.0.0.1:${port}`;
  const upstream = new H2Upstream(origin, { connections, connectTimeoutMs: 20_000, ca: cert, h1: new Pool(origin, { connect: { ca: cert } }) });
  cleanup.push(() => upstream.destroy());
  return upstream;
}

const post = (upstream: H2Upstream, extra: Partial<Parameters<H2Upstream['request']>[0]> = {}) =>
  upstream.request({ origin: 'https://127.0.0.1', path: '/v1/chat/completions', method: 'POST', body: '{"model":"m"}', ...extra });

/** Reads a stream's request body, then calls `then`. */
const afterBody = (stream: ServerHttp2Stream, then: () => void): void => {
  stream.on('data', () => {});
  stream.on('end', then);
};

describe('H2Upstream', () => {
  it('a GOAWAY that covers a stream the server took (its code REFUSED_STREAM or not) fails the call: it is never sent again', async () => {
    let received = 0;
    const server = await h2Server({}, (stream) => {
      received += 1;
      afterBody(stream, () => stream.session!.goaway(7, stream.id!));
    });

    await expect(post(dispatcher(server.port))).rejects.toMatchObject({ code: 'ERR_HTTP2_SESSION_ERROR' });
    expect(received).toBe(1);
  });

  it('a session draining after a GOAWAY does not count toward the maximum: the next call opens a new one at once', async () => {
    let first: ServerHttp2Stream | null = null;
    const server = await h2Server({}, (stream) =>
      afterBody(stream, () => {
        stream.respond({ ':status': 200 });
        if (first === null) {
          first = stream;
          stream.write('start');
          stream.session!.goaway(0, stream.id!);
        } else stream.end('second');
      }),
    );
    // connections 100: one session at most. The first stream stays open until the second call has its answer.
    const upstream = dispatcher(server.port, 100);
    const one = await post(upstream);
    one.body.resume();

    const two = await post(upstream);
    expect(await two.body.text()).toBe('second');
    expect(server.connections()).toBe(2);
    first!.end('done');
  });

  it('a call aborted while the first handshake is under way fails at once, not when the handshake ends', async () => {
    // Accepts TCP and never answers the TLS hello.
    const sockets = new Set<Socket>();
    const silent: Server = createNetServer((socket) => void sockets.add(socket));
    await listening(silent, sockets);
    const upstream = dispatcher((silent.address() as AddressInfo).port);
    const controller = new AbortController();

    const call = post(upstream, { signal: controller.signal });
    controller.abort();
    // The connect timeout is 20 s, the test's 5 s.
    await expect(call).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('a later connection whose handshake picks http/1.1 after the first picked h2 fails its calls with a clear error', async () => {
    let handshakes = 0;
    const held: ServerHttp2Stream[] = [];
    const server = await h2Server(
      // One stream a session, so that a second call needs a second connection; that handshake picks http/1.1.
      { settings: { maxConcurrentStreams: 1 }, ALPNProtocols: undefined, ALPNCallback: () => (++handshakes === 1 ? 'h2' : 'http/1.1') },
      (stream) =>
        afterBody(stream, () => {
          stream.respond({ ':status': 200 });
          held.push(stream);
        }),
    );
    const upstream = dispatcher(server.port, 1000);
    const one = await post(upstream);

    await expect(post(upstream)).rejects.toMatchObject({ code: 'UND_ERR_SOCKET', message: expect.stringContaining('http/1.1') });
    held[0]!.end('one');
    expect(await one.body.text()).toBe('one');
    expect(handshakes).toBe(2);
  });

  it('a header HTTP/2 cannot carry fails that call only: the session stays in use', async () => {
    const server = await h2Server({}, (stream) => afterBody(stream, () => stream.respond({ ':status': 200 }, { endStream: true })));
    const upstream = dispatcher(server.port);

    expect((await post(upstream)).statusCode).toBe(200);
    await expect(post(upstream, { headers: { 'content-type': ['a', 'b'] as unknown as string } })).rejects.toMatchObject({ code: 'ERR_HTTP2_HEADER_SINGLE_VALUE' });
    expect((await post(upstream)).statusCode).toBe(200);
    expect(server.connections()).toBe(1);
  });
});
