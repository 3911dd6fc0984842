#!/usr/bin/env node
// Summarises a callgrind dump of the server (bench/instructions.mjs --keep): instructions by function, with
// V8's JIT code named from the process's perf map (node --perf-basic-prof writes /tmp/perf-PID.map), and by
// kind (JavaScript, V8 builtins, TurboFan compiling, JSON, SQLite, hashing, libc, …).
//
//   node bench/lib/callgrind-summary.mjs DUMP [PERF_MAP] [--top N] [--requests N]
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '40' }, requests: { type: 'string' } },
});
const [dump, perfMap] = positionals;
if (!dump) {
  process.stderr.write('usage: node bench/lib/callgrind-summary.mjs DUMP [PERF_MAP] [--top N] [--requests N]\n');
  process.exit(2);
}

/** The perf map's code ranges, sorted by start: [start, end, name]. */
function readPerfMap(path) {
  if (!path || !existsSync(path)) return [];
  const ranges = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    if (m) ranges.push([parseInt(m[1], 16), parseInt(m[1], 16) + parseInt(m[2], 16), m[3]]);
  }
  return ranges.sort((a, b) => a[0] - b[0]);
}

/** The name of the code range holding `address` (the last one mapped there: V8 reuses code space). */
function nameAt(ranges, address) {
  let lo = 0;
  let hi = ranges.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (ranges[mid][0] <= address) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  for (let i = found; i >= 0 && i > found - 64; i--) if (address < ranges[i][1]) return ranges[i][2];
  return undefined;
}

const KINDS = [
  ['TurboFan compiling', /v8::internal::compiler::|v8::internal::maglev|v8::internal::Zone|OptimizedCompilationJob/],
  ['JSON.stringify', /JsonStringifier/],
  ['JSON.parse', /JsonParser/],
  ['SQLite', /better_sqlite3/],
  ['SHA-256 / HMAC', /sha256|SHA256|HMAC/i],
  ['UTF-8 encode / length', /Utf8/],
  ['GC', /v8::internal::(Scavenger|MarkCompact|Heap::|ConcurrentMarking|MarkingVisitor|Sweeper|MemoryAllocator|PagedSpace|IncrementalMarking|Evacuat|ScavengeVisitor)/],
  ['libc', /libc\.so/],
  ['JavaScript (JIT code)', /^(JS:|LazyCompile:|Function:|\(jit\))/],
  ['V8 builtins', /Builtins_|^Builtin:|^BytecodeHandler:|^Stub:|^RegExp:/],
];

const out = execFileSync('callgrind_annotate', ['--threshold=100', dump], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
const ranges = readPerfMap(perfMap);
const byName = new Map();
let total = 0;
for (const line of out.split('\n')) {
  const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
  if (!m || m[2].includes('PROGRAM TOTALS')) continue;
  const count = Number(m[1].replaceAll(',', ''));
  let name = m[2];
  const unknown = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(name);
  if (unknown) name = nameAt(ranges, parseInt(unknown[1], 16)) ?? '(jit) unnamed';
  else name = name.replace(/^\?\?\?:/, '');
  byName.set(name, (byName.get(name) ?? 0) + count);
  total += count;
}
const requests = opts.requests ? Number(opts.requests) : undefined;
const fmt = (n) => (requests ? `${Math.round(n / requests).toLocaleString('en').padStart(9)}/req` : `${(n / 1e6).toFixed(1).padStart(8)}M`);
const pct = (n) => `${((100 * n) / total).toFixed(1).padStart(5)} %`;

const kinds = new Map();
for (const [name, count] of byName) {
  const kind = KINDS.find(([, re]) => re.test(name))?.[0] ?? 'other (V8 runtime, node, libuv, …)';
  kinds.set(kind, (kinds.get(kind) ?? 0) + count);
}
process.stdout.write(`${dump}: ${(total / 1e6).toFixed(1)} M instructions${requests ? ` over ${requests} requests` : ''}\n\nBy kind:\n`);
for (const [kind, count] of [...kinds].sort((a, b) => b[1] - a[1])) process.stdout.write(`${pct(count)} ${fmt(count)}  ${kind}\n`);
process.stdout.write(`\nBy function (top ${opts.top}):\n`);
for (const [name, count] of [...byName].sort((a, b) => b[1] - a[1]).slice(0, Number(opts.top))) {
  process.stdout.write(`${pct(count)} ${fmt(count)}  ${name.slice(0, 160)}\n`);
}
