import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { signWebhook, verifySignature, verifyWebhook } from '@svc/verify';
import { request } from 'undici';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { runCli, startCli, startListen, useSandbox } from './cli-process.js';
import { postDelivery, samplePayload, SECRET } from './deliveries-fixture.js';
import { startReceiver } from './receiver.js';
import { expressJsonFirstReceiver, expressReceiver } from './check-receivers.js';

// Deliveries here are POSTed by the test exactly as the server sends them; server.e2e.test.ts has the
// same behaviour with real deliveries from a running server.
describe('svc-cli listen', () => {
  const sandbox = useSandbox();

  it('in an 80-column terminal: prints Ready with its real URL, one line per delivery within 80 columns, ✔ for the right secret and ✘ + 401 for a wrong one', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path, terminal: { stream: 'stdout', columns: 80 } });
    expect(listen.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(listen.url).not.toContain(':0/');

    const good = await postDelivery(listen.url, samplePayload('chatcmpl-3Jx0d7rZr1kqzqgm1o3mX0w9'), { secret: SECRET, deliveryId: 'whd_0193a1b2c3d4e5f60718293a4b5c6d7e' });
    expect(good.status).toBe(200);
    const bad = await postDelivery(listen.url, samplePayload('test-bad'), { secret: 'whsec_wrong', deliveryId: 'whd_bad' });
    expect(bad.status).toBe(401);
    const unsigned = await postDelivery(listen.url, samplePayload('test-unsigned'), { deliveryId: 'whd_unsigned' });
    expect(unsigned.status).toBe(401);
    // The answer says why, in svc's error shape, as the dashboard's delivery log and `deliveries show` print it, and
    // as a receiver built on @svc/verify answers (`errorBody`).
    expect(JSON.parse(bad.body)).toMatchObject({ error: { type: 'authentication_error', code: 'signature_mismatch', param: null } });
    const unsignedError = (JSON.parse(unsigned.body) as { error: { code: string; message: string } }).error;
    // Unsigned is what a key without a signing secret sends: not a mismatch, and the fix is on the key.
    expect(unsignedError.code).toBe('missing_signature');
    expect(unsignedError.message).toContain('--signing-secret');

    // The terminal passes the lines on a little later than the listener answers.
    await listen.waitFor('stdout', /^(?:.*\n){3}/);
    const lines = listen.stdout().trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d {2}--> llm\.request\.completed \[chatcm\w*…\] {2}200 · not grounded · test · sig ✔$/);
    expect(lines[1]).toMatch(/--> llm\.request\.completed \[test-b\w*…\] {2}200 · [^\n]*sig ✘$/);
    expect(lines[2]).toContain('sig ✘');
    expect(listen.stdout()).not.toMatch(/\u001b\[/);
  });

  it('--host 0.0.0.0: says what it is bound to, and prints a URL at a network address of this machine (not 127.0.0.1) as the one to use', async () => {
    const listen = await startListen(['--host', '0.0.0.0'], { cwd: sandbox.path });
    const port = new URL(listen.url).port;
    const external = Object.values(networkInterfaces())
      .flatMap((addresses) => addresses ?? [])
      .filter((a) => !a.internal && a.family === 'IPv4')
      .map((a) => `http://${a.address}:${port}/`);
    const loopback = `http://127.0.0.1:${port}/`;
    expect(listen.url).toBe(external[0] ?? loopback);
    expect(listen.stderr()).toContain(`Bound to 0.0.0.0:${port} (every network interface): deliveries reach it at ${[...external, loopback].join(', ')}\n`);
    // Sent here through loopback only: the test sends nothing to the machine's network addresses.
    expect((await postDelivery(loopback, samplePayload())).status).toBe(200);
  });

  it('--secret missing its whsec_ prefix (standardwebhooks and svix take it either way): the refusal says so', async () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const listen = await startListen(['--secret', secret.slice('whsec_'.length)], { cwd: sandbox.path });
    const refused = await postDelivery(listen.url, samplePayload(), { secret });
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'signature_mismatch', message: expect.stringContaining('missing its "whsec_" prefix') } });
    await listen.waitFor('stderr', /✘ webhook-signature does not match: .*missing its "whsec_" prefix/);
  });

  it('--secret set to the API key (sk-svc-…): the refusal says it is not the signing secret', async () => {
    const listen = await startListen(['--secret', 'sk-svc-18JOpJ4GtO3VT31VBnAM_rrcqnAbieEU8IP5famBQ7k'], { cwd: sandbox.path });
    const refused = await postDelivery(listen.url, samplePayload(), { secret: SECRET });
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'signature_mismatch', message: expect.stringContaining("is an svc API key (sk-svc-…), not the key's signing secret") } });
    await listen.waitFor('stderr', /✘ webhook-signature does not match: .*is an svc API key/);
  });

  it('a delivery over 10 MiB (a long prompt and its answer) is received, verified and logged; one over 64 MiB is refused 413 and said so', async () => {
    const log = join(sandbox.path, 'big.jsonl');
    const listen = await startListen(['--secret', SECRET, '--log', log], { cwd: sandbox.path });
    const prompt = 'a'.repeat(11 * 1024 * 1024);
    const big = samplePayload('chatcmpl-big').replace('"user: caf\\u00e9?"', `"user: ${prompt}"`);
    expect(big.length).toBeGreaterThan(11 * 1024 * 1024);
    const accepted = await postDelivery(listen.url, big, { secret: SECRET, deliveryId: 'whd_big' });
    expect(accepted.status).toBe(200);
    await listen.waitFor('stdout', /--> llm\.request\.completed \[chatcmpl-big\][^\n]*signature ✔ {2}whd_big\n/);
    expect(Buffer.from(JSON.parse(readFileSync(log, 'utf8').trim()).body_base64, 'base64').toString()).toBe(big);

    // Over the limit: svc would retry it, so the terminal says so rather than staying silent.
    const huge = await postDelivery(listen.url, samplePayload('chatcmpl-huge').replace('"user: caf\\u00e9?"', `"user: ${'a'.repeat(65 * 1024 * 1024)}"`), { deliveryId: 'whd_huge' });
    expect(huge.status).toBe(413);
    await listen.waitFor('stderr', /✘ \[413\] POST \/: a body over 64 MiB, not read \[whd_huge\]\n/);
  });

  it('deliveries announcing more than 256 MiB at once: the one past it is answered 503 with retry-after, and the room comes back once they go', async () => {
    const listen = await startListen([], { cwd: sandbox.path });
    const { hostname, port } = new URL(listen.url);
    // Four bodies of 64 MiB (the most one may be) announced and never sent hold all 256 MiB: a fifth, or any other
    // delivery, is received only once their room came back.
    const sockets: Socket[] = [];
    const answers: Array<Promise<string>> = [];
    try {
      for (let i = 0; i < 5; i++) {
        const socket = connect({ host: hostname, port: Number(port) });
        sockets.push(socket);
        answers.push(new Promise((resolve) => {
          let text = '';
          socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
          socket.on('close', () => resolve(text));
          socket.on('error', () => resolve(text));
        }));
        await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
        socket.write(`POST / HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\nwebhook-id: whd_hold${i}\r\ncontent-length: ${64 * 1024 * 1024}\r\n\r\n`);
      }
      // The one the listener reads fifth: on a loaded host not always the one sent fifth (each on its own connection).
      const fifth = await Promise.race([
        ...answers.map((answer, i) => answer.then((text) => ({ i, text }))),
        new Promise<{ i: number; text: string }>((resolve) => setTimeout(() => resolve({ i: -1, text: 'no answer' }), 20_000)),
      ]);
      expect(fifth.text).toMatch(/^HTTP\/1\.1 503 /);
      expect(fifth.text).toMatch(/\r\nretry-after: \d+\r\n/i);
      await listen.waitFor('stderr', new RegExp(`! \\[503\\] POST /: 256 MiB of deliveries are being read already; asked to retry \\[whd_hold${fifth.i}\\]`));
      // Only that one: the other four are still being read.
      expect(listen.stderr().match(/! \[503\]/g)).toHaveLength(1);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    // The four that went (their connections cut mid-body) give their room back: a delivery is received again.
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await postDelivery(listen.url, samplePayload('chatcmpl-after'), { deliveryId: `whd_after${i}` })).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).toBe(200);
  });

  it('to a pipe (not a terminal): each line whole, with the full request id and every detail', async () => {
    const requestId = 'chatcmpl-SbiDuglI8rT2vXz9QkLmNoPqRsTuVwXy';
    const deliveryId = 'whd_0193a1b2c3d4e5f60718293a4b5c6d7e';
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    expect((await postDelivery(listen.url, samplePayload(requestId), { secret: SECRET, deliveryId })).status).toBe(200);
    expect(listen.stdout()).toMatch(
      new RegExp(`^\\d\\d:\\d\\d:\\d\\d {2}--> llm\\.request\\.completed \\[${requestId}\\] {2}svc01 200 · 12\\+34=46 tokens · 532 ms · not grounded \\(hallucination 0\\.25\\) · test · signature ✔ {2}${deliveryId}\\n$`),
    );
    expect(listen.stdout().trimEnd().length).toBeGreaterThan(80);
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

  it('--secret given twice (a rotation: the new secret and the old): a delivery signed under either verifies, one under neither is refused', async () => {
    const [newSecret, oldSecret] = ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_cli-test-old-secret'];
    const listen = await startListen(['--secret', newSecret, '--secret', oldSecret], { cwd: sandbox.path });
    expect(listen.stderr()).toContain('Verifying signatures with the 2 secrets ending in LaSw, cret\n');
    // Was the first dropped for the second without a word: deliveries signed with the new secret refused.
    for (const [n, secret] of [newSecret, oldSecret].entries()) {
      expect((await postDelivery(listen.url, samplePayload(), { secret, deliveryId: `whd_rot${n}` })).status).toBe(200);
      expect((await postDelivery(listen.url, samplePayload(), { secret, deliveryId: `whd_rotx${n}`, standard: false })).status).toBe(200);
    }
    expect((await postDelivery(listen.url, samplePayload(), { secret: SECRET, deliveryId: 'whd_other' })).status).toBe(401);
  });

  it('--tolerance without --secret, --forward-timeout without --forward-to: says each has no effect (was silently ignored)', async () => {
    const alone = await startListen(['--tolerance', '30', '--forward-timeout', '2s'], { cwd: sandbox.path });
    expect(alone.stderr()).toContain('! --tolerance has no effect without --secret\n! --forward-timeout has no effect without --forward-to\n');
    const paired = await startListen(['--tolerance', '30', '--secret', SECRET], { cwd: sandbox.path });
    expect(paired.stderr()).not.toContain('no effect');
  });

  it('a delivery missing webhook-id, or with a malformed webhook-signature: the refusal names the header, as @svc/verify does', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    const body = samplePayload('test-headers');
    const id = 'whd_headers';
    const timestamp = Math.floor(Date.now() / 1000);
    const signed = { 'content-type': 'application/json', 'x-svc-delivery': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signWebhook(body, { id, timestamp }, SECRET) };
    // A proxy that drops the header, or a hand-made request: the signature is right, the id it signs is missing.
    const noId = await request(listen.url, { method: 'POST', body, headers: signed });
    expect(noId.statusCode).toBe(401);
    expect(JSON.parse(await noId.body.text())).toMatchObject({ error: { code: 'missing_signature', message: expect.stringMatching(/^Missing webhook-id header/) } });
    const cut = await request(listen.url, { method: 'POST', body, headers: { ...signed, 'webhook-id': id, 'webhook-signature': 'v1,abc' } });
    expect(cut.statusCode).toBe(401);
    expect(JSON.parse(await cut.body.text())).toMatchObject({ error: { code: 'malformed_signature', message: expect.stringContaining('webhook-signature "v1,<base64 HMAC-SHA256>"') } });
    await listen.waitFor('stderr', /✘ Malformed Standard Webhooks headers/);
    expect(listen.stderr()).toMatch(/✘ Missing webhook-id header/);
    expect(listen.stderr()).not.toContain('does not match');
  });

  it('checks the Standard Webhooks headers: a stale webhook-timestamp is refused as a replay, a repeated delivery id is a duplicate', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    const now = Math.floor(Date.now() / 1000);
    const fresh = { secret: SECRET, deliveryId: 'whd_fresh', timestamp: now };
    const first = await postDelivery(listen.url, samplePayload('test-fresh'), fresh);
    expect([first.status, first.headers.get('svc-duplicate')]).toEqual([200, null]);
    // The same delivery again, in the same second (identical headers: what a retry within a second looks like) or
    // signed afresh: answered as the duplicate it is, never 401 (which made svc retry it, and failed check-receiver).
    for (const timestamp of [now, now + 1]) {
      const again = await postDelivery(listen.url, samplePayload('test-fresh'), { ...fresh, timestamp });
      expect([again.status, again.headers.get('svc-duplicate')]).toEqual([200, 'true']);
    }
    const stale = await postDelivery(listen.url, samplePayload('test-stale'), { secret: SECRET, deliveryId: 'whd_stale', timestamp: now - 600 });
    // 400 as @svc/verify answers it: signed, but not to be used now.
    expect(stale.status).toBe(400);
    // Only X-Svc-Signature (svc-cli replay, servers before Standard Webhooks): verified by it.
    expect((await postDelivery(listen.url, samplePayload('test-legacy'), { secret: SECRET, standard: false, deliveryId: 'whd_legacy' })).status).toBe(200);
    const lines = listen.stdout().trimEnd().split('\n');
    expect(lines.map((l) => (/signature ✔ {2}whd_\S+$/.test(l) ? '✔' : '✘'))).toEqual(['✔', '✔', '✔', '✘', '✔']);
    expect(listen.stderr().match(/duplicate of whd_fresh: answered 200 svc-duplicate: true/g)).toHaveLength(2);
    expect(listen.stderr()).not.toContain('already received');
    expect(listen.stderr()).toMatch(/webhook-timestamp is 6\d\d s old \(tolerance 300 s\): refused as a replay/);
    // Every delivery refused so is a clock out of sync, not an attack: the reason says so, in the answer svc logs too.
    const reason = /if every delivery is off by about this much, this machine's clock is \(sync it with NTP\); svc-cli replay signs a delivery anew only with --secret/;
    expect(listen.stderr()).toMatch(reason);
    expect(JSON.parse(stale.body)).toMatchObject({ error: { code: 'timestamp_out_of_range', message: expect.stringMatching(reason) } });
  });

  it('--forward-to: the same delivery twice within one second reaches the target both times, and svc gets its svc-duplicate', async () => {
    // Was refused by listen itself (401 "already received: refused as a replay") when both copies carried the same
    // webhook-timestamp, so check-receiver through listen failed its duplicate case about every other run.
    const target = await expressReceiver(SECRET);
    try {
      const listen = await startListen(['--secret', SECRET, '--forward-to', target.url], { cwd: sandbox.path });
      const delivery = { secret: SECRET, deliveryId: 'whd_twice', timestamp: Math.floor(Date.now() / 1000) };
      const first = await postDelivery(listen.url, samplePayload('test-twice'), delivery);
      const again = await postDelivery(listen.url, samplePayload('test-twice'), delivery);
      expect([first.status, first.headers.get('svc-duplicate')]).toEqual([204, null]);
      expect([again.status, again.headers.get('svc-duplicate')]).toEqual([200, 'true']);
      expect(target.processed).toEqual(['whd_twice']);
      await listen.waitFor('stdout', /<-- \[200\] POST .*\] duplicate\n/);

      const check = await runCli(['webhooks', 'check-receiver', listen.url, '--secret', SECRET, '--json'], { cwd: sandbox.path });
      expect(JSON.parse(check.stdout)).toMatchObject({ ok: true, passed: 10 });
      expect(check.code).toBe(0);
    } finally {
      await target.close();
    }
  });

  it('--forward-to sends the Standard Webhooks headers too, and --help says so: the standardwebhooks and svix packages verify what arrives', async () => {
    const { stdout } = await runCli(['listen', '--help'], { cwd: sandbox.path });
    expect(stdout.replace(/\s+/g, ' ')).toContain('forward every delivery (exact bytes; Content-Type, X-Svc-* and webhook-* headers) to this URL');
    const target = await sandbox.receiver({ status: 204 });
    const listen = await startListen(['--forward-to', target.url], { cwd: sandbox.path });
    const body = samplePayload('test-libs');
    expect((await postDelivery(listen.url, body, { secret: SECRET, deliveryId: 'whd_libs' })).status).toBe(204);
    const [forwarded] = target.requests;
    const headers = forwarded!.headers as Record<string, string>;
    expect(forwarded!.body.toString('utf8')).toBe(body);
    // SECRET is not whsec_<base64>: the libraries take it as "whsec_" + base64 of its bytes (README).
    const librarySecret = `whsec_${Buffer.from(SECRET).toString('base64')}`;
    for (const Webhook of [StandardWebhook, SvixWebhook]) {
      expect(new Webhook(librarySecret).verify(forwarded!.body.toString('utf8'), headers)).toMatchObject({ request_id: 'test-libs' });
    }
  });

  it('a forward target answering 500 is shown as <-- [500], and svc gets the 500', async () => {
    const target = await sandbox.receiver({ status: 500 });
    const listen = await startListen(['--forward-to', target.url], { cwd: sandbox.path });
    expect((await postDelivery(listen.url, samplePayload())).status).toBe(500);
    await listen.waitFor('stdout', /<-- \[500\] POST /);
    // The delivery reached the target: not "failed to forward", which is for a target that cannot be reached.
    listen.child.kill('SIGINT');
    expect((await listen.exited).stderr).toContain('Done: 1 delivery received, 0 forwarded, 1 answered non-2xx by the target, 0 failed to forward.');
  });

  it('a forward target redirecting (a trailing slash, http→https) says where to, and that nothing follows it; replay too', async () => {
    const target = await sandbox.receiver({ status: 308, path: '/webhooks', headers: { location: '/webhooks/' } });
    const log = join(sandbox.path, 'log.jsonl');
    const listen = await startListen(['--forward-to', target.url, '--log', log], { cwd: sandbox.path });
    const moved = await postDelivery(listen.url, samplePayload(), { deliveryId: 'whd_moved' });
    expect(moved.status).toBe(308);
    // svc keeps the answer's body in its attempt log (and webhooks test prints it): the target's was empty.
    expect(moved.body).toBe(`a redirect to ${target.url}/: svc follows no redirects, nor do listen and replay; use that URL`);
    await listen.waitFor('stdout', /<-- \[308\] POST /);
    const reason = `✘ the receiver answered 308: a redirect to ${target.url}/: svc follows no redirects, nor do listen and replay; use that URL\n`;
    await listen.waitFor('stderr', new RegExp(reason.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    const replay = await runCli(['replay', '--last', '1', '--log', log, '--to', target.url], { cwd: sandbox.path });
    expect(replay.code).toBe(1);
    expect(replay.stderr).toContain(reason);
  });

  it("a forward target refusing says why on the terminal: @svc/verify's code and message, or Express's error page's first line", async () => {
    // Were only `<-- [401] POST …`: the receiver's reason (a wrong secret, a JSON parser mounted first) reached svc's
    // attempt log but not the terminal of the engineer running listen.
    const wrongSecret = await expressReceiver('whsec_the-receivers-other-secret');
    const toWrong = await startListen(['--forward-to', wrongSecret.url], { cwd: sandbox.path });
    expect((await postDelivery(toWrong.url, samplePayload(), { secret: SECRET })).status).toBe(401);
    await toWrong.waitFor('stderr', /✘ the receiver answered 401: signature_mismatch: webhook-signature does not match: wrong signing secret/);
    await wrongSecret.close();

    const jsonFirst = await expressJsonFirstReceiver(SECRET);
    const toJsonFirst = await startListen(['--forward-to', jsonFirst.url], { cwd: sandbox.path });
    expect((await postDelivery(toJsonFirst.url, samplePayload(), { secret: SECRET })).status).toBe(500);
    await toJsonFirst.waitFor('stderr', /✘ the receiver answered 500: TypeError: \[@svc\/verify\] req\.body is already set, so a body parser \(express\.json\(\), /);
    expect(toJsonFirst.stderr()).toContain("Put the webhook route before app.use(express.json()), e.g. app.post('/webhooks/svc',");
    await jsonFirst.close();
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
    expect(plain.stdout()).toContain('signature ✔');
    expect(plain.stdout() + plain.stderr()).not.toContain('\u001b[');
  });

  it('listen --json > file in a terminal: the status lines on stderr (the terminal) are coloured, the JSON on stdout is not; NO_COLOR turns both off', async () => {
    const ready = /Ready!(?:\u001b\[\d+m)? Listening on (?:\u001b\[\d+m)?(http[^\s\u001b]+)/;
    const jsonFile = join(sandbox.path, 'deliveries.jsonl');
    const terminal = startCli(['listen', '--port', '0', '--json', '--secret', SECRET], { cwd: sandbox.path, env: { NO_COLOR: undefined }, stdoutToFile: jsonFile });
    const [, url] = await terminal.waitFor('stdout', ready);
    await postDelivery(url!, samplePayload(), { secret: SECRET });
    await terminal.waitFor('stdout', /✔/);
    expect(terminal.stdout()).toContain('\u001b[1mReady!');
    expect(terminal.stdout()).toContain('\u001b[32m✔\u001b[39m');
    await expect.poll(() => readFileSync(jsonFile, 'utf8')).toContain('"request_id"');
    expect(readFileSync(jsonFile, 'utf8')).not.toContain('\u001b');
    terminal.child.kill('SIGTERM');
    await terminal.exited;

    const noColor = startCli(['listen', '--port', '0', '--json', '--secret', SECRET], { cwd: sandbox.path, env: { NO_COLOR: '1' }, stdoutToFile: jsonFile });
    const [, plainUrl] = await noColor.waitFor('stdout', ready);
    await postDelivery(plainUrl!, samplePayload(), { secret: SECRET });
    await noColor.waitFor('stdout', /✔/);
    expect(noColor.stdout()).not.toContain('\u001b[');
    noColor.child.kill('SIGTERM');
    await noColor.exited;
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

  it('^C while a delivery is being forwarded to a target that does not answer: says what it waits for; ^C again quits', async () => {
    const silent = createHttpServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    try {
      const target = `http://127.0.0.1:${(silent.address() as { port: number }).port}/hooks`;
      const listen = await startListen(['--forward-to', target], { cwd: sandbox.path });
      void postDelivery(listen.url, samplePayload()).catch(() => undefined);
      await listen.waitFor('stdout', /--> llm\.request\.completed/);
      listen.child.kill('SIGINT');
      // Was only "Stopping… (^C again to quit now)", then nothing for up to 10 s.
      await listen.waitFor('stderr', new RegExp(`Stopping… waiting for 1 delivery being forwarded to ${target} \\(at most 10 s\\) \\(\\^C again to quit now\\)\n`));
      listen.child.kill('SIGINT');
      expect((await listen.exited).code).toBe(130);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('a target slower than --forward-timeout: svc gets 502, and the terminal says what svc does with a slow receiver', async () => {
    const silent = createHttpServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    try {
      const target = `http://127.0.0.1:${(silent.address() as { port: number }).port}/hooks`;
      const listen = await startListen(['--forward-to', target, '--forward-timeout', '300ms'], { cwd: sandbox.path });
      expect((await postDelivery(listen.url, samplePayload(), { deliveryId: 'whd_slow' })).status).toBe(502);
      await listen.waitFor('stderr', /✘ POST \S+ failed: timed out \[whd_slow\]\n\d\d:\d\d:\d\d {2}! no answer within 0\.3 s: svc waits SVC_WEBHOOK_TIMEOUT_MS \(10 s by default\) for a receiver, then retries; answer 2xx at once/);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
    const bad = await runCli(['listen', '--forward-timeout', 'soon'], { cwd: sandbox.path });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("svc-cli: option '--forward-timeout <time>' argument 'soon' is invalid. Must be a duration such as 10s or 500ms (at most 600s).\n");
  });

  it('^C while --trigger waits for a server that does not answer: stops at once with the summary, exit 0', async () => {
    // Was killed by the signal (its handler was set only once --trigger returned): no "Stopping…", no summary.
    const asked: string[] = [];
    const silent = createHttpServer((req) => void asked.push(req.url ?? ''));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    try {
      const { port } = silent.address() as { port: number };
      const listen = await startListen(['--trigger'], { cwd: sandbox.path, env: { SVC_BASE_URL: `http://127.0.0.1:${port}`, SVC_API_KEY: 'sk-x' } });
      await vi.waitFor(() => expect(asked).toEqual(['/v1/webhooks/test']), { timeout: 10_000 });
      listen.child.kill('SIGINT');
      const result = await listen.exited;
      expect([result.code, result.signal]).toEqual([0, null]);
      expect(result.stderr).toMatch(/Stopping… \(\^C again to quit now\)\nDone: 0 deliveries received\.\n$/);
      expect(result.stderr).not.toContain('--trigger:');
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
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

  it('the delivery log (prompts and answers) is readable by its owner only: .svc 0700, the file 0600', async () => {
    const listen = await startListen(['--secret', SECRET], { cwd: sandbox.path });
    await postDelivery(listen.url, samplePayload(), { secret: SECRET });
    const log = join(sandbox.path, '.svc', 'deliveries.jsonl');
    await expect.poll(() => readFileSync(log, 'utf8')).toContain('body_base64');
    expect(statSync(join(sandbox.path, '.svc')).mode & 0o777).toBe(0o700);
    expect(statSync(log).mode & 0o777).toBe(0o600);
  });

  it('a log path that cannot be written: one line on stderr, non-zero exit', async () => {
    writeFileSync(join(sandbox.path, 'afile'), '');
    const result = await runCli(['listen', '--port', '0', '--log', 'afile/log.jsonl'], { cwd: sandbox.path });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('svc-cli: cannot write the delivery log afile/log.jsonl: a part of the path is a file, not a directory\n');
  });

  it('--forward-to this listener itself (the app\'s port given to --port too): one line on stderr, exit 1', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address() as { port: number };
        probe.close(() => resolve(free));
      });
    });
    // Was Ready, then each delivery forwarded to the listener again (the same path) or refused 404 (another one).
    const result = await runCli(['listen', '--port', String(port), '--forward-to', `localhost:${port}/webhooks`], { cwd: sandbox.path });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`svc-cli: --forward-to http://localhost:${port}/webhooks is this listener (port ${port}): forward to your app's port, and listen on another (--port)\n`);
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
