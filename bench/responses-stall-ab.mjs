// The Responses API's own heavy inputs against this checkout's build (A) and another (B), alternated: 9 MiB of
// `instructions` (stored, echoed) and 20,000 input items, both at once, three times, while /healthz is polled
// every 10 ms, as the reliability-event-loop suite sends them. Prints each run's polls' p50, p99 and max (ms):
// the event-loop stall the inputs cause; then the medians of p99. Each server runs on the offline model with a
// fresh SQLite database.
//
//   node bench/responses-stall-ab.mjs [BIN_B] [--runs 8]
//
// BIN_B: another build's apps/server/dist/bin.js. Copy a base build away from the checkout (with its
// node_modules reachable) before rebuilding.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { buildsOf, measureAlternately } from './lib/ab-builds.mjs';

const { values: opts, positionals } = parseArgs({ allowPositionals: true, options: { runs: { type: 'string', default: '8' } } });
const builds = buildsOf(positionals[0] && resolve(positionals[0]));

const MiB = 1024 * 1024;
const prose = (bytes) => 'The tower was finished in 1889 and is 330 metres tall. '.repeat(Math.ceil(bytes / 56)).slice(0, bytes);
const bodies = [
  JSON.stringify({ model: 'svc01', instructions: prose(9 * MiB), input: 'How tall is the tower?' }),
  JSON.stringify({ model: 'svc01', input: Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Item ${i} is a tower of ${i} metres.` })) }),
];

async function run(bin) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-responses-stall-'));
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_'))), SVC_HOST: '127.0.0.1', SVC_PORT: '0', SVC_LOG_LEVEL: 'warn', SVC_RATE_LIMIT_RPM: '100000', SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}` };
  const cli = (args) => {
    const r = spawnSync(process.execPath, [bin, ...args], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`svc-server ${args[0]} failed: ${r.stderr}`);
    return r.stdout;
  };
  cli(['users', 'create', '--email', 'stall@example.test', '--password', 'correct horse battery']);
  const { key } = JSON.parse(cli(['keys', 'create', '--email', 'stall@example.test', '--json']));
  const child = spawn(process.execPath, [bin, 'start'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    const url = await new Promise((resolveUrl, reject) => {
      let err = '';
      child.stderr.on('data', (d) => {
        err += d;
        const m = /http:\/\/127\.0\.0\.1:\d+/.exec(err);
        if (m) resolveUrl(m[0]);
      });
      child.once('exit', (code) => reject(new Error(`server exited (${code}): ${err}`)));
    });
    const post = (body) =>
      fetch(`${url}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body }).then(async (r) => {
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`status ${r.status}`);
      });
    await post(bodies[1]);
    const polls = [];
    let done = false;
    const polling = (async () => {
      while (!done) {
        const started = performance.now();
        await fetch(`${url}/healthz`).then((r) => r.arrayBuffer());
        polls.push(performance.now() - started);
        await delay(10);
      }
    })();
    await delay(100);
    for (let round = 0; round < 3; round++) await Promise.all(bodies.map(post));
    await delay(200);
    done = true;
    await polling;
    polls.sort((a, b) => a - b);
    const at = (q) => Math.round(polls[Math.min(polls.length - 1, Math.floor(q * polls.length))]);
    return { polls: polls.length, p50: at(0.5), p99: at(0.99), max: Math.round(polls.at(-1)) };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
    rmSync(dir, { recursive: true, force: true });
  }
}

await measureAlternately(
  builds,
  Number(opts.runs),
  async (build, i) => {
    const figures = await run(build.bin);
    console.log(`run ${i + 1} ${build.name}: ${JSON.stringify(figures)}`);
    return figures.p99;
  },
  'polls p99 (ms)',
);
