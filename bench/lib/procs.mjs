// Child processes of the bench: spawned pinned to a core, waited for, measured, and always stopped.
import { spawn, execFileSync } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import net from 'node:net';

/** Whether `taskset` is available (pinning is skipped, and said so, when it is not). */
export const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Pins this process (all its threads) to `core`. */
export function pinSelf(core) {
  if (hasTaskset) execFileSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore' });
}

/** A free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const children = new Set();

/**
 * Spawns `command args` pinned to `core` (taskset execs the program, so the pid is the program's).
 * stdout/stderr go to `logFile` when given. Returns { pid, child, exited }.
 */
export function spawnPinned(core, command, args, { env, cwd, logFile } = {}) {
  const argv = hasTaskset ? ['taskset', '-c', String(core), command, ...args] : [command, ...args];
  // The child writes its log straight to a file: relaying it through this (busy) process would let the
  // child's log buffers grow and inflate its RSS.
  const out = openSync(logFile ?? '/dev/null', 'a');
  const child = spawn(argv[0], argv.slice(1), { env: env ?? process.env, cwd, stdio: ['ignore', out, out] });
  closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const entry = { pid: child.pid, child, exited, done: false };
  exited.then(() => {
    entry.done = true;
    children.delete(entry);
  });
  children.add(entry);
  return entry;
}

/** Polls `url` until it answers (any status below 500) or `timeoutMs` passes. */
export async function waitHttp(url, { timeoutMs = 20_000, proc } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc?.done) throw new Error(`process for ${url} exited before it was ready`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status < 500) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not come up within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Peak and current resident set size (MB) from /proc/PID/status, or null. */
export function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { peakRssMb: round(kb('VmHWM') / 1024, 1), rssMb: round(kb('VmRSS') / 1024, 1) };
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) used so far by `pid`, or null. */
export function cpuSecondsOf(pid) {
  const times = cpuTimesOf(pid);
  return times && times.user + times.system;
}

/** CPU seconds used so far by `pid` in user space and in the kernel ({ user, system }), or null. */
export function cpuTimesOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 }; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return null;
  }
}

/** Busy/total jiffies per core from /proc/stat. */
export function coreTimes() {
  try {
    const lines = readFileSync('/proc/stat', 'utf8').split('\n').filter((l) => /^cpu\d+ /.test(l));
    return lines.map((l) => {
      const v = l.trim().split(/\s+/).slice(1).map(Number);
      const idle = v[3] + v[4];
      const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
      return { busy: total - idle, total };
    });
  } catch {
    return [];
  }
}

/** Busy % per core between two `coreTimes()` readings. */
export function coreBusy(before, after) {
  return after.map((a, i) => {
    const b = before[i];
    if (!b || a.total === b.total) return null;
    return round((100 * (a.busy - b.busy)) / (a.total - b.total), 0);
  });
}

/** SIGTERM, then SIGKILL after `graceMs`. Resolves when the process is gone. */
export async function stop(entry, graceMs = 3000) {
  if (!entry || entry.done) return;
  entry.child.kill('SIGTERM');
  const timer = setTimeout(() => entry.child.kill('SIGKILL'), graceMs);
  await entry.exited;
  clearTimeout(timer);
}

/** Stops every child still running (used in `finally` and on signals). */
export async function stopAll() {
  await Promise.all([...children].map((c) => stop(c, 2000)));
}

/** Synchronous last resort when the bench itself is exiting. */
export function killAllSync() {
  for (const c of children) {
    try {
      c.child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}

export function round(x, digits = 2) {
  if (x === null || x === undefined || !Number.isFinite(x)) return null;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** The median of `xs` (the mean of the middle two for an even count). */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
