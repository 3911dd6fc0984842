// Loaded into svc by bench/soak.mjs (`node --expose-gc --import ./soak-probe.mjs bin.js start`): every
// SOAK_PROBE_MS it collects garbage and appends one JSON line to SOAK_PROBE_FILE with what the process holds
// then — RSS, heap used after a full GC, external memory, open handles by type, file descriptors, and the sizes
// of the SQLite files (SVC_DATABASE_URL `sqlite:PATH`). The timer is unref'd: it never keeps the server up.
import { appendFileSync, readdirSync, statSync } from 'node:fs';

const file = process.env.SOAK_PROBE_FILE;
const dbPath = process.env.SVC_DATABASE_URL?.startsWith('sqlite:') ? process.env.SVC_DATABASE_URL.slice('sqlite:'.length) : undefined;
const every = Number(process.env.SOAK_PROBE_MS ?? 15_000);
const size = (path) => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

function sample() {
  globalThis.gc?.();
  const mem = process.memoryUsage();
  const resources = {};
  for (const type of process.getActiveResourcesInfo()) resources[type] = (resources[type] ?? 0) + 1;
  let fds = -1;
  try {
    fds = readdirSync('/proc/self/fd').length;
  } catch {}
  const line = {
    t: Date.now(),
    pid: process.pid,
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    external: mem.external,
    arrayBuffers: mem.arrayBuffers,
    fds,
    resources,
    db: dbPath ? { main: size(dbPath), wal: size(`${dbPath}-wal`), shm: size(`${dbPath}-shm`) } : undefined,
  };
  appendFileSync(file, `${JSON.stringify(line)}\n`);
}

if (file) {
  setInterval(sample, every).unref();
  process.on('SIGUSR2', sample);
}
