// ops/s of @svc/verify's verifySignature against a bare node:crypto check, @octokit/webhooks-methods,
// standardwebhooks and svix, at 1 KiB and 64 KiB bodies.
// Run from the repo root after building the package:
//   npx turbo run build --filter=@svc/verify && node bench/verify.bench.mjs
// BENCH_TIME_MS (default 1000) sets the measuring time per task.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { sign, verifySignature } from '@svc/verify';
import * as web from '@svc/verify/web';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { Bench } from 'tinybench';

const time = Number(process.env.BENCH_TIME_MS ?? 1000);
const secret = 'whsec_3q2-7wAAb0xZZkzlCJXp-fMsQhCjwcN95UvVwZzCfvE';
const base64Secret = `whsec_${Buffer.from(secret).toString('base64')}`;

/** A JSON audit payload padded (in `prompt`) to exactly `size` bytes. */
function payloadOf(size) {
  const shell = {
    event: 'llm.request.completed', request_id: 'chatcmpl-9f2c1e', timestamp: new Date().toISOString(),
    user_id: '7f1c0f5e-8a43-4c55-9a0e-3f2f1a1b2c3d', model: 'svc01', input_tokens: 12, output_tokens: 34, total_tokens: 46,
    latency_ms: 812, status_code: 200, streaming: false, prompt: '', response_text: 'Paris.', grounded: true, hallucination_score: 0.03,
  };
  const pad = size - Buffer.byteLength(JSON.stringify(shell));
  return JSON.stringify({ ...shell, prompt: 'x'.repeat(pad) });
}

function bare(body, header) {
  const expected = Buffer.from(header.slice(7), 'hex');
  const actual = createHmac('sha256', secret).update(body).digest();
  return expected.length === actual.length && timingSafeEqual(actual, expected);
}

const rows = [];
for (const size of [1024, 64 * 1024]) {
  const body = payloadOf(size);
  const bodyBuffer = Buffer.from(body);
  const header = sign(body, secret);
  const svix = new SvixWebhook(base64Secret);
  const standard = new StandardWebhook(base64Secret);
  const msgId = 'msg_2hVH2Y3F9j3o0qj2';
  const now = new Date();
  const svixHeaders = { 'svix-id': msgId, 'svix-timestamp': String(Math.floor(now / 1000)), 'svix-signature': svix.sign(msgId, now, body) };
  const standardHeaders = { 'webhook-id': msgId, 'webhook-timestamp': String(Math.floor(now / 1000)), 'webhook-signature': standard.sign(msgId, now, body) };

  const tasks = {
    '@svc/verify verifySignature (string body)': () => assert(verifySignature(body, header, secret)),
    '@svc/verify verifySignature (Buffer body)': () => assert(verifySignature(bodyBuffer, header, secret)),
    '@svc/verify/web verifySignature (Web Crypto)': async () => assert(await web.verifySignature(body, header, secret)),
    'bare createHmac + timingSafeEqual': () => assert(bare(body, header)),
    '@octokit/webhooks-methods verify': async () => assert(await octokitVerify(secret, body, header)),
    // These two throw on a bad signature and return the parsed payload otherwise.
    'standardwebhooks verify': () => assert(typeof standard.verify(body, standardHeaders) === 'object'),
    'svix verify': () => assert(typeof svix.verify(body, svixHeaders) === 'object'),
  };
  const bench = new Bench({ time, warmupTime: Math.min(time, 250) });
  for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
  await bench.run();
  for (const task of bench.tasks) {
    if (task.result.error) throw task.result.error;
    rows.push({ size: `${size / 1024} KiB`, name: task.name, opsPerSec: task.result.throughput.mean });
  }
}

function assert(ok) {
  if (ok !== true) throw new Error('verification failed in the benchmark');
}

const ours = (size) => rows.find((r) => r.size === size && r.name.endsWith('(string body)')).opsPerSec;
console.log(`node ${process.version}, ${time} ms per task\n`);
console.log('| body | verifier | ops/s | @svc/verify (string) is |');
console.log('|---|---|---:|---:|');
for (const r of rows) {
  const ratio = ours(r.size) / r.opsPerSec;
  console.log(`| ${r.size} | ${r.name} | ${Math.round(r.opsPerSec).toLocaleString('en-US')} | ${ratio.toFixed(2)}× |`);
}

const ratioOf = (size, name) => ours(size) / rows.find((r) => r.size === size && r.name === name).opsPerSec;
const targets = [
  ['bare createHmac + timingSafeEqual', 0.9],
  ['@octokit/webhooks-methods verify', 1],
  ['svix verify', 5],
];
console.log('\nTargets (at 1 KiB and 64 KiB):');
for (const [name, min] of targets) {
  for (const size of ['1 KiB', '64 KiB']) {
    const ratio = ratioOf(size, name);
    console.log(`  ${ratio >= min ? 'met ' : 'MISS'}  ${size}: ${ratio.toFixed(2)}× ${name} (target ≥ ${min}×)`);
  }
}
