// The long tasks of a V8 .cpuprofile: stretches of consecutive non-idle samples longer than MIN_MS (default 5),
// and within them the self time by function and by the nearest frame of this repo (source-mapped to src/).
// What stalls every other request on the main thread, where profile-summary.mjs gives only totals.
//
//   [FROM_S=8] [STALLS=15] node bench/lib/profile-stalls.mjs FILE.cpuprofile [MIN_MS] [TOP]
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

const [file, minArg, topArg] = process.argv.slice(2);
const MIN_MS = Number(minArg ?? 5);
const TOP = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const maps = new Map();
const where = (cf) => {
  const url = cf.url;
  if (!/\/(apps|packages)\/[^/]+\/dist\//.test(url)) return null;
  if (!maps.has(url)) {
    const f = url.startsWith('file:') ? fileURLToPath(url) : url;
    maps.set(url, existsSync(`${f}.map`) ? new SourceMap(JSON.parse(readFileSync(`${f}.map`, 'utf8'))) : null);
  }
  const e = maps.get(url)?.findEntry(cf.lineNumber, cf.columnNumber);
  const src = e?.originalSource ? e.originalSource.replace(/^.*?\/((?:apps|packages)\/.*)$/, '$1') : url;
  return `${cf.functionName || '(anonymous)'}  ${src}:${(e?.originalLine ?? cf.lineNumber) + 1}`;
};
const repoFrame = new Map();
const repoOf = (id) => {
  if (repoFrame.has(id)) return repoFrame.get(id);
  const n = nodes.get(id);
  const w = where(n.callFrame) ?? (parent.has(id) ? repoOf(parent.get(id)) : '(no repo frame)');
  repoFrame.set(id, w);
  return w;
};
const isIdle = (id) => ['(idle)', '(program)'].includes(nodes.get(id).callFrame.functionName) && nodes.get(id).callFrame.url === '';
// FROM_S: only stretches starting that many seconds or more after the profile began (past start-up).
const FROM_S = Number(process.env.FROM_S ?? 0);
const stalls = [];
let cur = null;
let t = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
  t += (profile.timeDeltas[i] ?? 0) / 1000;
  if (t < FROM_S * 1000) continue;
  if (isIdle(id)) {
    if (cur && cur.ms >= MIN_MS) stalls.push(cur);
    cur = null;
    continue;
  }
  cur ??= { at: t, ms: 0, byRepo: new Map(), bySelf: new Map() };
  cur.ms += dt;
  const r = repoOf(id);
  cur.byRepo.set(r, (cur.byRepo.get(r) ?? 0) + dt);
  const self = `${nodes.get(id).callFrame.functionName || '(anonymous)'}`;
  cur.bySelf.set(self, (cur.bySelf.get(self) ?? 0) + dt);
}
stalls.sort((a, b) => b.ms - a.ms);
const total = stalls.reduce((s, x) => s + x.ms, 0);
console.log(`${stalls.length} stretches of ${MIN_MS} ms or more, ${Math.round(total)} ms in all; longest: ${stalls.slice(0, 10).map((s) => s.ms.toFixed(1)).join(', ')}`);
const sum = (key) => {
  const m = new Map();
  for (const s of stalls) for (const [k, v] of s[key]) m.set(k, (m.get(k) ?? 0) + v);
  return [...m].sort((a, b) => b[1] - a[1]).slice(0, TOP);
};
console.log('\nIn those stretches, by nearest repo frame:');
for (const [k, v] of sum('byRepo')) console.log(`${v.toFixed(0).padStart(7)} ms  ${k}`);
console.log('\nIn those stretches, by self function:');
for (const [k, v] of sum('bySelf')) console.log(`${v.toFixed(0).padStart(7)} ms  ${k}`);
console.log('\nLongest stretches, top frames each:');
for (const s of stalls.slice(0, Number(process.env.STALLS ?? 15))) {
  const top = [...s.byRepo].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => `${v.toFixed(1)} ${k.replace(/\s+\S*src\//, ' ')}`);
  console.log(`${s.ms.toFixed(1).padStart(7)} ms at ${(s.at / 1000).toFixed(1)} s: ${top.join(' | ')}`);
}
