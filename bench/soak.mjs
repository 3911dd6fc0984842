#!/usr/bin/env node
// Soak: what svc holds after minutes of mixed traffic, sampled inside the server every 15 s (bench/lib/soak-probe.mjs):
// RSS, heap used after a full GC, open handles by type, file descriptors and the SQLite file sizes. A leak shows
// as a column that keeps rising while the traffic stays the same, and does not fall back once it stops.
//
//   node bench/soak.mjs                          # 5 minutes (the most it runs), then 30 s idle
//   options: --minutes M (≤ 5)  --concurrency C (default 4)  --out FILE (JSON lines of the samples)
//
// Traffic, C loops each picking at random: chat completions (plain and streamed) on 60 keys; streams aborted
// after their first chunk; upstream 500s; an upstream refusing `max_tokens` (svc retries with
// max_completion_tokens); a new unknown model name per request; unknown bearer tokens; /v1/responses. Beside
// them: every 50 ms a key's webhook URL moves to another origin (a new closed port: connection refused; a
// receiver that never answers: timeouts; or the receiver that answers 200), with a test send every fifth move;
// every 0.5 s a dashboard sign-in (half never signed out) and a failed sign-in with a new e-mail. The upstream
// and receivers are in this process; svc runs on both cores, at modest load. The table: one row per sample,
// the last after 30 s without traffic (what must be back at its level before the traffic).
import { createServer } from 'node:http';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, stopAll, killAllSync } from './lib/procs.mjs';
import { REPO, exitUnlessSvcBuilt, startSvc } from './lib/svc.mjs';

const { values: opts } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '4' },
    out: { type: 'string' },
  },
});
const minutes = Math.min(5, Number(opts.minutes));
const concurrency = Number(opts.concurrency);
if (!(minutes > 0) || !Number.isInteger(concurrency) || concurrency < 1) {
  process.stderr.write('usage: node bench/soak.mjs [--minutes M (0 < M <= 5)] [--concurrency N (a positive integer)] [--out FILE]\n');
  process.exit(2);
}
const log = (msg) => process.stderr.write(`${msg}\n`);
exitUnlessSvcBuilt();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAllSync();
    process.exit(130);
  });
}

// --- the upstream ---------------------------------------------------------------------------------------------
const frame = (model, delta, finish = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-soak', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
const usage = { prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 };
const upstream = createServer((req, res) => {
  if (req.method === 'GET') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return void res.writeHead(400).end();
    }
    const model = String(body.model);
    const said = JSON.stringify(body.messages ?? body.input ?? '');
    if (said.includes('ERR500')) {
      return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom","type":"server_error","code":null}}');
    }
    if (said.includes('UNSUP') && body.max_tokens !== undefined) {
      return void res
        .writeHead(400, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: "Unsupported parameter: 'max_tokens'.", type: 'invalid_request_error', param: 'max_tokens', code: 'unsupported_parameter' } }));
    }
    const words = Array.from({ length: 10 }, (_, i) => ` w${i}`);
    if (!body.stream) {
      const completion = { id: 'chatcmpl-soak', object: 'chat.completion', created: 1, model, choices: [{ index: 0, message: { role: 'assistant', content: words.join('') }, finish_reason: 'stop', logprobs: null }], usage };
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const paced = said.includes('SLOW');
    for (const [i, w] of words.entries()) {
      if (res.destroyed) return;
      res.write(frame(model, i === 0 ? { role: 'assistant', content: w } : { content: w }));
      if (paced) await sleep(200);
    }
    res.write(frame(model, {}, 'stop'));
    res.write(`data: ${JSON.stringify({ id: 'chatcmpl-soak', object: 'chat.completion.chunk', created: 1, model, choices: [], usage })}\n\ndata: [DONE]\n\n`);
    res.end();
  });
});
// --- webhook receivers: one answers 200, one never answers ----------------------------------------------------
let received = 0;
const okReceiver = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    received += 1;
    res.writeHead(200).end('ok');
  });
});
const hanging = new Set();
const hangingReceiver = createServer((req, res) => {
  req.resume();
  hanging.add(res);
  res.on('close', () => hanging.delete(res));
});
const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
const [upstreamPort, okPort, hangingPort] = await Promise.all([listen(upstream), listen(okReceiver), listen(hangingReceiver)]);

// --- svc ------------------------------------------------------------------------------------------------------
const probeFile = opts.out ? (opts.out.includes('/') ? opts.out : join(REPO, 'bench/results', opts.out)) : `/tmp/svc-soak-${process.pid}.jsonl`;
writeFileSync(probeFile, '');
const svc = await startSvc({
  core: '0-1',
  upstreamUrl: `http://127.0.0.1:${upstreamPort}/v1`,
  webhookUrl: `http://127.0.0.1:${okPort}/hook`,
  logLevel: 'warn',
  nodeArgs: ['--expose-gc', '--import', join(REPO, 'bench/lib/soak-probe.mjs')],
  env: {
    SOAK_PROBE_FILE: probeFile,
    SOAK_PROBE_MS: '15000',
    SVC_WEBHOOK_TIMEOUT_MS: '1500',
    SVC_WEBHOOK_RETRY_SCHEDULE: '1s,2s',
    SVC_MAX_KEYS_PER_USER: '1000',
  },
});
log(`svc ${svc.url} (pid ${svc.proc.pid}), samples → ${probeFile}`);

// --- clients --------------------------------------------------------------------------------------------------
const EMAIL = 'bench@example.com';
const PASSWORD = 'bench-password-1234';
async function dashboard() {
  let cookie = '';
  let csrf = '';
  const call = async (method, path, body) => {
    const headers = { accept: 'application/json', origin: svc.url };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (cookie) headers.cookie = cookie;
    if (csrf && method !== 'GET') headers['x-csrf-token'] = csrf;
    const res = await fetch(`${svc.url}/dashboard/api${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const set = res.headers.get('set-cookie');
    if (set) cookie = set.split(';')[0];
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const login = await call('POST', '/login', { email: EMAIL, password: PASSWORD });
  if (login.status !== 200) throw new Error(`sign-in: ${login.status} ${JSON.stringify(login.body)}`);
  csrf = login.body.csrf_token;
  return call;
}
const admin = await dashboard();
const keys = [];
for (let i = 0; i < 60; i++) {
  const made = await admin('POST', '/keys', { name: `soak-${i}` });
  if (made.status !== 201) throw new Error(`key: ${made.status} ${JSON.stringify(made.body)}`);
  const hook = await admin('PATCH', `/keys/${made.body.key.id}`, { webhook_url: `http://127.0.0.1:${okPort}/hook/${i}` });
  if (hook.status !== 200) throw new Error(`webhook URL: ${hook.status} ${JSON.stringify(hook.body)}`);
  keys.push({ id: made.body.key.id, secret: made.body.token });
}

const counts = {};
const count = (what) => (counts[what] = (counts[what] ?? 0) + 1);
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];
let modelSeq = 0;
async function chat(key, body, { abortAfterFirst = false, say = 'Say ten words.' } = {}) {
  const messages = [{ role: 'user', content: say }];
  const controller = new AbortController();
  const res = await fetch(`${svc.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', messages, ...body }),
    signal: controller.signal,
  });
  if (abortAfterFirst && res.body) {
    const reader = res.body.getReader();
    await reader.read();
    controller.abort();
    return res.status;
  }
  await res.arrayBuffer();
  return res.status;
}
const kinds = [
  ['plain', () => chat(pick(keys).secret, { max_tokens: 50 })],
  ['stream', () => chat(pick(keys).secret, { stream: true, stream_options: { include_usage: true } })],
  ['stream-aborted', () => chat(pick(keys).secret, { stream: true }, { abortAfterFirst: true, say: 'SLOW' })],
  ['upstream-500', () => chat(pick(keys).secret, {}, { say: 'ERR500' })],
  ['unsupported-max-tokens', () => chat(pick(keys).secret, { max_tokens: 20 }, { say: 'UNSUP' })],
  ['unknown-model', () => chat(pick(keys).secret, { model: `gpt-${modelSeq++}` })],
  ['bad-key', () => chat(`sk-svc-unknown${Math.random().toString(36).slice(2)}`, {})],
  [
    'responses',
    async () => {
      const res = await fetch(`${svc.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pick(keys).secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc01', input: 'Say ten words.' }),
      });
      await res.arrayBuffer();
      return res.status;
    },
  ],
];
let stopping = false;
async function loop() {
  while (!stopping) {
    const [name, run] = pick(kinds);
    try {
      count(`${name} ${await run()}`);
    } catch (err) {
      count(`${name} ${err.name === 'AbortError' ? 'aborted' : err.message}`);
    }
    await sleep(10); // modest load: the machine is shared
  }
}
let originSeq = 0;
/** Every 50 ms a key's webhook URL moves to another origin; every fifth move, a test send to it. */
async function urlLoop() {
  while (!stopping) {
    const key = pick(keys);
    const roll = Math.random();
    const url =
      roll < 0.5 ? `http://127.0.0.1:${await freePort()}/hook/${originSeq++}` : roll < 0.7 ? `http://127.0.0.1:${hangingPort}/hook` : `http://127.0.0.1:${okPort}/hook/${originSeq++}`;
    try {
      count(`webhook-url ${(await admin('PATCH', `/keys/${key.id}`, { webhook_url: url })).status}`);
      if (originSeq % 5 === 0) count(`test-send ${(await admin('POST', `/keys/${key.id}/test`, {})).status}`);
    } catch (err) {
      count(`webhook-url ${err.message}`);
    }
    await sleep(50);
  }
}
/** Dashboard sign-ins (half never signed out) and failed sign-ins with a new e-mail each. */
async function sessionLoop() {
  let failSeq = 0;
  while (!stopping) {
    try {
      const session = await dashboard();
      count('sign-in 200');
      if (Math.random() < 0.5) count(`logout ${(await session('POST', '/logout', {})).status}`);
      const failed = await fetch(`${svc.url}/dashboard/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: svc.url },
        body: JSON.stringify({ email: `nobody-${failSeq++}@example.com`, password: 'wrong-password' }),
      });
      await failed.arrayBuffer();
      count(`failed-login ${failed.status}`);
    } catch (err) {
      count(`sign-in ${err.message}`);
    }
    await sleep(500);
  }
}

const started = Date.now();
const loops = [...Array.from({ length: concurrency }, loop), urlLoop(), sessionLoop()];
const progress = setInterval(() => log(`${Math.round((Date.now() - started) / 1000)} s: ${Object.values(counts).reduce((a, b) => a + b, 0)} requests`), 30_000);
await sleep(minutes * 60_000);
stopping = true;
await Promise.all(loops);
clearInterval(progress);
log('traffic stopped; 30 s idle (retries and timeouts run out), then a last sample');
await sleep(30_000);
process.kill(svc.proc.pid, 'SIGUSR2');
await sleep(1000);
const samples = readFileSync(probeFile, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
await stopAll();
for (const s of [hangingReceiver, okReceiver, upstream]) s.closeAllConnections?.();
for (const res of hanging) res.destroy();
await Promise.all([upstream, okReceiver, hangingReceiver].map((s) => new Promise((r) => s.close(r))));

const MB = (b) => (b / 1048576).toFixed(1);
const types = [...new Set(samples.flatMap((s) => Object.keys(s.resources)))].sort();
log(`\nrequests: ${JSON.stringify(counts)}\nwebhook deliveries received (200s): ${received}; origins used: ${originSeq}\n`);
const header = ['t s', 'rss MB', 'heap MB', 'ext MB', 'fds', 'db MB', 'wal MB', ...types];
const rows = samples.map((s, i) => [
  i === samples.length - 1 ? `${Math.round((s.t - started) / 1000)} idle` : String(Math.round((s.t - started) / 1000)),
  MB(s.rss),
  MB(s.heapUsed),
  MB(s.external),
  String(s.fds),
  MB(s.db?.main ?? 0),
  MB(s.db?.wal ?? 0),
  ...types.map((t) => String(s.resources[t] ?? 0)),
]);
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
for (const r of [header, ...rows]) process.stdout.write(`${r.map((c, i) => c.padStart(widths[i])).join('  ')}\n`);
if (!existsSync(probeFile)) log('no samples');
