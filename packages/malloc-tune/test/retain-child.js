// Run by index.test.js in a fresh process (node --expose-gc): frees 25 MB of 256 KiB blocks after a 30 MB
// block was freed (which raises glibc's dynamic thresholds to 30 and 60 MB), and prints how much of the
// 25 MB the process still holds. With `tuned` it first calls limitMallocRetention().
import { readFileSync } from 'node:fs';
import { limitMallocRetention } from '../index.js';

const tuning = process.argv[2] === 'tuned' ? limitMallocRetention({ env: process.env }) : null;
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
const held = rssMb() - before;
blocks = null;
await collect();
process.stdout.write(JSON.stringify({ tuning, heldMb: held, retainedMb: rssMb() - before }));
