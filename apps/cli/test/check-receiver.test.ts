import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckReport } from '../src/check-receiver.js';
import { runCli, useSandbox } from './cli-process.js';
import { BROKEN_FAILS, brokenReceiver, expressJsonFirstReceiver, expressRawReceiver, expressReceiver, fetchReceiver, prefixedExpressReceiver, type BrokenKind, type TestReceiver } from './check-receivers.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ALL = ['valid', 'exact-bytes', 'large-body', 'tampered-body', 'wrong-signature', 'missing-signature', 'stale-timestamp', 'unknown-secret', 'duplicate', 'rotation'];

describe('svc-cli webhooks check-receiver', () => {
  const sandbox = useSandbox();
  const receivers: TestReceiver[] = [];
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  const started = async (r: Promise<TestReceiver>): Promise<TestReceiver> => {
    const receiver = await r;
    receivers.push(receiver);
    return receiver;
  };
  /**
   * `webhooks check-receiver URL --secret SECRET ARGS`, with a --timeout for a loaded host unless ARGS give one: these
   * test receivers run in this test's process, and one took over the default 10 s to take the 12 MiB large-body case on
   * a loaded 2-core host (the case then failed with "no answer within 10000 ms").
   */
  const checkArgs = (url: string, ...args: string[]) => ['webhooks', 'check-receiver', url, '--secret', SECRET, ...(args.includes('--timeout') ? [] : ['--timeout', '100s']), ...args];
  const check = async (url: string, ...args: string[]) => {
    const result = await runCli(checkArgs(url, '--json', ...args), { cwd: sandbox.path });
    return { ...result, report: JSON.parse(result.stdout) as CheckReport };
  };
  const failedIds = (report: CheckReport): string[] => report.cases.filter((c) => c.outcome === 'failed').map((c) => c.id);

  it('passes every case against the @svc/verify Express adapter with de-duplication (--json)', async () => {
    const receiver = await started(expressReceiver(SECRET));
    const { code, report } = await check(receiver.url);
    expect(report.cases.map((c) => [c.id, c.outcome])).toEqual(ALL.map((id) => [id, 'passed']));
    expect(report).toMatchObject({ ok: true, passed: 10, failed: 0, skipped: 0, duplicate_header: 'svc-duplicate' });
    expect(code).toBe(0);
    // Accepted deliveries were processed once each; the duplicate's id once, not twice.
    const ids = report.cases.filter((c) => ['valid', 'exact-bytes', 'large-body', 'duplicate', 'rotation'].includes(c.id)).map((c) => c.delivery_id);
    expect(receiver.processed).toEqual(ids);
    for (const id of ids) expect(id).toMatch(/^whd_[0-9a-f]{32}$/);
    expect(new Set(report.cases.map((c) => c.delivery_id)).size).toBe(10);
  });

  it('passes every case against the @svc/verify Fetch adapter on node:http, printing one line per case', async () => {
    const receiver = await started(fetchReceiver(SECRET));
    const { code, stdout, stderr } = await runCli(checkArgs(receiver.url), { cwd: sandbox.path });
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    for (const id of ALL) expect(lines.find((l) => l.startsWith(`✔ ${id} `))).toBeDefined();
    expect(stdout).toMatch(/✔ valid +signed with the secret: expected 2xx, got 204\n/);
    expect(stdout).toMatch(/✔ tampered-body +body changed after signing: expected 4xx, got 401 \{"error"/);
    expect(stdout).toMatch(/✔ duplicate .*got 200 Svc-Duplicate: true/);
    expect(stdout).toContain(`✔ 10 passed, 0 failed: ${receiver.url} answers as a correct receiver must`);
    expect(stdout).not.toContain('✘');
    expect(stderr).toContain(`Checking ${receiver.url} with 10 cases`);
  });

  for (const [kind, fails] of Object.entries(BROKEN_FAILS) as [BrokenKind, string[]][]) {
    it(`catches a broken receiver (${kind}): fails exactly ${fails.join(', ')}`, async () => {
      const receiver = await started(brokenReceiver(kind, SECRET));
      const { code, report, stderr } = await check(receiver.url);
      expect(failedIds(report)).toEqual(fails);
      expect(report.ok).toBe(false);
      expect(code).toBe(1);
      expect(stderr).toContain(`svc-cli: ${fails.length} of 10 cases failed`);
    });
  }

  it('explains the failures in the human output: a duplicate processed twice, a GitHub-style receiver and the stale case', async () => {
    const noDedupe = await started(brokenReceiver('no-dedupe', SECRET));
    const first = await runCli(checkArgs(noDedupe.url), { cwd: sandbox.path });
    expect(first.code).toBe(1);
    expect(first.stdout).toMatch(/✘ duplicate .*expected 2xx, then 2xx with Svc-Duplicate: true, got 200 ok\n +→ duplicate processed twice: .*--skip duplicate/);
    expect(first.stdout).toContain('✘ 9 passed, 1 failed');
    // Processed twice, indeed.
    const dup = noDedupe.processed.filter((id, i, all) => all.indexOf(id) !== i);
    expect(dup).toHaveLength(1);

    const github = await started(brokenReceiver('github-style-only', SECRET));
    const second = await runCli(checkArgs(github.url), { cwd: sandbox.path });
    expect(second.stdout).toMatch(/✘ stale-timestamp .*got 200 ok\n +→ accepted it \(200\): .*verifying only X-Svc-Signature \(GitHub style, no timestamp\) fails this case by design/);
  });

  it('shows what a receiver that crashes says, not its HTML: express.json() mounted before verifyMiddleware', async () => {
    const receiver = await started(expressJsonFirstReceiver(SECRET));
    const { code, stdout, report } = await check(receiver.url);
    expect(code).toBe(1);
    const valid = report.cases.find((c) => c.id === 'valid')!;
    expect(valid.answer).toMatchObject({ status: 500, body: expect.stringMatching(/^Error TypeError: \[@svc\/verify\] req\.body is already set, so a body parser \(express\.json\(\)/) });
    expect(valid.reason).toMatch(/^answered 500 to a correctly signed delivery: the receiver failed \(it said: Error TypeError: \[@svc\/verify\] req\.body is already set.*\)\. See its log; a body parser \(express\.json\(\)\) run before the verification is the usual cause$/);
    expect(stdout).not.toContain('<!DOCTYPE');
  });

  it("@svc/verify README's receiver without the middleware (express.raw + verifyWebhook) passes every case but duplicate", async () => {
    // The README showed the GitHub-style verifySignature there, which fails stale-timestamp: a copied example failed.
    const receiver = await started(expressRawReceiver(SECRET));
    expect(failedIds((await check(receiver.url)).report)).toEqual(['duplicate']);
    const { code, report } = await check(receiver.url, '--skip', 'duplicate');
    expect([code, report.ok, report.passed]).toEqual([0, true, 9]);
  });

  it("names the body limit when a receiver answers 413 to a long prompt's 12 MiB delivery (express.raw's 100 KB default)", async () => {
    const receiver = await started(brokenReceiver('small-body-limit', SECRET));
    const { report } = await check(receiver.url);
    const large = report.cases.find((c) => c.id === 'large-body')!;
    expect(large).toMatchObject({ outcome: 'failed', answer: expect.objectContaining({ status: 413 }) });
    expect(large.reason).toMatch(/^answered 413 to a correctly signed delivery: the receiver's body limit is below svc's largest deliveries .*raise it to 64 MiB \(express\.raw\(\{ type: 'application\/json', limit: '64mb' \}\)/);
  });

  it('--skip duplicate: a receiver that de-duplicates silently passes, and the output says the case was not checked', async () => {
    const receiver = await started(brokenReceiver('no-dedupe', SECRET));
    const { code, stdout } = await runCli(checkArgs(receiver.url, '--skip', 'duplicate'), { cwd: sandbox.path });
    expect(code).toBe(0);
    expect(stdout).toContain('- duplicate          skipped by --skip (the receiver de-duplicates silently: not checked)');
    expect(stdout).toContain('✔ 9 passed, 0 failed, 1 skipped');
    const json = await check(receiver.url, '--skip', 'duplicate');
    expect(json.report.cases.find((c) => c.id === 'duplicate')).toMatchObject({ outcome: 'skipped' });
    expect(json.code).toBe(0);
  });

  it('a receiver that never answers fails each case after --timeout; the check itself completes', async () => {
    const receiver = await started(brokenReceiver('hangs', SECRET));
    const startedAt = Date.now();
    const { code, report } = await check(receiver.url, '--timeout', '300ms');
    expect(code).toBe(1);
    expect(report.cases.every((c) => c.outcome === 'failed' && c.answer?.status === null && c.answer.error === 'no answer within 300 ms')).toBe(true);
    expect(Date.now() - startedAt).toBeLessThan(15_000);
  });

  it('without --timeout, a receiver answering after 6 s passes, as svc (which waits SVC_WEBHOOK_TIMEOUT_MS, 10 s) counts it delivered', async () => {
    // Answers every request 204 after 6 s: slower than the old 5 s default, within svc's own timeout.
    const server = createServer((req, res) => {
      req.resume();
      const timer = setTimeout(() => res.writeHead(204).end(), 6_000);
      res.on('close', () => clearTimeout(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    receivers.push({ url, processed: [], close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
    // The default --timeout itself is what this test is about: none given.
    const asIs = await runCli(['webhooks', 'check-receiver', url, '--secret', SECRET, '--json', '--skip', ALL.filter((id) => id !== 'valid').join(',')], { cwd: sandbox.path });
    const { code, stderr } = asIs;
    const report = JSON.parse(asIs.stdout) as CheckReport;
    expect(report.cases.find((c) => c.id === 'valid')).toMatchObject({ outcome: 'passed', answer: expect.objectContaining({ status: 204 }) });
    expect([code, stderr]).toEqual([0, '']);
  });

  it('a refused connection is a failed case, not a crash, and the check stops there with one line saying so', async () => {
    const receiver = await started(expressReceiver(SECRET));
    const url = receiver.url;
    await receivers.pop()!.close();
    const { code, report, stderr } = await check(url);
    expect(code).toBe(1);
    expect(report).toMatchObject({ ok: false, passed: 0, failed: 1, unreachable: 'connection refused' });
    expect(report.cases).toEqual([expect.objectContaining({ id: 'valid', outcome: 'failed', answer: expect.objectContaining({ status: null, error: 'connection refused' }) })]);
    expect(stderr).toBe(`svc-cli: cannot reach ${url}: connection refused. Is the receiver running, and listening on that host and port? (no other case was sent)\n`);
    // Was nine identical "connection refused" failures and "9 of 9 cases failed".
    const human = await runCli(checkArgs(url, '--skip', 'valid'), { cwd: sandbox.path });
    expect(human.code).toBe(1);
    expect(human.stdout.match(/connection refused/g)).toHaveLength(2);
    expect(human.stdout).toMatch(/^- valid +skipped by --skip: .*\n✘ exact-bytes .*got connection refused\n +→ connection refused: .*\n$/);
    expect(human.stderr).toMatch(/\nsvc-cli: cannot reach .*: connection refused\. Is the receiver running/);
  });

  it('a receiver behind a path prefix passes at its full URL; without the prefix (404) or through a redirect the check stops at the first case and says why', async () => {
    const receiver = await prefixedExpressReceiver(SECRET);
    receivers.push(receiver);
    expect((await check(receiver.url)).report).toMatchObject({ ok: true, passed: 10 });
    // Was: five refusal cases "passed" on the 404, and each failure said to check the secret.
    const unprefixed = receiver.url.replace('/api/', '/');
    const missed = await check(unprefixed);
    expect(missed.code).toBe(1);
    expect(missed.report).toMatchObject({ ok: false, passed: 0, failed: 1, wrong_url: expect.stringMatching(/^answered 404: nothing takes a POST at \/webhooks\/svc there\. Check the path: the prefix/) });
    expect(missed.report.cases.map((c) => c.id)).toEqual(['valid']);
    expect(missed.stderr).toContain(`svc-cli: ${unprefixed} is not where the receiver takes deliveries: it answered 404: nothing takes a POST at /webhooks/svc there.`);
    const redirected = await runCli(checkArgs(receiver.redirectFrom), { cwd: sandbox.path });
    expect(redirected.code).toBe(1);
    expect(redirected.stdout).toMatch(/^✘ valid .*got 308.*\n +→ answered 308, a redirect to http:\/\/127\.0\.0\.1:\d+\/api\/webhooks\/svc: svc follows no redirects/);
    expect(redirected.stdout).not.toMatch(/check the secret|tampered-body/);
    expect(redirected.stderr).toContain('(no other case was sent)');
    // A later case answered so (valid skipped) says the same, not "check the secret".
    const skipped = await check(unprefixed, '--skip', 'valid');
    expect(skipped.report.cases.find((c) => c.id === 'exact-bytes')?.reason).toMatch(/^answered 404: nothing takes a POST/);
    expect(receiver.processed).toHaveLength(5);
  });

  it('exits 2 on usage errors', async () => {
    const cases: [string[], RegExp][] = [
      [['webhooks', 'check-receiver', 'http://127.0.0.1:9/x'], /needs the receiver's signing secret/],
      [['webhooks', 'check-receiver', '--secret', 's'], /needs the receiver URL/],
      [['webhooks', 'check-receiver', 'ftp://x', '--secret', 's'], /invalid URL/],
      [['webhooks', 'check-receiver', 'http://127.0.0.1:9/a', 'http://127.0.0.1:9/b', '--secret', 's'], /takes one URL, got 2/],
      [['webhooks', 'check-receiver', 'http://127.0.0.1:9/x', '--secret', 's', '--timeout', 'soon'], /invalid --timeout "soon"/],
      // Commander's own usage errors too (they exited 1, as a failed check does).
      [['webhooks', 'check-receiver', 'http://127.0.0.1:9/x', '--secrt', 's'], /unknown option '--secrt' \(did you mean --secret\?\)/],
      [['webhooks', 'check-receiver', 'http://127.0.0.1:9/x', '--secret'], /option '--secret <secret>' argument missing/],
      [['webhooks', 'check-reciever', 'http://127.0.0.1:9/x'], /unknown command 'check-reciever'/],
      [['listen', '--port', 'abc'], /argument 'abc' is invalid/],
      // A pasted line break would sign every case with another key, and the receiver would be blamed for refusing.
      [['webhooks', 'check-receiver', 'http://127.0.0.1:9/x', '--secret', 'whsec_abc\n'], /^svc-cli: option '--secret' is invalid \(its value is not shown\)\. Must be the signing secret without whitespace at its start or end/],
      [['webhooks', 'check-receiver', 'http://127.0.0.1:9/x', '--secret', 's', '--skip', 'valid,nope'], /unknown case "nope" for --skip/],
    ];
    for (const [args, message] of cases) {
      const { code, stderr, stdout } = await runCli(args, { cwd: sandbox.path });
      expect(stderr).toMatch(message);
      expect(stdout).toBe('');
      expect(code).toBe(2);
    }
  });
});
