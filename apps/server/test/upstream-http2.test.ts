import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { constants, createSecureServer, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAICompatibleUpstream } from '../src/upstream/openai-compatible.js';
import { UpstreamError } from '../src/upstream/upstream.js';
import { selfSignedCert } from './support/self-signed-cert.js';
import { BIG_CONTENT, sixteenMiBStream, startFakeUpstream, type FakeUpstream, type FakeUpstreamBehavior, type FakeUpstreamTransport } from './support/fake-upstream.js';
import { adminCommand, serverEnv, startServerProcess } from './support/processes.js';
import { chat, postChat, until } from './support/reliability-http.js';
import { startTestServer, type TestServer } from './support/test-server.js';

/**
 * svc's upstream over HTTPS + HTTP/2 (SVC_UPSTREAM_HTTP2=auto, upstream-pool.ts): a real node:http2 server
 * on a self-signed certificate, which offers h2 and http/1.1 by ALPN.
 */

const ANSWER = Array.from({ length: 12 }, (_, i) => `token${i}`).join(' ');

const started: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  // Servers before upstreams: a server closes its pool, which waits for its streams.
  for (const item of started.splice(0).reverse()) await item.close();
});

async function fakeUpstream(behavior: FakeUpstreamBehavior, transport: FakeUpstreamTransport = { https: 'h2' }): Promise<FakeUpstream> {
  const upstream = await startFakeUpstream(behavior, transport);
  started.push(upstream);
  return upstream;
}

/**
 * An in-process svc whose upstream trusts `upstream`'s certificate (the `ca` option: in this process
 * NODE_EXTRA_CA_CERTS can no longer be set; the child-process test below uses it).
 */
async function svcFor(upstream: FakeUpstream, env: Record<string, string> = {}): Promise<{ server: TestServer; token: string }> {
  const maxInFlight = Number(env.SVC_MAX_IN_FLIGHT ?? 4096);
  const server = await startTestServer({
    env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_RATE_LIMIT_RPM: '100000', ...env },
    upstream: createOpenAICompatibleUpstream({ baseUrl: upstream.url, timeoutMs: 20_000, ca: upstream.ca, connections: maxInFlight, http2: 'auto' }),
  });
  started.push(server);
  const { token } = await server.createKey();
  return { server, token };
}

async function metric(server: TestServer, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}

/** Listens on a port of loopback; closed after the test, `peers` (its sessions or sockets) destroyed first. */
async function listenUntilTheEnd(server: { listen(port: number, host: string, done: () => void): unknown; close(done: () => void): unknown }, peers: Set<{ destroy(): void }>): Promise<void> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  started.push({
    close: () =>
      new Promise<void>((resolve) => {
        for (const peer of peers) peer.destroy();
        server.close(() => resolve());
      }),
  });
}

/** Opens a stream and reads until its first content; returns the reader, the text so far and a way to abort. */
async function openStream(server: TestServer, token: string): Promise<{ status: number; rest(): Promise<string>; abort(): void }> {
  const controller = new AbortController();
  const res = await postChat(server.url, token, { stream: true, content: 'Count.', signal: controller.signal });
  if (res.status !== 200) {
    await res.body?.cancel();
    return { status: res.status, rest: async () => '', abort: () => controller.abort() };
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('"content":"token')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return {
    status: res.status,
    abort: () => controller.abort(),
    async rest() {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}

describe('upstream over HTTPS + HTTP/2', () => {
  it('streams and non-streamed completions go over h2', async () => {
    const upstream = await fakeUpstream({ answer: ANSWER });
    const { server, token } = await svcFor(upstream);

    const plain = await chat(server.url, token, { stream: false });
    expect(plain.status).toBe(200);
    expect(plain.body.choices[0].message.content).toBe(ANSWER);
    const streamed = await chat(server.url, token, { stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.text).toBe(ANSWER);
    expect(streamed.events!.at(-1)).toBe('[DONE]');

    expect(upstream.requests.map((r) => r.httpVersion)).toEqual(['2.0', '2.0']);
    expect(upstream.sessions).toBe(1);
  });

  it('250 streams open at once share at most ⌈SVC_MAX_IN_FLIGHT / 100⌉ connections', async () => {
    const streams = 250;
    // Headers held until all 250 are open upstream: the pool must send them concurrently, over 3 sessions at most.
    const upstream = await fakeUpstream({ answer: ANSWER, trickle: { intervalMs: 10 }, waitForOpen: { count: streams, timeoutMs: 30_000 } });
    const { server, token } = await svcFor(upstream, { SVC_MAX_IN_FLIGHT: '300' });

    const results = await Promise.all(Array.from({ length: streams }, () => chat(server.url, token, { stream: true, signal: AbortSignal.timeout(45_000) })));

    expect(results.filter((r) => r.status === 200 && r.text === ANSWER && r.events!.at(-1) === '[DONE]')).toHaveLength(streams);
    expect(upstream.peakOpen).toBe(streams);
    expect(upstream.sessions).toBeLessThanOrEqual(3);
    expect(upstream.connections).toBe(upstream.sessions);
    expect(new Set(upstream.requests.map((r) => r.httpVersion))).toEqual(new Set(['2.0']));
  });

  it('an HTTPS upstream that offers only http/1.1 gets HTTP/1.1, a connection per concurrent stream', async () => {
    const streams = 20;
    // Held until all 20 are open: streams queued behind one another on a connection would never get there.
    const upstream = await fakeUpstream({ answer: ANSWER, waitForOpen: { count: streams, timeoutMs: 20_000 } }, { https: 'h1' });
    const { server, token } = await svcFor(upstream);

    const results = await Promise.all(Array.from({ length: streams }, () => chat(server.url, token, { stream: true })));

    expect(results.filter((r) => r.status === 200 && r.text === ANSWER)).toHaveLength(streams);
    expect(upstream.peakOpen).toBe(streams);
    expect(upstream.connections).toBe(streams);
    expect(upstream.sessions).toBe(0);
    expect(new Set(upstream.requests.map((r) => r.httpVersion))).toEqual(new Set(['1.1']));
  });

  it("a client's abort cancels its h2 stream upstream; the stream beside it on the same session completes", async () => {
    const upstream = await fakeUpstream({ answer: ANSWER, trickle: { intervalMs: 40 } });
    const { server, token } = await svcFor(upstream);

    const leaving = await openStream(server, token);
    const staying = await openStream(server, token);
    leaving.abort();
    const aborted = await upstream.waitForAbort(10_000);

    expect(aborted.httpVersion).toBe('2.0');
    const text = await staying.rest();
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(upstream.requests.filter((r) => r.aborted)).toHaveLength(1);
    expect(upstream.sessions).toBe(1);
    await until(async () => (await metric(server, 'svc_chat_requests_in_flight')) === 0, 10_000, 'no chat request in flight');
  });

  it('SVC_MAX_IN_FLIGHT and the in-flight gauge count h2 streams as they count HTTP/1.1 requests', async () => {
    const upstream = await fakeUpstream({ answer: ANSWER, hangMidStream: true });
    const { server, token } = await svcFor(upstream, { SVC_MAX_IN_FLIGHT: '3' });

    const open = await Promise.all(Array.from({ length: 3 }, () => openStream(server, token)));
    expect(open.map((s) => s.status)).toEqual([200, 200, 200]);
    expect(await metric(server, 'svc_chat_requests_in_flight')).toBe(3);
    expect(await metric(server, 'svc_chat_requests_in_flight_max')).toBe(3);

    const refused = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', stream: true, messages: [{ role: 'user', content: 'One more.' }] }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await refused.json()).error.code).toBe('too_many_requests_in_flight');
    expect(upstream.requests).toHaveLength(3);

    for (const stream of open) stream.abort();
    await until(async () => (await metric(server, 'svc_chat_requests_in_flight')) === 0, 10_000, 'no chat request in flight');
    expect(upstream.sessions).toBe(1);
  });

  // undici 7's HTTP/2 client failed every stream on the session here (why svc has its own, h2-upstream.ts).
  it('a graceful GOAWAY: the streams in flight on that session finish, nothing is replayed, and the next request opens a new session', async () => {
    const upstream = await fakeUpstream({ answer: ANSWER, trickle: { intervalMs: 40 } });
    const { server, token } = await svcFor(upstream);

    const streams = await Promise.all(Array.from({ length: 3 }, () => openStream(server, token)));
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
    upstream.goaway();
    const texts = await Promise.all(streams.map((s) => s.rest()));

    for (const text of texts) {
      const events = text
        .split('\n\n')
        .filter((block) => block.startsWith('data: '))
        .map((block) => block.slice('data: '.length));
      expect(events.at(-1)).toBe('[DONE]');
      const content = events
        .slice(0, -1)
        .map((e) => (JSON.parse(e) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
        .join('');
      expect(content).toBe(ANSWER);
    }
    expect(upstream.requests).toHaveLength(3);
    expect(upstream.sessions).toBe(1);

    const after = await chat(server.url, token, { stream: true });
    expect(after.text).toBe(ANSWER);
    expect(upstream.requests).toHaveLength(4);
    expect(upstream.sessions).toBe(2);
  });

  it('a stream the upstream refused unprocessed (REFUSED_STREAM) is sent again; a stream reset after it was taken is not', async () => {
    const upstream = await fakeUpstream({ answer: ANSWER });
    const { server, token } = await svcFor(upstream);

    upstream.nextBehavior({ refuseStream: true });
    upstream.nextBehavior({ refuseStream: true });
    const retried = await chat(server.url, token, { stream: true });
    expect(retried.status).toBe(200);
    expect(retried.text).toBe(ANSWER);
    expect(upstream.requests).toHaveLength(3);

    // Any other reset may have reached the model: the client gets the error, the call is made once.
    upstream.nextBehavior({ resetBeforeHeaders: true });
    const reset = await chat(server.url, token, { stream: false });
    expect(reset.status).toBe(502);
    expect(reset.body.error.code).toBe('upstream_unavailable');
    expect(upstream.requests).toHaveLength(4);

    // An upstream that refuses every time: a few tries, then the error.
    upstream.setBehavior({ refuseStream: true });
    const refused = await chat(server.url, token, { stream: false });
    expect(refused.status).toBe(502);
    expect(refused.body.error.code).toBe('upstream_unavailable');
    expect(upstream.requests).toHaveLength(8);
  });

  it('answers whose headers and body arrive in one read reach the caller whole, headers first', async () => {
    // node emits a stream's 'response' a tick after its HEADERS frame; DATA read with it must wait for it. The
    // upstream runs in a worker thread and answers while this thread (svc's) is busy, so that svc finds each
    // answer's frames in its socket at once, as a loaded gateway does.
    const { key, cert } = selfSignedCert();
    const frames = ANSWER.split(' ').map((word, i) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: i ? ` ${word}` : word }, finish_reason: null }] })}\n\n`);
    const body = `${frames.join('')}data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`;
    const worker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
      const h2 = require('node:http2').createSecureServer({ key: workerData.key, cert: workerData.cert });
      let received = 0;
      h2.on('stream', (stream) => {
        stream.on('data', () => {});
        stream.on('end', () => {
          parentPort.postMessage({ received: ++received });
          setTimeout(() => {
            stream.respond({ ':status': 200, 'content-type': 'text/event-stream' });
            stream.end(workerData.body);
          }, 100);
        });
      });
      h2.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: h2.address().port }));`,
      { eval: true, workerData: { key, cert, body } },
    );
    started.push({ close: () => worker.terminate() });
    let received = 0;
    const port = await new Promise<number>((resolve) =>
      worker.on('message', (message: { port?: number; received?: number }) => {
        if (message.port) resolve(message.port);
        if (message.received) received = message.received;
      }),
    );
    const url = `https://127.0.0.1:${port}/v1`;
    const server = await startTestServer({
      env: { SVC_UPSTREAM_BASE_URL: url, SVC_RATE_LIMIT_RPM: '100000' },
      upstream: createOpenAICompatibleUpstream({ baseUrl: url, timeoutMs: 20_000, ca: cert, connections: 4096, http2: 'auto' }),
    });
    started.push(server);
    const { token } = await server.createKey();

    const streams = 50;
    const results = Promise.all(Array.from({ length: streams }, () => chat(server.url, token, { stream: true })));
    await until(async () => received === streams, 10_000, 'every request upstream');
    const busyUntil = performance.now() + 400;
    while (performance.now() < busyUntil);

    expect((await results).filter((r) => r.status === 200 && r.text === ANSWER && r.events!.at(-1) === '[DONE]')).toHaveLength(streams);
  });

  it('a GOAWAY whose last stream is below streams already sent: those were not processed and are sent again on a new session', async () => {
    const { key, cert } = selfSignedCert();
    const h2 = createSecureServer({ key, cert });
    const seen: number[] = [];
    let first = true;
    const sessions = new Set<ServerHttp2Session>();
    h2.on('session', (session) => {
      sessions.add(session);
      const streams: ServerHttp2Stream[] = [];
      const sessionFirst = first;
      first = false;
      session.on('stream', (stream) => {
        seen.push(stream.id!);
        // The refused one closes with REFUSED_STREAM here too.
        stream.on('error', () => {});
        stream.on('data', () => {});
        streams.push(stream);
        // The first session takes two streams, then says it processed only the first: the second is refused.
        if (sessionFirst && streams.length === 2) {
          session.goaway(constants.NGHTTP2_NO_ERROR, streams[0]!.id);
          streams[0]!.respond({ ':status': 200, 'content-type': 'application/json' });
          streams[0]!.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'first' }, finish_reason: 'stop' }] }));
        } else if (!sessionFirst) {
          stream.respond({ ':status': 200, 'content-type': 'application/json' });
          stream.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'again' }, finish_reason: 'stop' }] }));
        }
      });
    });
    await listenUntilTheEnd(h2, sessions);
    const client = createOpenAICompatibleUpstream({ baseUrl: `https://127.0.0.1:${(h2.address() as AddressInfo).port}/v1`, timeoutMs: 10_000, ca: cert, connections: 4096, http2: 'auto' });
    started.push(client);

    const ask = () => client.complete({ body: { model: 'm', messages: [{ role: 'user', content: 'Hi' }] }, signal: new AbortController().signal, thinking: false });
    const answers = await Promise.all([ask(), ask()]);

    expect(answers.map((a) => a.choices[0]!.message.content).sort()).toEqual(['again', 'first']);
    expect(seen).toEqual([1, 3, 1]);
    // Closing does not wait for the first session, whose server never closes the stream it refused.
    await client.close();
  });

  it('a client that stops reading a 16 MiB stream holds up neither the session nor the 20 streams beside it', async () => {
    const upstream = await fakeUpstream({ answer: ANSWER });
    const { server, token } = await svcFor(upstream);
    upstream.nextBehavior({ rawSse: sixteenMiBStream() });

    const res = await postChat(server.url, token, { stream: true, content: 'Big.' });
    const reader = res.body!.getReader();
    // One read, then the client stops reading while the others go.
    await reader.read();
    const small = await Promise.all(Array.from({ length: 20 }, () => chat(server.url, token, { stream: true })));
    expect(small.filter((r) => r.status === 200 && r.text === ANSWER)).toHaveLength(20);
    let bytes = 0;
    let tail = '';
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      bytes += next.value.length;
      tail = (tail + Buffer.from(next.value).toString('latin1')).slice(-64);
    }
    expect(bytes).toBeGreaterThan(BIG_CONTENT.length * 8 * 64);
    expect(tail.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(upstream.sessions).toBe(1);
  });

  it('a 4 MB answer and 20 streams beside it on one session all arrive whole (flow control)', async () => {
    const long = 'word '.repeat(800_000).trim();
    const upstream = await fakeUpstream({ answer: ANSWER });
    const { server, token } = await svcFor(upstream);

    upstream.nextBehavior({ answer: long });
    const [big, ...small] = await Promise.all([chat(server.url, token, { stream: false }), ...Array.from({ length: 20 }, () => chat(server.url, token, { stream: true }))]);
    expect(big.status).toBe(200);
    expect(big.body.choices[0].message.content).toBe(long);
    expect(small.filter((r) => r.status === 200 && r.text === ANSWER)).toHaveLength(20);
    expect(upstream.sessions).toBe(1);
  });

  it('an upstream whose certificate svc does not trust: 20 requests sent during the first handshake all fail with the upstream error on a handful of connection attempts', async () => {
    const upstream = await fakeUpstream({ answer: ANSWER });
    // No `ca`: the self-signed certificate fails verification.
    const client = createOpenAICompatibleUpstream({ baseUrl: upstream.url, timeoutMs: 20_000, connections: 4096, http2: 'auto' });
    started.push(client);

    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, () =>
        client.complete({ body: { model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }] }, signal: new AbortController().signal, thinking: false }),
      ),
    );

    expect(outcomes.map((o) => o.status)).toEqual(Array(20).fill('rejected'));
    for (const outcome of outcomes) expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(UpstreamError);
    expect(new Set(outcomes.map((o) => ((o as PromiseRejectedResult).reason as UpstreamError).code))).toEqual(new Set(['upstream_unavailable']));
    expect(upstream.requests).toHaveLength(0);
    expect(upstream.connections).toBeLessThanOrEqual(3);
  });

  it('closing while the first handshake is under way fails the requests waiting for it at once', async () => {
    // Accepts TCP and never answers the TLS hello: the first handshake stays under way until its timeout.
    const sockets = new Set<Socket>();
    const silent = createNetServer((socket) => void sockets.add(socket));
    await listenUntilTheEnd(silent, sockets);
    const { port } = silent.address() as AddressInfo;
    const client = createOpenAICompatibleUpstream({ baseUrl: `https://127.0.0.1:${port}/v1`, timeoutMs: 20_000, firstByteTimeoutMs: 8_000, connections: 4096, http2: 'auto' });

    const settled: unknown[] = [];
    const calls = Array.from({ length: 5 }, () =>
      client
        .complete({ body: { model: 'gpt-test', messages: [{ role: 'user', content: 'Hi' }] }, signal: new AbortController().signal, thinking: false })
        .catch((error: unknown) => void settled.push(error)),
    );
    // The handshake is under way (the silent server holds its connection) and the five wait for it.
    await until(() => sockets.size > 0, 15_000, 'the first handshake under way');
    expect(settled).toHaveLength(0);
    const closing = client.close();

    // All five waited for the handshake, which closing ends: they fail with the close's error, not the connect
    // timeout's (8 s later), however long a loaded host takes to get them there.
    await Promise.all(calls);
    expect(settled).toHaveLength(5);
    for (const error of settled) expect(error).toMatchObject({ code: 'upstream_unavailable', cause: { code: 'UND_ERR_CLOSED' } });
    await closing;
  });

  it('upstream errors reach the client as they do over HTTP/1.1', async () => {
    const cases: Array<{ name: string; behavior: FakeUpstreamBehavior; stream: boolean }> = [
      { name: '400 with code and param', behavior: { status: 400, errorMessage: 'Bad temperature.', errorCode: 'invalid_value', errorParam: 'temperature' }, stream: false },
      { name: '400 (stream)', behavior: { status: 400, errorMessage: 'Bad temperature.', errorCode: 'invalid_value', errorParam: 'temperature' }, stream: true },
      { name: '429 with retry-after', behavior: { status: 429, retryAfter: '7' }, stream: false },
      { name: '429 (stream)', behavior: { status: 429, retryAfter: '7' }, stream: true },
      { name: '500', behavior: { status: 500 }, stream: false },
      { name: 'reset before headers', behavior: { resetBeforeHeaders: true }, stream: true },
      { name: 'reset mid-stream', behavior: { resetMidStream: 3 }, stream: true },
      { name: 'error event', behavior: { errorEvent: true }, stream: true },
      { name: 'truncated', behavior: { truncated: true }, stream: true },
    ];
    const outcomes: Record<string, unknown[]> = {};
    for (const transport of [{}, { https: 'h2' }] as FakeUpstreamTransport[]) {
      const upstream = await fakeUpstream({ answer: ANSWER }, transport);
      const { server, token } = await svcFor(upstream);
      for (const c of cases) {
        upstream.nextBehavior(c.behavior);
        (outcomes[c.name] ??= []).push(await seen(server.url, token, c.stream));
      }
      expect(new Set(upstream.requests.map((r) => r.httpVersion)), JSON.stringify(transport)).toEqual(new Set([transport.https ? '2.0' : '1.1']));
    }
    for (const c of cases) {
      const [overH1, overH2] = outcomes[c.name]!;
      expect(overH2, c.name).toEqual(overH1);
    }
    expect(outcomes['429 with retry-after']![1]).toMatchObject({ status: 429, retryAfter: '7', error: { code: 'upstream_rate_limited' } });
    expect(outcomes['400 with code and param']![1]).toMatchObject({ status: 400, error: { code: 'invalid_value', param: 'temperature', message: 'Bad temperature.' } });
  });
});

/**
 * What a client can tell apart of one chat request: status, retry-after, the error's code/type/param/message
 * (a message that names a transport-level cause is left out), and the stream's events (chunks, error codes, [DONE]).
 */
async function seen(url: string, token: string, stream: boolean): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', stream, messages: [{ role: 'user', content: 'Hi' }] }),
    signal: AbortSignal.timeout(20_000),
  });
  const raw = await res.text();
  const out: Record<string, unknown> = { status: res.status, retryAfter: res.headers.get('retry-after') };
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const { code, type, param, message } = (JSON.parse(raw) as { error?: Record<string, unknown> }).error ?? {};
    out.error = { code, type, param, ...(res.status === 502 ? {} : { message }) };
    return out;
  }
  out.events = raw
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => {
      const data = block.slice('data: '.length);
      if (data === '[DONE]') return data;
      const event = JSON.parse(data) as { error?: { code: string } };
      return event.error ? { error: event.error.code } : 'chunk';
    });
  return out;
}

describe('svc-server with an HTTPS upstream (child process)', () => {
  it('trusts the upstream through NODE_EXTRA_CA_CERTS; SVC_UPSTREAM_HTTP2 auto (the default) speaks h2, off HTTP/1.1', async () => {
    const upstream = await fakeUpstream({ answer: ANSWER });
    const dir = mkdtempSync(join(tmpdir(), 'svc-h2-'));
    try {
      const caFile = join(dir, 'upstream-ca.pem');
      writeFileSync(caFile, upstream.ca!);
      for (const [setting, version] of [[undefined, '2.0'], ['off', '1.1']] as const) {
        const env = serverEnv({
          SVC_DATABASE_URL: `sqlite:${join(dir, setting ?? 'default', 'svc.db')}`,
          SVC_UPSTREAM_BASE_URL: upstream.url,
          ...(setting ? { SVC_UPSTREAM_HTTP2: setting } : {}),
          NODE_EXTRA_CA_CERTS: caFile,
        });
        adminCommand(['users', 'create', '--email', 'h2@example.test', '--password', 'correct horse battery staple'], env);
        const { key } = JSON.parse(adminCommand(['keys', 'create', '--email', 'h2@example.test', '--json'], env)) as { key: string };
        const server = await startServerProcess(env);
        try {
          const before = upstream.requests.length;
          const streamed = await chat(server.url, key, { stream: true });
          const plain = await chat(server.url, key, { stream: false });
          expect(streamed.text).toBe(ANSWER);
          expect(plain.body.choices[0].message.content).toBe(ANSWER);
          expect(upstream.requests.slice(before).map((r) => r.httpVersion)).toEqual([version, version]);
        } finally {
          await server.stop();
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
