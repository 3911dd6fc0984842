#!/usr/bin/env node
// CPU time (user + sys) of a svc-server command's start: `--help`, `keys list` (opens the SQLite database) and
// `start` up to its "svc listening" line, on the offline model (no upstream: its tokenizer is built after it
// listens) and with an upstream set (nothing listens there; a start does not call it); for `start` also the wall
// time from the spawn to that line (what a user waits for). With --base, rounds alternate between that build and
// this one (order swapped every round), so a host whose load drifts moves both alike.
//
//   node bench/cli-start.mjs --rounds 10 --base /other/clone/apps/server/dist/bin.js
//
// Each build gets its own fresh data directory (migrated, one user, one key). Prints the median and the range
// per command and build, and the load average before and after.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: { rounds: { type: 'string', default: '10' }, base: { type: 'string' } },
});
const HERE = resolve(import.meta.dirname, '../apps/server/dist/bin.js');
const builds = args.base ? [{ name: 'base', bin: resolve(args.base) }, { name: 'this', bin: HERE }] : [{ name: 'this', bin: HERE }];
const TICK_S = 1 / Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);
const dirs = [];

function envFor(dir) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  return { ...clean, SVC_DATABASE_URL: `sqlite:${join(dir, 'svc.db')}`, SVC_PORT: '0', SVC_LOG_LEVEL: 'warn' };
}

function mustRun(bin, env, argv) {
  const r = spawnSync(process.execPath, [bin, ...argv], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${bin} ${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
}

/** CPU seconds of a command that exits, as GNU time reports them. */
function timedRun(bin, env, argv) {
  const r = spawnSync('/usr/bin/time', ['-f', '%U %S', process.execPath, bin, ...argv], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
  const [user, sys] = r.stderr.trim().split('\n').at(-1).split(' ').map(Number);
  return user + sys;
}

/** CPU seconds of `start` when it prints its listening line (from /proc, then the process is stopped), and the wall seconds from the spawn to it. */
function timedStart(bin, env) {
  return new Promise((resolvePromise, reject) => {
    const spawned = performance.now();
    const child = spawn(process.execPath, [bin, 'start'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    let listening = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no listening line in 120 s:\n${err}`));
    }, 120_000);
    child.stderr.on('data', (d) => {
      err += d;
      if (listening || !/svc listening on /.test(err)) return;
      listening = true;
      const wall = (performance.now() - spawned) / 1000;
      clearTimeout(timer);
      // The fields after the command's name: utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cpu = (Number(fields[11]) + Number(fields[12])) * TICK_S;
      child.once('exit', () => resolvePromise({ cpu, wall }));
      child.kill('SIGTERM');
    });
    child.once('exit', (code) => {
      if (listening) return;
      clearTimeout(timer);
      reject(new Error(`start exited ${code} before listening:\n${err}`));
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

try {
  for (const build of builds) {
    const dir = mkdtempSync(join(tmpdir(), 'svc-cli-start-'));
    dirs.push(dir);
    build.env = envFor(dir);
    mustRun(build.bin, build.env, ['users', 'create', '--email', 'bench@example.com', '--password', 'bench-password']);
    mustRun(build.bin, build.env, ['keys', 'create', '--email', 'bench@example.com']);
    build.upstreamEnv = { ...build.env, SVC_UPSTREAM_BASE_URL: 'http://127.0.0.1:9/v1' };
    build.cpu = { help: [], 'keys list': [], start: [], 'start (upstream set)': [] };
    build.wall = { start: [], 'start (upstream set)': [] };
  }
  const loadBefore = loadavg();
  const rounds = Number(args.rounds);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 ? [...builds].reverse() : builds;
    for (const build of order) {
      build.cpu.help.push(timedRun(build.bin, build.env, ['--help']));
      build.cpu['keys list'].push(timedRun(build.bin, build.env, ['keys', 'list']));
      for (const [name, env] of [['start', build.env], ['start (upstream set)', build.upstreamEnv]]) {
        const { cpu, wall } = await timedStart(build.bin, env);
        build.cpu[name].push(cpu);
        build.wall[name].push(wall);
      }
    }
  }
  const loadAfter = loadavg();
  const fmt = (x) => x.toFixed(2);
  console.log(`${rounds} rounds; load average before ${loadBefore.map(fmt).join(' ')}, after ${loadAfter.map(fmt).join(' ')}`);
  for (const [title, figure] of [['CPU seconds (user+sys)', 'cpu'], ['wall seconds from spawn to the listening line', 'wall']]) {
    console.log(`${title}: median [min–max]`);
    for (const command of Object.keys(builds[0][figure])) {
      const row = builds.map((b) => `${b.name} ${fmt(median(b[figure][command]))} [${fmt(Math.min(...b[figure][command]))}–${fmt(Math.max(...b[figure][command]))}]`);
      console.log(`${command.padEnd(20)} ${row.join('   ')}`);
    }
  }
} finally {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
