// Summarises a V8 .cpuprofile: self time by function and by module, total (inclusive) time by function, and
// time charged to the nearest function of this repo on the stack, by function and by source file (the bundles'
// source maps turn dist/chunk-*.js positions back into src/ files).
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Where a script comes from: a package, node's internals, or a file of this repo. */
function moduleOf(url) {
  if (!url) return '(native/VM)';
  if (url.startsWith('node:')) return 'node:internal';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  const repo = /\/(apps\/[^/]+|packages\/[^/]+)\/dist\/([^/]+)$/.exec(url);
  if (repo) return `${repo[1]}/dist/${repo[2]}`;
  return url.replace(/^file:\/\//, '');
}

/** A bundle of this repo (`…/apps/server/dist/chunk-X.js`): the workspace folder and the package's folder name. */
const REPO_BUNDLE = /\/(apps|packages)\/([^/]+)\/dist\//;

/** The source file (`apps/server/src/chat/grounder.ts`) of a position in a bundle, from its `.map`; else the bundle. */
function sourceFileResolver() {
  const maps = new Map();
  return (url, line, column) => {
    if (!maps.has(url)) {
      const file = url.startsWith('file:') ? fileURLToPath(url) : url;
      maps.set(url, existsSync(`${file}.map`) ? new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8'))) : null);
    }
    const entry = maps.get(url)?.findEntry(line, column);
    const source = entry && 'originalSource' in entry ? entry.originalSource : url;
    const bundle = REPO_BUNDLE.exec(url);
    // Sources are named relative to the bundle (`../src/x.ts`); prefix the package they belong to.
    return bundle ? `${bundle[1]}/${bundle[2]}/${source.replace(/^(\.\.\/)+/, '').replace(/^.*\/(apps|packages)\/[^/]+\//, '')}` : source;
  };
}

/**
 * @example
 * console.log(summarizeProfile('/tmp/CPU.123.cpuprofile', { top: 30 }));
 */
export function summarizeProfile(path, { top = 30 } = {}) {
  const profile = JSON.parse(readFileSync(path, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const keyOf = (n) => {
    const f = n.callFrame;
    const file = f.url ? f.url.replace(/^file:\/\//, '').replace(/^.*node_modules\//, '').replace(/^.*\/(apps|packages)\//, '$1/') : '';
    return `${f.functionName || '(anonymous)'}  ${file}${f.url ? `:${f.lineNumber + 1}` : ''}`;
  };
  const fnSelf = new Map();
  const modSelf = new Map();
  const fnTotal = new Map();
  const appSelf = new Map();
  const srcSelf = new Map();
  const sourceFileOf = sourceFileResolver();
  const isApp = (n) => REPO_BUNDLE.test(n.callFrame.url);
  for (const [id, us] of selfUs) {
    // Self time charged to the nearest function of this repo on the stack (what the app asked for).
    let owner = '(no repo frame on the stack)';
    let ownerFile = owner;
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const node = byId.get(cur);
      if (isApp(node)) {
        owner = keyOf(node);
        ownerFile = sourceFileOf(node.callFrame.url, node.callFrame.lineNumber, node.callFrame.columnNumber);
        break;
      }
    }
    appSelf.set(owner, (appSelf.get(owner) ?? 0) + us);
    srcSelf.set(ownerFile, (srcSelf.get(ownerFile) ?? 0) + us);
    const n = byId.get(id);
    fnSelf.set(keyOf(n), (fnSelf.get(keyOf(n)) ?? 0) + us);
    const mod = moduleOf(n.callFrame.url);
    modSelf.set(mod, (modSelf.get(mod) ?? 0) + us);
    // Inclusive: credit every distinct function on the stack once.
    const seen = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const k = keyOf(byId.get(cur));
      if (seen.has(k)) continue;
      seen.add(k);
      fnTotal.set(k, (fnTotal.get(k) ?? 0) + us);
    }
  }
  const pct = (us) => `${((100 * us) / total).toFixed(1).padStart(5)} %`;
  const list = (m, n) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => `${pct(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`)
      .join('\n');
  return [
    `profile ${path}: ${(total / 1e6).toFixed(1)} s sampled`,
    '',
    `Self time by function (top ${top}):`,
    list(fnSelf, top),
    '',
    'Self time by module:',
    list(modSelf, 25),
    '',
    `Total (inclusive) time by function (top ${top}):`,
    list(fnTotal, top),
    '',
    `Time charged to the nearest repo function on the stack (top ${top}):`,
    list(appSelf, top),
    '',
    `The same by source file (top ${top}):`,
    list(srcSelf, top),
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${summarizeProfile(process.argv[2], { top: Number(process.argv[3] ?? 30) })}\n`);
}
