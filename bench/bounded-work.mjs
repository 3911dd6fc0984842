#!/usr/bin/env node
// Issue #26's heavy inputs, one at a time, against the built server on the offline model, while /healthz is
// polled every 5 ms: each request's status and time and the longest poll meanwhile (the event-loop stall it
// caused). Then 250 unfinished 10 MiB uploads (2 MiB sent each): the server's RSS and how many were answered
// 429 at once (SVC_MAX_BODY_BYTES_IN_FLIGHT). The figures are in README "Reliability" (Bounded work).
//
//   node bench/bounded-work.mjs [--cap 256MiB] [--sent-mib 2]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({ options: { cap: { type: 'string', default: '256MiB' }, 'sent-mib': { type: 'string', default: '2' } } });
const BIN = new URL('../apps/server/dist/bin.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'svc-bounded-'));
const env = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_'))),
  SVC_HOST: '127.0.0.1',
  SVC_PORT: '0',
  SVC_DATABASE_URL: `sqlite:${dir}/svc.db`,
  SVC_RATE_LIMIT_RPM: '100000',
  SVC_LOG_LEVEL: 'warn',
  SVC_MAX_BODY_BYTES_IN_FLIGHT: opts.cap,
};
const admin = (args) => spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' }).stdout;
admin(['users', 'create', '--email', 'bench@example.test', '--password', 'correct horse battery']);
const token = JSON.parse(admin(['keys', 'create', '--email', 'bench@example.test', '--json'])).key;
const child = spawn(process.execPath, [BIN, 'start'], { env, stdio: ['ignore', 'inherit', 'pipe'] });
const url = await new Promise((resolve) => {
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
    const m = /listening on (\S+)/.exec(err);
    if (m) resolve(m[1]);
  });
});

const MiB = 1024 * 1024;
const prose = (bytes) => 'The tower was finished in 1889 and is 330 metres tall. '.repeat(Math.ceil(bytes / 56)).slice(0, bytes);
const off = { dehallucinate: false };
const cases = {
  'first request (warm-up)': { model: 'svc01', messages: [{ role: 'user', content: 'hi' }] },
  '200 KB of spaces': { model: 'svc01', svc: off, messages: [{ role: 'user', content: `${' '.repeat(200_000)}Hello?` }] },
  '200 KB of spaces, grounding-checked': { model: 'svc01', messages: [{ role: 'user', content: `${' '.repeat(200_000)}Hello?` }] },
  '3 MB of spaces, streamed': { model: 'svc01', svc: off, stream: true, messages: [{ role: 'user', content: ' '.repeat(3_000_000) }] },
  '3 MB of spaces': { model: 'svc01', svc: off, messages: [{ role: 'user', content: ' '.repeat(3_000_000) }] },
  'tool schema minLength 1e9': {
    model: 'svc01',
    messages: [{ role: 'user', content: 'Look up Paris.' }],
    tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string', minLength: 1e9 } }, required: ['q'] } } }],
    tool_choice: 'required',
  },
  '9 MiB of ordinary text': { model: 'svc01', svc: off, messages: [{ role: 'user', content: `${prose(9 * MiB)} How tall is the tower?` }] },
};
for (const [name, body] of Object.entries(cases)) {
  const text = JSON.stringify(body);
  let done = false;
  const polls = [];
  const poller = (async () => {
    while (!done) {
      const t = performance.now();
      await (await fetch(`${url}/healthz`)).text();
      polls.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  const t = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: text });
  await res.text();
  const took = performance.now() - t;
  await new Promise((r) => setTimeout(r, 50));
  done = true;
  await poller;
  console.log(`${name}: ${res.status} in ${Math.round(took)} ms; longest /healthz poll ${Math.round(Math.max(...polls))} ms`);
}

const rss = () => Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))[1]) / 1024);
const port = Number(new URL(url).port);
const sent = Buffer.alloc(Number(opts['sent-mib']) * MiB, 'a');
let refused = 0;
const sockets = [];
const before = rss();
await Promise.all(
  Array.from({ length: 250 }, () => new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => {
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${10 * MiB}\r\n\r\n`);
      s.write(sent, () => resolve());
    });
    s.on('data', (d) => {
      if (d.toString().startsWith('HTTP/1.1 429')) refused++;
    });
    s.on('error', () => {});
    sockets.push(s);
  })),
);
await new Promise((r) => setTimeout(r, 3000));
console.log(`250 unfinished 10 MiB uploads (${opts['sent-mib']} MiB sent each, cap ${opts.cap}): RSS ${before} -> ${rss()} MB; answered 429 at once: ${refused}`);
for (const s of sockets) s.destroy();
child.kill('SIGINT');
await new Promise((r) => child.once('exit', r));
rmSync(dir, { recursive: true, force: true });
