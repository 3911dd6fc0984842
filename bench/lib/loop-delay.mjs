// Preloaded into svc by bench/big-requests.mjs (`node --import`): the main thread's event-loop delay
// (perf_hooks.monitorEventLoopDelay, 1 ms resolution) written as JSON to SVC_BENCH_LOOP_FILE every 500 ms and
// at exit, reset whenever that file's `.reset` sibling appears (the bench touches it when measuring starts).
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.SVC_BENCH_LOOP_FILE;
if (file) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const ms = (ns) => Math.round(ns / 1e4) / 100;
  const write = () => {
    if (existsSync(`${file}.reset`)) {
      rmSync(`${file}.reset`, { force: true });
      h.reset();
      return;
    }
    writeFileSync(file, JSON.stringify({ count: h.count, p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), p999: ms(h.percentile(99.9)), max: ms(h.max) }));
  };
  setInterval(write, 500).unref();
  process.on('exit', write);
}
