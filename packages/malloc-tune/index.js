import { createRequire } from 'node:module';

/** glibc's own starting mmap threshold (128 KiB), kept fixed: larger blocks are mapped and unmapped alone. */
export const DEFAULT_THRESHOLD_BYTES = 128 * 1024;

/**
 * A heap keeps up to this much free memory at its top. At glibc's 128 KiB the server's main heap was given
 * back and taken again ~1.2 times a request under load (`brk`, with the page faults after it: 216 / 211
 * against 223 / 222 µs of CPU per streamed request in two A/B runs, `bench/syscalls.mjs`: 1.22 → 0 `brk`
 * per request), for the same peak RSS.
 */
export const DEFAULT_TRIM_BYTES = 1024 * 1024;

/** @type {import('./index.js').MallocTuning} */
let state = { applied: false, reason: 'not tried' };

/**
 * Fixes glibc's malloc mmap and trim thresholds (mallopt) in this process: blocks from `bytes` up are
 * mapped on their own, and a heap keeps at most `trimBytes` free at its top. By default glibc raises both
 * whenever a large block is freed — up to 32 and 64 MB — and from then on keeps freed memory of every
 * thread's arena instead of giving it back. V8's compiler and GC threads free such blocks all the time, so
 * a busy server's RSS grew by ~15 MB that it never used again (`MALLOC_MMAP_THRESHOLD_=131072` does the same
 * from the environment, which only a process's parent can set). A threshold already set in the
 * environment (`env`: the process's environment, passed by the caller) wins; where the addon was not built
 * or the C library is not glibc, nothing changes.
 *
 * @example
 * limitMallocRetention({ env: process.env }); // early in the process
 * logger.info({ malloc: mallocTuning() }, 'started');
 */
export function limitMallocRetention({ env, bytes = DEFAULT_THRESHOLD_BYTES, trimBytes = DEFAULT_TRIM_BYTES }) {
  if (env.MALLOC_MMAP_THRESHOLD_ !== undefined || env.MALLOC_TRIM_THRESHOLD_ !== undefined || /glibc\.malloc\.(mmap|trim)_threshold/.test(env.GLIBC_TUNABLES ?? '')) {
    state = { applied: false, reason: 'set by the environment' };
    return state;
  }
  let addon;
  try {
    addon = createRequire(import.meta.url)('./build/Release/malloc_tune.node');
  } catch (err) {
    state = { applied: false, reason: `addon not built (${String(err?.message ?? err).split('\n')[0]})` };
    return state;
  }
  state = addon.setThresholds(bytes, trimBytes) ? { applied: true, bytes, trimBytes } : { applied: false, reason: 'not glibc' };
  return state;
}

/** What `limitMallocRetention` did in this process. */
export function mallocTuning() {
  return state;
}
