// Heavy inputs against this checkout's build (A) and another (B), alternated, while /healthz is polled every
// 10 ms, as the reliability-event-loop suite sends them. Prints each run's polls' p50, p99 and max (ms): the
// event-loop stall the inputs cause; then the medians of the figure compared (--figure, p99 by default). Each
// server runs on the offline model with a fresh SQLite database. Cases (--case):
//   own       the Responses API's own: 9 MiB of `instructions` (stored, echoed) and 20,000 input items, both at
//             once, three times
//   items     one Responses request of 100,000 input items, three times in a row
//   messages  one chat request of 250,000 short messages (9 MiB), three times in a row
//   lists     both of those at once, three times
//
//   node bench/responses-stall-ab.mjs [BIN_B] [--runs 8] [--case own|items|messages|lists] [--figure p99|max]
//                                     [--profile DIR]   # the servers under --cpu-prof; then
//                                     #   node bench/lib/profile-stalls.mjs DIR/FILE.cpuprofile
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

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    runs: { type: 'string', default: '8' },
    case: { type: 'string', default: 'own' },
    figure: { type: 'string', default: 'p99' },
    profile: { type: 'string' },
  },
});
const builds = buildsOf(positionals[0] && resolve(positionals[0]));

const MiB = 1024 * 1024;
const prose = (bytes) => 'The tower was finished in 1889 and is 330 metres tall. '.repeat(Math.ceil(bytes / 56)).slice(0, bytes);
const items = (n) => Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `Item ${i} is a tower of ${i} metres.` }));
const messages = (n) => Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}` }));
const RESPONSES = '/v1/responses';
const CHAT = '/v1/chat/completions';
/** Per case: the bodies sent together each round and where, and the one sent before the polls start (warm-up). */
const CASES = {
  own: {
    bodies: [
      [RESPONSES, { model: 'svc01', instructions: prose(9 * MiB), input: 'How tall is the tower?' }],
      [RESPONSES, { model: 'svc01', input: items(20_000) }],
    ],
    warmUp: [RESPONSES, { model: 'svc01', input: items(20_000) }],
  },
  items: { bodies: [[RESPONSES, { model: 'svc01', input: items(100_000) }]], warmUp: [RESPONSES, { model: 'svc01', input: items(2_000) }] },
  messages: { bodies: [[CHAT, { model: 'svc01', messages: messages(250_000) }]], warmUp: [CHAT, { model: 'svc01', messages: messages(2_000) }] },
};
CASES.lists = { bodies: [...CASES.items.bodies, ...CASES.messages.bodies], warmUp: CASES.items.warmUp };
const chosen = CASES[opts.case];
if (!chosen) throw new Error(`--case: one of ${Object.keys(CASES).join(', ')}`);
// Encoded once: fetch would encode a string body in this process's loop, where the polls' answers are read.
const encode = ([path, body]) => ({ path, body: new TextEncoder().encode(JSON.stringify(body)) });
const bodies = chosen.bodies.map(encode);
const warmUp = encode(chosen.warmUp);

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
  const nodeArgs = opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(opts.profile)}`] : [];
  const child = spawn(process.execPath, [...nodeArgs, bin, 'start'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
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
    const post = ({ path, body }) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body }).then(async (r) => {
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`status ${r.status}`);
      });
    await post(warmUp);
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
    return figures[opts.figure];
  },
  `polls ${opts.figure} (ms)`,
);
