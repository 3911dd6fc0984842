import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWebhook } from '@svc/verify';
import { generateSigningSecret } from '../src/crypto/secret-box.js';
import { DashboardClient } from './support/dashboard-client.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver, type ReceivedDelivery } from './support/webhooks.js';

// The receiver snippets of docs/webhooks.md ("In any language"), run against real svc deliveries so they cannot rot.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SNIPPETS = join(ROOT, 'docs/receivers');

/** Whether a command runs; missing is a failure in CI (CI=true), a skip with a note elsewhere. */
function available(command: string, args: string[]): boolean {
  const ok = spawnSync(command, args, { stdio: 'ignore' }).status === 0;
  if (!ok && process.env.CI === 'true') throw new Error(`${command} is required in CI to run the receiver snippets`);
  if (!ok) console.warn(`[receiver-snippets] SKIPPED the ${command} snippet: ${command} is not installed (CI=true requires it)`);
  return ok;
}
const hasPython = available('python3', ['--version']);
const hasOpenssl = available('openssl', ['version']);

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;
let dir: string;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'The Eiffel Tower is in Paris. Ça va? 中文 🚀' });
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
  dir = mkdtempSync(join(tmpdir(), 'svc-snippets-'));
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** One real delivery of a chat completion made with a key signed by `secret`. */
async function deliveryFor(secret: string): Promise<ReceivedDelivery> {
  const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: secret });
  const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
  const { id } = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Where is the Eiffel Tower?' }] });
  const of = (list: ReceivedDelivery[]) => list.find((d) => d.raw.toString('utf8').includes(`"request_id":"${id}"`));
  await receiver.waitFor((list) => of(list) !== undefined);
  return of(receiver.received)!;
}

/**
 * One real delivery of a key whose signing secret was rotated in the dashboard: `webhook-signature` carries two
 * signatures, the new secret's and the rotated-out one's, for the overlap.
 */
async function rotatedDelivery(): Promise<{ d: ReceivedDelivery; newSecret: string; oldSecret: string }> {
  const { token, key, user } = await server.createKey({ webhookUrl: receiver.url });
  const dashboard = new DashboardClient(server.url);
  expect((await dashboard.login(user.email)).status).toBe(200);
  const oldSecret: string = (await dashboard.request('POST', `/keys/${key.id}/signing-secret`, {})).body.secret;
  const newSecret: string = (await dashboard.request('POST', `/keys/${key.id}/signing-secret`, {})).body.secret;
  const client = new OpenAI({ apiKey: token, baseURL: `${server.url}/v1`, maxRetries: 0 });
  const { id } = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Where is the Eiffel Tower?' }] });
  const of = (list: ReceivedDelivery[]) => list.find((d) => d.raw.toString('utf8').includes(`"request_id":"${id}"`));
  await receiver.waitFor((list) => of(list) !== undefined);
  return { d: of(receiver.received)!, newSecret, oldSecret };
}

const header = (d: ReceivedDelivery, name: string) => String(d.headers[name] ?? '');
const tamper = (raw: Buffer) => Buffer.from(raw.toString('utf8').replace('"total_tokens":', '"total_tokens":1'));

/** Both checks of verify.py on a body, with the delivery's headers. */
function python(secret: string, d: ReceivedDelivery, body: Buffer, tolerance = 300): { svc: boolean; standard: boolean } {
  const script = [
    'import base64, json, sys',
    'from verify import verify_svc_signature, verify_standard_webhook',
    'i = json.load(sys.stdin)',
    'body = base64.b64decode(i["body"])',
    'print(json.dumps({"svc": verify_svc_signature(i["secret"], body, i["headers"]["x-svc-signature"]),',
    '  "standard": verify_standard_webhook(i["secret"], body, i["headers"], i["tolerance"])}))',
  ].join('\n');
  const headers = Object.fromEntries(['x-svc-signature', 'webhook-id', 'webhook-timestamp', 'webhook-signature'].map((n) => [n, header(d, n)]));
  const run = spawnSync('python3', ['-c', script], {
    cwd: SNIPPETS,
    input: JSON.stringify({ secret, body: body.toString('base64'), headers, tolerance }),
    encoding: 'utf8',
  });
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as { svc: boolean; standard: boolean };
}

/** verify-webhook.sh's exit status on a body with a delivery's Standard Webhooks headers (or others given). */
function shellStandard(secret: string, body: Buffer, h: { id: string; timestamp: string; signature: string }): number | null {
  const file = join(dir, `body-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, body);
  const run = spawnSync('sh', [join(SNIPPETS, 'verify-webhook.sh'), file, h.id, h.timestamp, h.signature], {
    env: { ...process.env, SVC_WEBHOOK_SECRET: secret },
    encoding: 'utf8',
  });
  expect(run.stderr).toBe('');
  return run.status;
}
const standardHeaders = (d: ReceivedDelivery) => ({ id: header(d, 'webhook-id'), timestamp: header(d, 'webhook-timestamp'), signature: header(d, 'webhook-signature') });

/** verify.sh's exit status on a body. */
function shell(secret: string, signature: string, body: Buffer): number | null {
  const file = join(dir, `body-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, body);
  return spawnSync('sh', [join(SNIPPETS, 'verify.sh'), file, signature], { env: { ...process.env, SVC_WEBHOOK_SECRET: secret } }).status;
}

describe.skipIf(!hasPython)('docs/receivers/verify.py (hmac, hashlib, base64)', () => {
  it('verifies both signatures of a real delivery with a dashboard secret (whsec_<base64>) and refuses a tampered body or another secret', async () => {
    const secret = generateSigningSecret();
    const d = await deliveryFor(secret);
    expect(python(secret, d, d.raw)).toEqual({ svc: true, standard: true });
    expect(python(secret, d, tamper(d.raw))).toEqual({ svc: false, standard: false });
    expect(python(generateSigningSecret(), d, d.raw)).toEqual({ svc: false, standard: false });
  });

  it('keys a secret of the user\'s own by its UTF-8 bytes, and refuses a webhook-timestamp out of the tolerance', async () => {
    const secret = 'my own sécret';
    const d = await deliveryFor(secret);
    expect(python(secret, d, d.raw)).toEqual({ svc: true, standard: true });
    const age = Math.floor(Date.now() / 1000) - Number(header(d, 'webhook-timestamp'));
    expect(python(secret, d, d.raw, age - 1).standard).toBe(false);
  });
});

describe.skipIf(!hasPython)('docs/receivers/verify.py while a secret is rotated', () => {
  it('accepts a real delivery under the new secret and under the rotated-out one (two signatures in webhook-signature), and refuses it under a third', async () => {
    const { d, newSecret, oldSecret } = await rotatedDelivery();
    expect(header(d, 'webhook-signature').split(' ')).toHaveLength(2);
    expect(python(newSecret, d, d.raw).standard).toBe(true);
    expect(python(oldSecret, d, d.raw).standard).toBe(true);
    expect(python(generateSigningSecret(), d, d.raw).standard).toBe(false);
    expect(python(oldSecret, d, tamper(d.raw)).standard).toBe(false);
  });
});

describe.skipIf(!hasOpenssl)('docs/receivers/verify-webhook.sh (openssl dgst -mac HMAC)', () => {
  it('accepts a real delivery\'s webhook-signature under the new and the rotated-out secret, and refuses a tampered body, another id or another secret', async () => {
    const { d, newSecret, oldSecret } = await rotatedDelivery();
    const h = standardHeaders(d);
    expect(shellStandard(newSecret, d.raw, h)).toBe(0);
    expect(shellStandard(oldSecret, d.raw, h)).toBe(0);
    expect(shellStandard(newSecret, tamper(d.raw), h)).toBe(1);
    expect(shellStandard(newSecret, d.raw, { ...h, id: 'whd_other' })).toBe(1);
    expect(shellStandard(generateSigningSecret(), d.raw, h)).toBe(1);
  });

  it('keys a secret of the user\'s own by its UTF-8 bytes, and refuses a webhook-timestamp more than 5 minutes from now', async () => {
    const secret = 'my own sécret';
    const d = await deliveryFor(secret);
    expect(shellStandard(secret, d.raw, standardHeaders(d))).toBe(0);
    // svc signs each attempt afresh; a copy signed 5 minutes ago (or ahead) and more is a replay, whatever its
    // signature. 30 s past the bound: the script reads its own clock a moment later (at 301 s ahead, a second's
    // delay put the copy back within the tolerance).
    const now = Math.floor(Date.now() / 1000);
    for (const timestamp of [now - 330, now + 330]) {
      const id = header(d, 'webhook-id');
      const signature = signWebhook(d.raw, { id, timestamp }, secret);
      expect(shellStandard(secret, d.raw, { id, timestamp: String(timestamp), signature })).toBe(1);
    }
    const recent = now - 240;
    expect(shellStandard(secret, d.raw, { id: 'whd_x', timestamp: String(recent), signature: signWebhook(d.raw, { id: 'whd_x', timestamp: recent }, secret) })).toBe(0);
  });
});

describe.skipIf(!hasOpenssl)('docs/receivers/verify.sh (openssl dgst -hmac)', () => {
  it('accepts a real delivery\'s X-Svc-Signature and refuses a tampered body or another secret', async () => {
    const secret = generateSigningSecret();
    const d = await deliveryFor(secret);
    const signature = header(d, 'x-svc-signature');
    expect(shell(secret, signature, d.raw)).toBe(0);
    expect(shell(secret, signature, tamper(d.raw))).toBe(1);
    expect(shell('whsec_other', signature, d.raw)).toBe(1);
  });
});

describe('docs/webhooks.md', () => {
  it('shows each receiver snippet exactly as the file that is tested', () => {
    const page = readFileSync(join(ROOT, 'docs/webhooks.md'), 'utf8');
    const blocks = [...page.matchAll(/<!-- (docs\/receivers\/[\w.-]+) -->\n```\w+\n([\s\S]*?)```\n/g)];
    expect(blocks.map((b) => b[1]).sort()).toEqual(
      ['verify.go', 'verify.php', 'verify.py', 'verify.rb', 'verify.sh', 'verify-webhook.sh', 'redis-dedupe-store.ts'].map((f) => `docs/receivers/${f}`).sort(),
    );
    for (const [, file, text] of blocks) expect(text, file).toBe(readFileSync(join(ROOT, file!), 'utf8'));
  });
});
