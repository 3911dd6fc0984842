import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verifySignature, verifyWebhook } from '@svc/verify';
import { runCli, startCli, startListen, useSandbox } from './cli-process.js';
import { postDelivery, samplePayload, SECRET } from './deliveries-fixture.js';
import { expressReceiver } from './check-receivers.js';
import type { Receiver } from './receiver.js';

describe('svc-cli replay', () => {
  const sandbox = useSandbox();

  async function receiver(status = 200): Promise<Receiver> {
    return sandbox.receiver({ status });
  }

  /** A listener that recorded three deliveries in `log`; returns it still running. */
  async function recordThree(log: string) {
    const listen = await startListen(['--secret', SECRET, '--log', log], { cwd: sandbox.path });
    for (const n of [1, 2, 3]) {
      await postDelivery(listen.url, samplePayload(`test-${n}`), { secret: SECRET, deliveryId: `whd_${n}` });
    }
    return listen;
  }

  /** The log of three recorded deliveries, the listener that recorded them stopped. */
  async function recordedLog(): Promise<string> {
    const log = join(sandbox.path, 'log.jsonl');
    const listen = await recordThree(log);
    listen.child.kill('SIGINT');
    await listen.exited;
    return log;
  }

  it('resends the chosen deliveries byte-for-byte with their headers to --to; the signature still verifies', async () => {
    const log = await recordedLog();
    const target = await receiver();

    const result = await runCli(['replay', 'whd_3', 'whd_1', '--log', log, '--to', target.url], { cwd: sandbox.path });
    expect(result.stderr).toContain('Replayed 2 deliveries.');
    expect(result.code).toBe(0);
    expect(target.requests.map((r) => r.headers['x-svc-delivery'])).toEqual(['whd_3', 'whd_1']);
    const [third, first] = target.requests;
    expect(third!.body.equals(Buffer.from(samplePayload('test-3')))).toBe(true);
    expect(first!.body.equals(Buffer.from(samplePayload('test-1')))).toBe(true);
    expect(third!.headers['content-type']).toBe('application/json');
    expect(third!.headers['x-svc-event']).toBe('llm.request.completed');
    expect(third!.headers['user-agent']).toBe('svc-webhooks/0.1.0');
    expect(verifySignature(third!.body, third!.headers['x-svc-signature'] as string, SECRET)).toBe(true);
    expect(result.stdout).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d  <-- \\[200\\] POST ${target.url} \\[whd_3\\]\\n`));
  });

  it('takes the short id listen prints; in an 80-column terminal lines show it within 80 columns; to a pipe, and with --wide, the full id and URL', async () => {
    const log = join(sandbox.path, 'log.jsonl');
    const id = 'whd_0193a1b2c3d4e5f60718293a4b5c6d7e';
    const listen = await startListen(['--log', log], { cwd: sandbox.path });
    await postDelivery(listen.url, samplePayload('test-long'), { deliveryId: id });
    const target = await receiver();
    const longUrl = `${target.url}?${'x'.repeat(80)}`;

    const short = await runCli(['replay', '4b5c6d7e', '--log', log, '--to', longUrl], { cwd: sandbox.path, terminal: { stream: 'stdout', columns: 80 } });
    expect(short.code).toBe(0);
    expect(short.stdout).toMatch(/<-- \[200\] POST http:\/\/\S+… \[4b5c6d7e\]\n$/);
    for (const line of short.stdout.trimEnd().split('\n')) expect(line.length).toBeLessThanOrEqual(80);

    const piped = await runCli(['replay', '4b5c6d7e', '--log', log, '--to', longUrl], { cwd: sandbox.path });
    expect(piped.code).toBe(0);
    expect(piped.stdout).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d  <-- \\[200\\] POST ${longUrl.replace(/[.?]/g, '\\$&')} \\[${id}\\]\\n$`));

    const wide = await runCli(['replay', '4b5c6d7e', '--log', log, '--to', longUrl, '--wide'], { cwd: sandbox.path, terminal: { stream: 'stdout', columns: 80 } });
    expect(wide.stdout).toContain(`<-- [200] POST ${longUrl} [${id}]`);
    expect(target.requests.map((r) => r.headers['x-svc-delivery'])).toEqual([id, id, id]);
  });

  it('defaults to where each delivery was received: the listener sees the same bytes again, signature ✔', async () => {
    const log = join(sandbox.path, 'log.jsonl');
    const listen = await recordThree(log);
    const result = await runCli(['replay', '--last', '2', '--log', log], { cwd: sandbox.path });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`<-- [200] POST ${listen.url} [whd_2]`);
    expect(result.stdout).toContain(`<-- [200] POST ${listen.url} [whd_3]`);
    await listen.waitFor('stdout', /^(?:.*signature ✔.*\n){5}/);
    const lines = listen.stdout().trimEnd().split('\n');
    expect(lines.slice(3).map((l) => l.match(/\[(test-\d)\]/)?.[1])).toEqual(['test-2', 'test-3']);
  });

  it('--secret re-signs each body for a receiver with another secret', async () => {
    const log = join(sandbox.path, 'log.jsonl');
    const listen = await recordThree(log);
    const other = await startListen(['--secret', 'whsec_other', '--log', join(sandbox.path, 'other.jsonl')], { cwd: sandbox.path });

    const unsigned = await runCli(['replay', '--last', '1', '--log', log, '--to', other.url], { cwd: sandbox.path });
    expect(unsigned.code).toBe(1);
    expect(unsigned.stdout).toContain(`<-- [401] POST ${other.url}`);
    expect(unsigned.stderr).toContain('to sign them anew for this receiver, pass --secret (or set SVC_WEBHOOK_SECRET)');
    expect(unsigned.stderr).toMatch(/svc-cli: 1 of 1 replayed deliveries failed\n$/);

    const resigned = await runCli(['replay', '--last', '1', '--log', log, '--to', other.url, '--secret', 'whsec_other'], { cwd: sandbox.path });
    expect(resigned.code).toBe(0);
    await other.waitFor('stdout', /\[test-3\][^\n]*signature ✔/);
    listen.child.kill('SIGINT');
  });

  it('--secret re-signs the Standard Webhooks headers with a fresh timestamp; without it they are left out', async () => {
    const log = await recordedLog();
    const target = await receiver();
    const before = Math.floor(Date.now() / 1000);
    expect((await runCli(['replay', 'whd_2', '--log', log, '--to', target.url], { cwd: sandbox.path })).code).toBe(0);
    expect((await runCli(['replay', 'whd_2', '--log', log, '--to', target.url, '--secret', 'whsec_other'], { cwd: sandbox.path })).code).toBe(0);
    const [asRecorded, resigned] = target.requests;
    expect(asRecorded!.headers['webhook-signature']).toBeUndefined();
    expect(verifySignature(asRecorded!.body, asRecorded!.headers['x-svc-signature'] as string, SECRET)).toBe(true);
    expect(resigned!.headers['webhook-id']).toBe('whd_2');
    expect(Number(resigned!.headers['webhook-timestamp'])).toBeGreaterThanOrEqual(before);
    expect(verifyWebhook(resigned!.body, resigned!.headers as Record<string, string>, 'whsec_other')).toBe(true);
    expect(verifyWebhook(resigned!.body, resigned!.headers as Record<string, string>, SECRET)).toBe(false);
  });

  it('a receiver refusing the unsigned replay: the output says what was left out and how to re-sign; SVC_WEBHOOK_SECRET re-signs, and says so', async () => {
    const log = await recordedLog();
    const refusing = await receiver(401);
    const refused = await runCli(['replay', 'whd_1', '--log', log, '--to', refusing.url], { cwd: sandbox.path });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('without webhook-id/-timestamp/-signature');
    expect(refused.stderr).toContain('pass --secret (or set SVC_WEBHOOK_SECRET)');

    const target = await receiver();
    const fromEnv = await runCli(['replay', 'whd_1', '--log', log, '--to', target.url], { cwd: sandbox.path, env: { SVC_WEBHOOK_SECRET: SECRET } });
    expect(fromEnv.code).toBe(0);
    expect(fromEnv.stderr).toContain('Re-signing with SVC_WEBHOOK_SECRET');
    expect(verifyWebhook(target.requests[0]!.body, target.requests[0]!.headers as Record<string, string>, SECRET)).toBe(true);
  });

  it('says when the receiver answered a replay as a duplicate (svc-duplicate: true) rather than processing it', async () => {
    const log = await recordedLog();
    const target = await expressReceiver(SECRET);
    try {
      const first = await runCli(['replay', 'whd_1', '--log', log, '--to', target.url, '--secret', SECRET], { cwd: sandbox.path });
      expect(first.code).toBe(0);
      expect(first.stdout).not.toContain('duplicate');
      expect(first.stderr).not.toContain('duplicate');
      const again = await runCli(['replay', 'whd_1', '--log', log, '--to', target.url, '--secret', SECRET], { cwd: sandbox.path });
      expect(again.code).toBe(0);
      expect(again.stdout).toMatch(/<-- \[200\] POST \S+ \[whd_1\] duplicate\n/);
      expect(again.stderr).toContain('1 of 1 answered as a duplicate (svc-duplicate: true): the receiver had processed that delivery id already and did not again.');
      const json = await runCli(['replay', 'whd_1', '--log', log, '--to', target.url, '--secret', SECRET, '--json'], { cwd: sandbox.path });
      expect(JSON.parse(json.stdout)).toMatchObject({ id: 'whd_1', ok: true, status_code: 200, duplicate: true });
      expect(target.processed).toEqual(['whd_1']);
    } finally {
      await target.close();
    }
  });

  it('--json prints one result object per delivery', async () => {
    const log = await recordedLog();
    const target = await receiver(500);
    const result = await runCli(['replay', 'whd_2', '--log', log, '--to', target.url, '--json'], { cwd: sandbox.path });
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toEqual({ id: 'whd_2', url: target.url, ok: false, status_code: 500, error: 'answered 500', duplicate: false });
  });

  it("a receiver refusing the replay: its reason (@svc/verify's code and message) is printed under the <-- line", async () => {
    const log = await recordedLog();
    const target = await expressReceiver('whsec_the-receivers-other-secret');
    try {
      const result = await runCli(['replay', 'whd_2', '--log', log, '--to', target.url, '--secret', SECRET], { cwd: sandbox.path });
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/<-- \[401\] POST /);
      expect(result.stderr).toMatch(/^\d\d:\d\d:\d\d {2}✘ the receiver answered 401: signature_mismatch: webhook-signature does not match: wrong signing secret/m);
    } finally {
      await target.close();
    }
  });

  it('--last beyond the log replays every delivery in it, and says the log has fewer', async () => {
    const log = await recordedLog();
    const target = await receiver();
    const result = await runCli(['replay', '--last', '50', '--log', log, '--to', target.url], { cwd: sandbox.path });
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('The log has 3 deliveries, fewer than --last 50: replaying all of them.\nReplayed 3 deliveries.\n');
    expect(target.requests.map((r) => r.headers['x-svc-delivery'])).toEqual(['whd_1', 'whd_2', 'whd_3']);
  });

  it('--since/--until replay what listen received in a time range, a delivery retried within it once (its latest copy)', async () => {
    const log = await recordedLog();
    const lines = readFileSync(log, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { id: string; time: string; body_base64: string });
    const retried = { ...lines[1]!, body_base64: Buffer.from(samplePayload('test-2-retry')).toString('base64') };
    const times = ['2026-11-25T09:00:00.000Z', '2026-11-25T10:00:00.000Z', '2026-11-25T11:00:00.000Z', '2026-11-25T10:30:00.000Z'];
    const entries = [...lines, retried].map((l, i) => ({ ...l, time: times[i]! }));
    writeFileSync(log, entries.map((e) => `${JSON.stringify(e)}\n`).join(''));
    const target = await receiver();

    const range = await runCli(['replay', '--since', '2026-11-25T09:30:00Z', '--until', '2026-11-25T11:00:00Z', '--log', log, '--to', target.url], { cwd: sandbox.path });
    expect(range.stderr).toContain('Replayed 1 delivery.');
    expect(range.code).toBe(0);
    expect(target.requests.map((r) => r.body.toString('utf8'))).toEqual([samplePayload('test-2-retry')]);

    const since = await runCli(['replay', '--since', '2026-11-25T10:00:00Z', '--log', log, '--to', target.url], { cwd: sandbox.path });
    expect(since.code).toBe(0);
    expect(target.requests.slice(1).map((r) => r.headers['x-svc-delivery'])).toEqual(['whd_3', 'whd_2']);

    // A duration back from now: none of these is that recent, and the log's span is said.
    const recent = await runCli(['replay', '--since', '2h', '--log', log, '--to', target.url], { cwd: sandbox.path });
    expect(recent.code).toBe(1);
    expect(recent.stderr).toMatch(/^svc-cli: no delivery in \S+log\.jsonl was received at or after \d{4}-.*Z \(it holds 4, from 2026-11-25T09:00:00\.000Z to 2026-11-25T10:30:00\.000Z\)\n$/);
    expect((await runCli(['replay', '--until', 'yesterday', '--log', log], { cwd: sandbox.path })).code).toBe(2);
  });

  it('a target that is down: an error line naming the delivery and a non-zero exit', async () => {
    const log = await recordedLog();
    const result = await runCli(['replay', '--last', '1', '--log', log], { cwd: sandbox.path });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/✘ POST http:\/\/127\.0\.0\.1:\d+\/ failed: connection refused \[whd_3\]\n/);
    // The target was the recorded listener's URL (no --to): the usual cause is that listen has stopped.
    expect(result.stderr).toMatch(/\nWithout --to, a delivery goes back to where listen received it \(http:\/\/127\.0\.0\.1:\d+\/\): is svc-cli listen running there\? Or pass --to URL \(your app\)\.\n/);
  });

  it('a target refusing the connection gets no more deliveries after the first: one error line, the rest counted as not sent', async () => {
    const log = await recordedLog();
    const result = await runCli(['replay', '--last', '3', '--log', log], { cwd: sandbox.path });
    expect(result.code).toBe(1);
    // Was three identical "connection refused" lines (hundreds, replaying a day's deliveries), each a connect attempt.
    expect(result.stderr.match(/failed: connection refused/g)).toHaveLength(1);
    expect(result.stderr).toMatch(/✘ POST http:\/\/127\.0\.0\.1:\d+\/ failed: connection refused \[whd_1\]\n/);
    expect(result.stderr).toMatch(/\nNot sent: 2 more deliveries to http:\/\/127\.0\.0\.1:\d+\/ \(connection refused at the first\): start the receiver and replay them again\.\n/);
    expect(result.stderr).toMatch(/\nsvc-cli: 1 of 3 replayed deliveries failed, 2 not sent\n$/);

    const json = await runCli(['replay', '--last', '3', '--log', log, '--json'], { cwd: sandbox.path });
    expect(json.code).toBe(1);
    const lines = json.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: string; ok: boolean; status_code: number | null; error: string });
    expect(lines.map((l) => [l.id, l.ok, l.status_code, l.error])).toEqual([
      ['whd_1', false, null, 'connection refused'],
      ['whd_2', false, null, 'not sent: connection refused at an earlier delivery'],
      ['whd_3', false, null, 'not sent: connection refused at an earlier delivery'],
    ]);
  });

  it('--timeout: a receiver that never answers fails each replay after it, not after 10 s each', async () => {
    const log = await recordedLog();
    const target = createServer((req) => void req.resume());
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
      const result = await runCli(['replay', '--last', '3', '--log', log, '--to', url, '--timeout', '300ms', '--json'], { cwd: sandbox.path });
      expect(result.code).toBe(1);
      const lines = result.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: string; error: string });
      // A timeout may be one slow delivery: every one is still tried.
      expect(lines.map((l) => [l.id, l.error])).toEqual([['whd_1', 'timed out'], ['whd_2', 'timed out'], ['whd_3', 'timed out']]);
      expect((await runCli(['replay', '--last', '1', '--log', log, '--timeout', 'soon'], { cwd: sandbox.path })).stderr).toMatch(
        /^svc-cli: option '--timeout <time>' argument 'soon' is invalid\. Must be a duration such as 10s or 500ms/,
      );
    } finally {
      target.closeAllConnections();
      await new Promise<void>((resolve) => target.close(() => resolve()));
    }
  });

  it('^C while a target does not answer: stops at once, says how many were sent and not, exit 130', async () => {
    const log = await recordedLog();
    const requests: string[] = [];
    // Answers the first delivery, then holds the second without answering.
    const target = createServer((req, res) => {
      requests.push(String(req.headers['x-svc-delivery']));
      req.resume();
      if (requests.length === 1) res.end('ok');
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
      const replay = startCli(['replay', '--last', '3', '--log', log, '--to', url], { cwd: sandbox.path });
      await expect.poll(() => requests.length, { timeout: 20_000 }).toBe(2);
      replay.child.kill('SIGINT');
      const result = await replay.exited;
      expect(result.code).toBe(130);
      expect(result.stdout).toMatch(/<-- \[200\] POST .* \[whd_1\]\n$/);
      expect(result.stderr).toMatch(/(?:^|\n)svc-cli: stopped: 1 of 3 replayed, 2 not sent\n$/);
      expect(requests).toEqual(['whd_1', 'whd_2']);
    } finally {
      target.closeAllConnections();
      await new Promise<void>((resolve) => target.close(() => resolve()));
    }
  });

  it('skips corrupt log lines with a warning and replays the rest (a numeric id or X-Svc-Delivery once crashed it)', async () => {
    const log = await recordedLog();
    const recorded = JSON.parse(readFileSync(log, 'utf8').split('\n')[0]!) as { headers: Record<string, unknown> };
    appendFileSync(log, `${JSON.stringify({ ...recorded, id: 12345678 })}\n`);
    appendFileSync(log, `${JSON.stringify({ ...recorded, id: 'whd_x', headers: { ...recorded.headers, 'x-svc-delivery': 12345678 } })}\n`);
    appendFileSync(log, '{"time":\n');
    const target = await receiver();

    const result = await runCli(['replay', '--last', '6', '--log', log, '--to', target.url, '--secret', SECRET], { cwd: sandbox.path });
    expect(result.stderr).toMatch(/skipped line 4 of \S+log\.jsonl: id is not a string or null\n/);
    expect(result.stderr).toMatch(/skipped line 5 of \S+: header "x-svc-delivery" is not a string or a list of strings\n/);
    expect(result.stderr).toMatch(/skipped line 6 of \S+: not JSON\n/);
    expect(result.stderr).toContain('Replayed 3 deliveries.');
    expect(result.stderr).not.toContain('unexpected error');
    expect(result.code).toBe(0);
    expect(target.requests.map((r) => r.headers['x-svc-delivery'])).toEqual(['whd_1', 'whd_2', 'whd_3']);
  });

  it.each([
    // A usage error, exit 2 as the option parser's (was 1, a failed replay's code).
    [['replay'], 'svc-cli: nothing to replay: give delivery ids, --last N, or --since/--until\n', 2],
    [['replay', '--last', '1', '--log', 'missing.jsonl'], 'svc-cli: no delivery log at missing.jsonl: run "svc-cli listen" first or pass --log FILE\n', 1],
    [['replay', 'whd_nope', '--log', 'log.jsonl'], 'svc-cli: delivery whd_nope is not in log.jsonl\n', 1],
    // The option parser's usage errors exit 2.
    [['replay', '--last', '0'], /^svc-cli: option '-n, --last <n>' argument '0' is invalid\. Must be a positive integer\.\n$/, 2],
    [['replay', '--last', '1', '--to', 'not a url'], /^svc-cli: option '--to <url>' argument 'not a url' is invalid/, 2],
    // Was the last one kept and the first dropped without a word.
    [['replay', '--last', '1', '--secret', 'whsec_new', '--secret', 'whsec_old'], /^svc-cli: option '--secret' is invalid \(its value is not shown\)\. Given more than once: this command signs with one secret \(listen takes several\)\.\n$/, 2],
  ])('bad input %j: one line on stderr, non-zero exit', async (args, message, code) => {
    const entry = { time: new Date().toISOString(), id: 'whd_1', event: 'llm.request.completed', method: 'POST', url: 'http://127.0.0.1:1/', headers: {}, body_base64: '', signature: 'unchecked', status: 200 };
    writeFileSync(join(sandbox.path, 'log.jsonl'), `${JSON.stringify(entry)}\n`);
    const result = await runCli(args, { cwd: sandbox.path });
    expect(result.code).toBe(code);
    if (typeof message === 'string') expect(result.stderr).toBe(message);
    else expect(result.stderr).toMatch(message);
  });
});
