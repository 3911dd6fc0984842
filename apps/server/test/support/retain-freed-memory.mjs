// Run by svc-server-bin.test.ts in a fresh process (node --expose-gc), under the GLIBC_TUNABLES it is given:
// frees 25 MB of 256 KiB blocks after a 30 MB block was freed (which raises glibc's dynamic mmap and trim
// thresholds to 30 and 60 MB), and prints how much of the 25 MB the process held, and still holds.
import { readFileSync } from 'node:fs';

const rssMb = () => (Number(readFileSync('/proc/self/statm', 'utf8').split(' ')[1]) * 4096) / 1e6;
const collect = async () => {
  // ArrayBuffer memory is freed after the collection, possibly on a helper thread.
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

let big = Buffer.allocUnsafeSlow(30 * 1024 * 1024).fill(1);
big = null;
await collect();
const before = rssMb();
let blocks = Array.from({ length: 100 }, () => Buffer.allocUnsafeSlow(256 * 1024).fill(1));
const heldMb = rssMb() - before;
blocks = null;
await collect();
process.stdout.write(JSON.stringify({ heldMb, retainedMb: rssMb() - before }));
