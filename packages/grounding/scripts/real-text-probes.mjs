#!/usr/bin/env node
// The grounding check's properties (copy is grounded, monotone, claims are flagged) on text nobody here wrote or
// tuned on: the documentation already on this disk (README, CHANGELOG, LICENSE and other markdown under
// node_modules, the Debian docs under /usr/share/doc, /usr/share/common-licenses). A fixed seed samples documents;
// a document's paragraphs are the sources and probes are built from them:
//   copy     1–3 sentences of one paragraph copied verbatim (plain, after "Sure! " or "Yeah. ", as a bulleted
//            list, under a markdown heading): must be grounded
//   append   the plain copy and a sentence of ANOTHER document whose content words the sources lack: the score
//            must not rise and a flagged span must fall in the appended sentence
//   subst    one number or capitalised name of a copied sentence changed to one no source has: the score must drop
//   remove   the paragraph copied from taken out of the sources: the score must not rise
// Prints the failure rate per probe and per kind of document; --json writes every failure for a closer look.
//
//   node packages/grounding/scripts/real-text-probes.mjs [--docs N] [--seed S] [--dist path/to/index.js]
//        [--json failures.json] [--kind readme|changelog|licence|markdown|debian]
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const DOCS = Number(opt('docs', '300'));
const SEED = Number(opt('seed', '34'));
const DIST = resolve(opt('dist', join(here, '..', 'dist', 'index.js')));
const JSON_OUT = opt('json', undefined);
const ONLY_KIND = opt('kind', undefined);
const g = await import(pathToFileURL(DIST).href);

// The same sample on every run with the same seed and the same files on disk. The generator is this package's, also
// when --dist names another build (an older one, for a before/after comparison).
const { seededRandom } = await import(pathToFileURL(join(here, '..', 'dist', 'index.js')).href);
const rand = seededRandom(SEED);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
function shuffle(xs) {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

// ---- corpus -------------------------------------------------------------------------------------------------------

function walk(dir, out, depth = 0) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = join(dir, e.name);
    if (e.isDirectory() && depth < 12) walk(p, out, depth + 1);
    else if (e.isFile()) out.push(p);
  }
}

function kindOf(path) {
  const name = basename(path).toLowerCase();
  if (/^(change(log|s)|history|news)|changelog/.test(name)) return 'changelog';
  if (/^(licen[cs]e|copying|copyright|notice)/.test(name) || path.startsWith('/usr/share/common-licenses')) return 'licence';
  if (path.startsWith('/usr/share/doc')) return /\.md$/.test(name) ? 'markdown' : 'debian';
  if (/^readme/.test(name)) return 'readme';
  if (/\.(md|markdown)$/.test(name)) return 'markdown';
  return undefined;
}

function readText(path) {
  try {
    if (statSync(path).size > 400_000) return undefined;
    const buf = readFileSync(path);
    const text = (path.endsWith('.gz') ? gunzipSync(buf) : buf).toString('utf8');
    if (text.includes('\u0000') || text.includes('\ufffd')) return undefined;
    return text;
  } catch {
    return undefined;
  }
}

const files = [];
walk(join(root, 'node_modules'), files);
walk('/usr/share/doc', files);
walk('/usr/share/common-licenses', files);
const candidates = files.filter((p) => {
  const name = basename(p).toLowerCase();
  if (p.includes('/node_modules/') && !/\.(md|markdown)$|^(licen[cs]e|copying|notice)(\.txt)?$/.test(name)) return false;
  if (p.startsWith('/usr/share/doc') && /\.(html?|png|svg|gif|jpg|css|js|py|pl|sh|c|h|el|json|xml|pdf)(\.gz)?$|^makefile/.test(name)) return false;
  const kind = kindOf(p);
  return kind !== undefined && (!ONLY_KIND || kind === ONLY_KIND);
});

// ---- sentences ----------------------------------------------------------------------------------------------------

/** Paragraphs: runs of lines between blank lines, with their offsets; a fenced code block is kept whole. */
function paragraphs(text) {
  const out = [];
  const re = /\S[\s\S]*?(?=\n[ \t]*\n|$)/g;
  for (const m of text.matchAll(re)) {
    const p = m[0].trimEnd();
    if (/[\p{L}]{3}/u.test(p)) out.push(p);
  }
  return out;
}

/**
 * Runs of neighbouring sentences the probe copies: a plain reading of prose (". " before a capital), and each item of a list ("- ", "* ",
 * "1. ") as one, kept when they look like something an answer says: 4–60 words, half of it letters, no table row,
 * fence or HTML. Markdown inside (code spans, links, emphasis) stays: answers copy it as it is.
 */
function proseSentences(par) {
  if (/^\s*(```|~~~|\||<|    \S)/m.test(par)) return [];
  const items = /^\s*(?:[-*+]|\d{1,2}[.)])\s/m.test(par)
    ? par.split(/\n(?=\s*(?:[-*+]|\d{1,2}[.)])\s)/).map((it) => it.replace(/^\s*(?:[-*+]|\d{1,2}[.)])\s+/, ''))
    : [par];
  const parts = items.flatMap((it) => it.replace(/\s*\n\s*/g, ' ').split(/(?<=[.!?])\s+(?=["'(\[]?[A-Z])/));
  // Runs of sentences that follow each other in the text: a copy of two is two neighbours, not two far apart.
  const runs = [[]];
  for (const s of parts) {
    if (copyable(s)) runs[runs.length - 1].push(s);
    else if (runs[runs.length - 1].length > 0) runs.push([]);
  }
  return runs.filter((r) => r.length > 0);
}

function copyable(s) {
  const words = s.split(/\s+/).filter((w) => /\p{L}/u.test(w));
  if (words.length < 4 || words.length > 60 || /^#/.test(s)) return false;
  const letters = (s.match(/\p{L}/gu) ?? []).length;
  // Mostly plain words: not a line of code, a shell command or a row of badges that no fence or indent marks.
  const plainWords = words.filter((w) => /^["'(\[*_`]*[\p{L}][\p{L}\p{N}'’.-]*["')\]*_`]*[,.;:!?)]*$/u.test(w)).length;
  return letters / s.length > 0.5 && plainWords / words.length >= 0.7 && !/[{}=$]|\/\/|\]\[/.test(s);
}

/** Where `sentence` (flattened) is in the paragraph: the verbatim slice, line breaks as written. */
function verbatim(par, sentence) {
  const words = sentence.split(' ').map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const m = par.match(new RegExp(words.join('\\s+')));
  return m ? m[0] : undefined;
}

const contentWords = (s) => (s.toLowerCase().match(/\p{L}{5,}/gu) ?? []).filter((w) => !COMMON.has(w));
const COMMON = new Set(
  'about above after again against because before being below between could during every first other should their there these those through under until where which while would'.split(
    ' ',
  ),
);

// ---- documents ----------------------------------------------------------------------------------------------------

const seen = new Set();
const docs = [];
for (const p of shuffle(candidates)) {
  if (docs.length >= DOCS * 3) break;
  const text = readText(p);
  if (!text) continue;
  const hash = createHash('sha1').update(text).digest('hex');
  if (seen.has(hash)) continue;
  seen.add(hash);
  let pars = paragraphs(text);
  // Sources as an app would pass a retrieved document: its first paragraphs, bounded.
  let total = 0;
  pars = pars.filter((par) => (total += par.length) < 12_000);
  const copyable = pars.map((par, i) => ({ i, sentences: proseSentences(par) })).filter((c) => c.sentences.length > 0);
  if (pars.length < 2 || copyable.length === 0) continue;
  docs.push({ path: p, kind: kindOf(p), pars, copyable });
}
// As many of each kind as the sample holds, up to DOCS in all, so no one kind (there are hundreds of licences) fills it.
const byKind = new Map();
for (const d of docs) byKind.set(d.kind, [...(byKind.get(d.kind) ?? []), d]);
const sample = [];
for (let round = 0; sample.length < DOCS && round < DOCS; round++) {
  for (const ds of byKind.values()) if (ds[round] && sample.length < DOCS) sample.push(ds[round]);
}

// ---- probes -------------------------------------------------------------------------------------------------------

const stats = new Map(); // `${probe}\t${kind}` → { n, fail }
const failures = [];
function record(probe, kind, ok, detail) {
  for (const key of [`${probe}\t${kind}`, `${probe}\tall`]) {
    const s = stats.get(key) ?? { n: 0, fail: 0 };
    s.n++;
    if (!ok) s.fail++;
    stats.set(key, s);
  }
  if (!ok) failures.push({ probe, kind, ...detail });
}

const started = Date.now();
for (const [di, doc] of sample.entries()) {
  const cache = new g.SourceIndexCache();
  const check = (sources, answer) => g.checkGrounding({ sources, answer }, { sourceIndexCache: cache });
  const { i: pi, sentences: runs } = pick(doc.copyable);
  const sentences = pick(runs);
  const start = Math.floor(rand() * sentences.length);
  const count = 1 + Math.floor(rand() * Math.min(3, sentences.length - start));
  const copied = sentences.slice(start, start + count).map((s) => verbatim(doc.pars[pi], s) ?? s);
  const sources = doc.pars;
  // List items without an end mark go one a line, as they stood: run together on one line they would be one claim.
  const plain = copied.reduce((text, s, i) => (i === 0 ? s : `${text}${/[.!?:]["')]?$/.test(copied[i - 1]) ? ' ' : '\n'}${s}`), '');
  const base = check(sources, plain);
  const where = { path: doc.path, source: doc.pars[pi] };
  const brief = (r) => ({ score: r.score, claims: r.claims.map((c) => [c.text, Number(c.score.toFixed(3))]), spans: r.flaggedSpans.map((s) => s.text) });

  const heading = doc.pars.find((p) => /^#{1,3} \S/.test(p))?.split('\n')[0] ?? '## Summary';
  const layouts = {
    plain,
    sure: `Sure! ${plain}`,
    yeah: `Yeah. ${plain}`,
    bullets: copied.map((s) => `- ${s}`).join('\n'),
    heading: `${heading}\n\n${plain}`,
  };
  for (const [layout, answer] of Object.entries(layouts)) {
    const r = layout === 'plain' ? base : check(sources, answer);
    record(`copy:${layout}`, doc.kind, r.grounded, { answer, ...where, ...brief(r) });
  }

  // append: a sentence of another document whose content words the sources mostly lack.
  const lowerSources = sources.join('\n').toLowerCase();
  for (let tries = 0; tries < 20; tries++) {
    const other = pick(sample);
    if (other === doc) continue;
    const extra = pick(pick(pick(other.copyable).sentences));
    // A statement (not a lead-in over a list, a question or a fragment) of six words or more.
    if (!/^\p{Lu}[^\n]*[^.]\.$/u.test(extra) || extra.split(' ').length < 6) continue;
    const fresh = contentWords(extra).filter((w) => !lowerSources.includes(w.slice(0, 5)));
    if (fresh.length < 3) continue;
    // After a copy that ends without a full stop (a list item, a lead-in), a paragraph break: the probe asks whether a
    // sentence of its own is flagged, not whether two run together.
    const joint = /[.!?]["')]?$/.test(plain) ? ' ' : '\n\n';
    const answer = `${plain}${joint}${extra}`;
    const r = check(sources, answer);
    const from = plain.length + joint.length;
    const flagged = r.flaggedSpans.some((s) => s.end > from);
    record('append:no-rise', doc.kind, r.score <= base.score, { answer, base: base.score, ...where, ...brief(r) });
    record('append:flagged', doc.kind, flagged, { answer, base: base.score, ...where, ...brief(r) });
    break;
  }

  // subst: one number (every digit shifted) or one capitalised name mid-sentence, changed to one no source has.
  const targets = [];
  for (const m of plain.matchAll(/\d+(?:[.,]\d+)*/g)) targets.push({ at: m.index, text: m[0], number: true });
  for (const m of plain.matchAll(/(?<=[\p{L},;] )\p{Lu}\p{Ll}{3,}/gu)) targets.push({ at: m.index, text: m[0], number: false });
  if (targets.length > 0 && base.claims.length > 0) {
    const t = pick(targets);
    let repl;
    if (t.number) {
      for (let shift = 1; shift < 10 && !repl; shift++) {
        const r = t.text.replace(/\d/g, (d, at) => String(at === 0 ? ((Number(d) + shift - 1) % 9) + 1 : (Number(d) + shift) % 10));
        if (!lowerSources.includes(r) && !lowerSources.includes(r.replace(/[.,]/g, ''))) repl = r;
      }
    } else {
      for (const name of ['Vellichor', 'Quintavalle', 'Ostrander', 'Marigny', 'Thornquist']) {
        if (!lowerSources.includes(name.toLowerCase())) {
          repl = name;
          break;
        }
      }
    }
    if (repl) {
      const answer = plain.slice(0, t.at) + repl + plain.slice(t.at + t.text.length);
      const r = check(sources, answer);
      record(`subst:${t.number ? 'number' : 'name'}`, doc.kind, r.score < base.score, { answer, base: base.score, changed: `${t.text} → ${repl}`, ...where, ...brief(r) });
    }
  }

  // remove: the paragraph copied from.
  const fewer = sources.filter((_, i) => i !== pi);
  const r = g.checkGrounding({ sources: fewer, answer: plain });
  record('remove:no-rise', doc.kind, r.score <= base.score, { answer: plain, base: base.score, ...where, ...brief(r) });
  if ((di + 1) % 50 === 0) process.stderr.write(`${di + 1} documents, ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
}

// ---- report -------------------------------------------------------------------------------------------------------

const kinds = ['all', ...[...byKind.keys()].sort()];
const probes = [...new Set([...stats.keys()].map((k) => k.split('\t')[0]))];
const inSample = new Map(kinds.map((k) => [k, k === 'all' ? sample.length : sample.filter((d) => d.kind === k).length]));
console.log(`${sample.length} documents (seed ${SEED}) of ${candidates.length} files; ${kinds.slice(1).map((k) => `${k} ${inSample.get(k)}`).join(', ')}`);
console.log(['probe'.padEnd(16), ...kinds.map((k) => k.padStart(12))].join(''));
for (const p of probes) {
  const cells = kinds.map((k) => {
    const s = stats.get(`${p}\t${k}`);
    return (s ? `${s.fail}/${s.n} ${((100 * s.fail) / s.n).toFixed(0)}%` : '-').padStart(12);
  });
  console.log([p.padEnd(16), ...cells].join(''));
}
if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify(failures, null, 1));
