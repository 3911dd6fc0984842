import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifySignature, verifyWebhook } from '@svc/verify';
import { runCli, startListen, useSandbox } from './cli-process.js';
import { postDelivery, samplePayload, SECRET } from './deliveries-fixture.js';
import { startReceiver } from './receiver.js';

// Deliveries here are POSTed by the test exactly as the server sends them; server.e2e.test.ts has the
// same behaviour with real deliveries from a running server.
describe('svc-cli listen', () => {
  const sandbox = useSandbox();

  it('prints Ready with its real URL, one line per delivery within 80 columns, ✔ for the right secret and ✘ + 401 for a wrong one', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    expect(listen.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(listen.url).not.toContain(':0/');

    const good = await postDelivery(listen.url, samplePayload('chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9'), { secret: SECRET, deliveryId: 'whd_0193a1b2c3d4e5f60718293a4b5c6d7e' });
    expect(good.status).toBe(200);
    const bad = await postDelivery(listen.url, samplePayload('test-bad'), { secret: 'whsec_wrong', deliveryId: 'whd_bad' });
    expect(bad.status).toBe(401);
    const unsigned = await postDelivery(listen.url, samplePayload('test-unsigned'), { deliveryId: 'whd_unsigned' });
    expect(unsigned.status).toBe(401);

    const lines = listen.stdout().trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d {2}--> llm\.request\.completed \[chatcm\w*…\] {2}200 · not grounded · test · sig ✔$/);
    expect(lines[1]).toMatch(/--> llm\.request\.completed \[test-b\w*…\] {2}200 · [^\n]*sig ✘$/);
    expect(lines[2]).toContain('sig ✘');
    expect(listen.stdout()).not.toMatch(/\u001b\[/);
  });

  it('warns on stderr when a delivery number is skipped, and says so when the missing one arrives late', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    const numbered = (n: number) => samplePayload(`chatcmpl-seq${n}`).replace('"test":true, ', `"sequence":${n}, `);
    const signed = (n: number, timestamp = Math.floor(Date.now() / 1000)) => ({ secret: SECRET, deliveryId: `whd_seq${n}`, timestamp });
    for (const n of [1, 2, 4]) await postDelivery(listen.url, numbered(n), signed(n));
    // A delivery failing verification says nothing about the sequence.
    await postDelivery(listen.url, numbered(9), { secret: 'whsec_wrong', deliveryId: 'whd_seq9' });
    await listen.waitFor('stderr', /^\d\d:\d\d:\d\d {2}! gap: delivery 3 not received before 4 \(user 0d3f4a52…\)$/m);
    await postDelivery(listen.url, numbered(3), signed(3));
    await listen.waitFor('stderr', /delivery 3 arrived late; no gap left/);
    // A retry of 4 (signed afresh): a duplicate, nothing to say.
    expect((await postDelivery(listen.url, numbered(4), signed(4, Math.floor(Date.now() / 1000) + 1))).status).toBe(200);
    await postDelivery(listen.url, numbered(8), signed(8));
    await listen.waitFor('stderr', /! gap: 3 deliveries: 5–7 not received before 8/);
    listen.child.kill('SIGINT');
    const { stderr, stdout } = await listen.exited;
    expect(stderr.match(/gap:/g)).toHaveLength(2);
    expect(stderr).not.toMatch(/before 9|delivery 9/);
    expect(stdout).not.toContain('gap');
  });

  it('reports a gap of billions as one range at once, and a late arrival inside it', async () => {
    const listen = await startListen([], { cwd: sandbox.path });
    const numbered = (n: number) => samplePayload(`chatcmpl-seq${n}`).replace('"test":true, ', `"sequence":${n}, `);
    const began = Date.now();
    for (const n of [1, Number.MAX_SAFE_INTEGER, 5]) expect((await postDelivery(listen.url, numbered(n))).status).toBe(200);
    expect(Date.now() - began).toBeLessThan(2000);
    await listen.waitFor('stderr', /! gap: 9007199254740989 deliveries: 2–9007199254740990 not received before 9007199254740991/);
    await listen.waitFor('stderr', /delivery 5 arrived late; still missing 9007199254740988 deliveries: 2–4, 6–9007199254740990/);
  });

  it('prints what a request carries escaped: a rejected body cannot clear the screen or retitle the window', async () => {
    const listen = await startListen(['--secret', SECRET, '--json'], { cwd: sandbox.path });
    const hostile = JSON.stringify({ event: '\u001b[2J\u001b[3J', request_id: '\u001b]0;owned\u0007x', user_id: '\u009b2J', sequence: 3 });
    expect((await postDelivery(listen.url, hostile, { secret: 'whsec_wrong' })).status).toBe(401);
    expect((await postDelivery(listen.url, '{"event":"e","request_id":"r","raw":"\u001b[2J"}')).status).toBe(401);
    listen.child.kill('SIGINT');
    const { stdout, stderr } = await listen.exited;
    // eslint-disable-next-line no-control-regex
    for (const text of [stdout, stderr]) expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(stderr).toMatch(/--> \\u001b\[2J\\u001b\[3J \[\\u001b\]0;o/);
    // --json: the first body as valid JSON meaning the same, the second (raw ESC in a string: not JSON) escaped.
    const [first, second] = stdout.trimEnd().split('\n');
    expect(JSON.parse(first!)).toEqual(JSON.parse(hostile));
    expect(second).toBe('{"event":"e","request_id":"r","raw":"\\u001b[2J"}');
  });

  it('checks the Standard Webhooks headers: a stale webhook-timestamp or the same delivery twice is refused as a replay', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    const now = Math.floor(Date.now() / 1000);
    const fresh = { secret: SECRET, deliveryId: 'whd_fresh', timestamp: now };
    expect((await postDelivery(listen.url, samplePayload('test-fresh'), fresh)).status).toBe(200);
    expect((await postDelivery(listen.url, samplePayload('test-fresh'), fresh)).status).toBe(401);
    // A retry is signed afresh (new timestamp, same id): not a replay.
    expect((await postDelivery(listen.url, samplePayload('test-fresh'), { ...fresh, timestamp: now + 1 })).status).toBe(200);
    const stale = await postDelivery(listen.url, samplePayload('test-stale'), { secret: SECRET, deliveryId: 'whd_stale', timestamp: now - 600 });
    expect(stale.status).toBe(401);
    // Only X-Svc-Signature (svc-cli replay, servers before Standard Webhooks): verified by it.
    expect((await postDelivery(listen.url, samplePayload('test-legacy'), { secret: SECRET, standard: false })).status).toBe(200);
    const lines = listen.stdout().trimEnd().split('\n');
    expect(lines.map((l) => (l.endsWith('sig ✔') ? '✔' : '✘'))).toEqual(['✔', '✘', '✔', '✘', '✔']);
    expect(listen.stderr()).toMatch(/whd_fresh at \d+ was already received: refused as a replay/);
    expect(listen.stderr()).toMatch(/webhook-timestamp is 6\d\d s old \(tolerance 300 s\): refused as a replay/);
  });

  it('--tolerance widens the timestamp window', async () => {
    const listen = await startListen(['--secret', SECRET, '--tolerance', '900'], { cwd: sandbox.path });
    const timestamp = Math.floor(Date.now() / 1000) - 600;
    expect((await postDelivery(listen.url, samplePayload(), { secret: SECRET, timestamp })).status).toBe(200);
    expect((await runCli(['listen', '--tolerance', 'soon'], { cwd: sandbox.path })).stderr).toContain('Must be a whole number of seconds');
  });

  it('--wide prints every detail and the full ids', async () => {
    const listen = await startListen(['--secret', SECRET, '--wide'], { cwd: sandbox.path });
    await postDelivery(listen.url, samplePayload('chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9'), { secret: SECRET, deliveryId: 'whd_0193a1b2c3d4e5f60718293a4b5c6d7e' });
    const [line] = listen.stdout().trimEnd().split('\n');
    expect(line).toMatch(/^\d\d:\d\d:\d\d {2}--> llm\.request\.completed \[chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9\] {2}/);
    expect(line).toContain('svc01 200 · 12+34=46 tokens · 532 ms · not grounded (hallucination 0.25) · test · signature ✔  whd_0193a1b2c3d4e5f60718293a4b5c6d7e');
  });

  it('without a secret or test marker there is room for tokens and latency', async () => {
    const listen = await startListen([], { cwd: sandbox.path });
    const body = samplePayload('chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9').replace('"test":true', '"test":false').replace('"grounded":false', '"grounded":true');
    await postDelivery(listen.url, body);
    const [line] = listen.stdout().trimEnd().split('\n');
    expect(line!.length).toBeLessThanOrEqual(80);
    expect(line).toMatch(/\[chatcmpl-\w+…\] {2}200 · 46 tok · grounded$/);
  });

  it('without --secret accepts every delivery and shows no signature mark', async () => {
    const listen = await startListen([], { cwd: sandbox.path });
    expect((await postDelivery(listen.url, samplePayload(), { secret: 'anything' })).status).toBe(200);
    expect(listen.stdout()).toContain('--> llm.request.completed [test-0001]');
    expect(listen.stdout()).not.toContain('sig ');
  });

  it('--json prints each raw body on one line of stdout, byte-for-byte, and nothing else', async () => {
    const listen = await startListen(['--json'], { cwd: sandbox.path });
    const bodies = [samplePayload('test-a'), samplePayload('test-b')];
    for (const body of bodies) await postDelivery(listen.url, body);
    listen.child.kill('SIGINT');
    const result = await listen.exited;
    expect(result.stdoutBytes.equals(Buffer.from(bodies.map((b) => `${b}\n`).join(''), 'utf8'))).toBe(true);
    expect(result.stderr).toContain('--> llm.request.completed [test-a]');
  });

  it('appends every delivery (time, headers, raw body as base64, URL) to the log, creating its directory', async () => {
    const logFile = join(sandbox.path, 'nested', 'dir', 'log.jsonl');
    const listen = await startListen(['--secret', SECRET, '--log', logFile, '--path', '/webhooks/svc'], { cwd: sandbox.path });
    expect(listen.url).toMatch(/\/webhooks\/svc$/);
    const body = samplePayload('test-log');
    await postDelivery(listen.url, body, { secret: SECRET, deliveryId: 'whd_log1' });
    await postDelivery(`${listen.url}?source=test`, body, { secret: 'whsec_wrong', deliveryId: 'whd_log2' });

    const entries = readFileSync(logFile, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line));
    expect(entries).toHaveLength(2);
    const [first, second] = entries;
    expect(Buffer.from(first.body_base64, 'base64').toString('utf8')).toBe(body);
    expect(first).toMatchObject({ id: 'whd_log1', event: 'llm.request.completed', method: 'POST', url: listen.url, signature: 'valid', status: 200 });
    expect(new Date(first.time).toISOString()).toBe(first.time);
    expect(first.headers['x-svc-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(first.headers['content-type']).toBe('application/json');
    expect(second).toMatchObject({ id: 'whd_log2', url: `${listen.url}?source=test`, signature: 'invalid', status: 401 });
  });

  it('the default log is .svc/deliveries.jsonl in the working directory', async () => {
    const listen = await startListen([], { cwd: sandbox.path });
    await postDelivery(listen.url, samplePayload());
    expect(readFileSync(join(sandbox.path, '.svc', 'deliveries.jsonl'), 'utf8').split('\n').filter(Boolean)).toHaveLength(1);
  });

  it('answers 404 off its path (and says so on stderr) and 405 for other methods, without counting them', async () => {
    const listen = await startListen(['--path', '/hooks'], { cwd: sandbox.path });
    const origin = new URL(listen.url).origin;
    expect((await postDelivery(`${origin}/other`, samplePayload())).status).toBe(404);
    await listen.waitFor('stderr', /\[404\] POST \/other: not a delivery path; deliveries are accepted at \/hooks/);
    expect((await fetch(listen.url)).status).toBe(405);
    listen.child.kill('SIGINT');
    expect((await listen.exited).stderr).toContain('0 deliveries received');
  });

  it('--forward-to sends the exact bytes with Content-Type, X-Svc-* and webhook-* headers and prints <-- [status] POST url', async () => {
    const target = await sandbox.receiver({ status: 202 });
    const listen = await startListen(['--secret', SECRET, '--forward-to', target.url], { cwd: sandbox.path });
    const body = samplePayload('test-fwd');
    // svc gets the forward target's answer.
    expect((await postDelivery(listen.url, body, { secret: SECRET, deliveryId: 'whd_fwd' })).status).toBe(202);
    const [forwarded] = await target.waitForRequests(1);
    expect(forwarded!.method).toBe('POST');
    expect(forwarded!.body.equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(forwarded!.headers['content-type']).toBe('application/json');
    expect(forwarded!.headers['x-svc-event']).toBe('llm.request.completed');
    expect(forwarded!.headers['x-svc-delivery']).toBe('whd_fwd');
    expect(verifySignature(forwarded!.body, forwarded!.headers['x-svc-signature'] as string, SECRET)).toBe(true);
    // The app behind listen can verify the Standard Webhooks headers as it will in production.
    expect(forwarded!.headers['webhook-id']).toBe('whd_fwd');
    expect(verifyWebhook(forwarded!.body, forwarded!.headers as Record<string, string>, SECRET)).toBe(true);
    await listen.waitFor('stdout', new RegExp(`<-- \\[202\\] POST ${target.url.replace(/[.?]/g, '\\$&')} \\[whd_fwd\\]`));

    // A delivery with a bad signature is answered 401 and not passed on.
    await postDelivery(listen.url, body, { secret: 'whsec_wrong' });
    await listen.waitFor('stderr', /not forwarded: the signature is invalid/);
    expect(target.requests).toHaveLength(1);
  });

  it('a forward target that is down: an error, a 502 to svc (so it retries), and the listener keeps going', async () => {
    const down = await startReceiver();
    const downUrl = down.url;
    await down.close();
    const listen = await startListen(['--forward-to', downUrl], { cwd: sandbox.path });
    const first = await postDelivery(listen.url, samplePayload('test-1'));
    expect(first.status).toBe(502);
    expect(first.body).toContain('could not reach');
    await listen.waitFor('stderr', /✘ POST http:\/\/127\.0\.0\.1:\d+\/hooks failed: connection refused/);
    expect((await postDelivery(listen.url, samplePayload('test-2'))).status).toBe(502);
    await listen.waitFor('stderr', /failed: connection refused[^\n]*\n[^]*failed: connection refused/);
    expect(listen.stdout()).toContain('[test-2]');

    listen.child.kill('SIGINT');
    const result = await listen.exited;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('2 deliveries received, 0 forwarded, 2 failed to forward');
  });

  it('a forward target answering 500 is shown as <-- [500], and svc gets the 500', async () => {
    const target = await sandbox.receiver({ status: 500 });
    const listen = await startListen(['--forward-to', target.url], { cwd: sandbox.path });
    expect((await postDelivery(listen.url, samplePayload())).status).toBe(500);
    await listen.waitFor('stdout', /<-- \[500\] POST /);
  });

  it("svc gets the forward target's retry-after and svc-duplicate, which it acts on", async () => {
    // Were dropped: svc never saw a 409's retry-after, nor that a 200 was a duplicate the target skipped.
    const busy = await sandbox.receiver({ status: 409, headers: { 'retry-after': '30' } });
    const toBusy = await startListen(['--forward-to', busy.url], { cwd: sandbox.path });
    const refused = await postDelivery(toBusy.url, samplePayload());
    expect(refused.status).toBe(409);
    expect(refused.headers.get('retry-after')).toBe('30');
    const seen = await sandbox.receiver({ status: 200, headers: { 'svc-duplicate': 'true' } });
    const toSeen = await startListen(['--forward-to', seen.url], { cwd: sandbox.path });
    const duplicate = await postDelivery(toSeen.url, samplePayload());
    expect(duplicate.status).toBe(200);
    expect(duplicate.headers.get('svc-duplicate')).toBe('true');
  });

  it('colours follow kleur (FORCE_COLOR / NO_COLOR) and --no-color turns them off', async () => {
    const coloured = await startListen(['--secret', SECRET], { cwd: sandbox.path, env: { NO_COLOR: undefined, FORCE_COLOR: '1' } });
    await postDelivery(coloured.url, samplePayload(), { secret: SECRET });
    expect(coloured.stdout()).toContain('\u001b[32m✔\u001b[39m');
    expect(coloured.stderr()).toContain('\u001b[1mReady!');

    const plain = await startListen(['--secret', SECRET, '--no-color'], { cwd: sandbox.path, env: { NO_COLOR: undefined, FORCE_COLOR: '1' } });
    await postDelivery(plain.url, samplePayload(), { secret: SECRET });
    expect(plain.stdout()).toContain('sig ✔');
    expect(plain.stdout() + plain.stderr()).not.toContain('\u001b[');
  });

  it.each(['SIGINT', 'SIGTERM'] as const)('%s exits 0 with a summary of received, verified and failed', async (signal) => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    await postDelivery(listen.url, samplePayload(), { secret: SECRET, deliveryId: 'whd_sig1' });
    await postDelivery(listen.url, samplePayload(), { secret: SECRET, deliveryId: 'whd_sig2' });
    await postDelivery(listen.url, samplePayload(), { secret: 'whsec_wrong' });
    listen.child.kill(signal);
    const result = await listen.exited;
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('Done: 3 deliveries received, 2 verified, 1 failed verification.');
    expect(result.stderr).not.toMatch(/at .*\.js:\d+/);
  });

  it.each([
    [['--port', 'abc'], /--port <port>' argument 'abc' is invalid/],
    [['--port', '70000'], /argument '70000' is invalid/],
    [['--port', '-1'], /--port/],
    [['--forward-to', 'ftp://example.com/x'], /--forward-to <url>' argument 'ftp:\/\/example.com\/x' is invalid/],
    [['--forward-to', 'http://exa mple.com'], /--forward-to/],
    [['--path', 'hooks'], /--path <path>' argument 'hooks' is invalid/],
  ])('bad input %j: one line on stderr, non-zero exit', async (args, message) => {
    const result = await runCli(['listen', ...args], { cwd: sandbox.path });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stdout).toBe('');
  });

  it('a log path that cannot be written: one line on stderr, non-zero exit', async () => {
    writeFileSync(join(sandbox.path, 'afile'), '');
    const result = await runCli(['listen', '--port', '0', '--log', 'afile/log.jsonl'], { cwd: sandbox.path });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('svc-cli: cannot write the delivery log afile/log.jsonl: a part of the path is a file, not a directory\n');
  });

  it('a port already in use: one line on stderr, non-zero exit', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
    try {
      const { port } = blocker.address() as { port: number };
      const result = await runCli(['listen', '--port', String(port)], { cwd: sandbox.path });
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`svc-cli: cannot listen on 127.0.0.1:${port}: the port is already in use (try --port 0)\n`);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });
});
