#!/usr/bin/env node
// How much of a check of 100 KB of Chinese or Japanese (bench/lib/cjk-input.mjs) is ICU's word segmentation: CPU per
// check of one build of @svc/grounding as it is, and with Intl.Segmenter answering each text it has cut before from
// a memo (the same words, at the cost of a look-up), each in a process of its own, the processes taking turns. What
// is left with the memo is what the check costs were segmentation free: reading the words, the index, the passages.
//
//   taskset -c 1 node bench/grounding-cjk-floor.mjs [zh|ja|zh-ts|ja-ts] [rounds] [checks per round] [DIST_INDEX_JS]
//
// Build first (npx turbo run build --filter=@svc/grounding); without DIST_INDEX_JS this checkout's build is measured.
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cjkInput } from './lib/cjk-input.mjs';

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

if (process.argv[2] === '--child') {
  const [, , , mode, lang, checksArg, dist] = process.argv;
  if (mode === 'memo') {
    const Segmenter = Intl.Segmenter;
    const memo = new Map();
    Intl.Segmenter = class {
      constructor(locale, options) {
        this.locale = locale;
        this.icu = new Segmenter(locale, options);
      }
      segment(text) {
        const key = `${this.locale}\n${text}`;
        let segments = memo.get(key);
        if (!segments) memo.set(key, (segments = [...this.icu.segment(text)].map(({ segment, index }) => ({ segment, index }))));
        return segments;
      }
    };
  }
  const g = await import(dist ? pathToFileURL(resolve(dist)).href : '@svc/grounding');
  const large = cjkInput(lang);
  // The first checks fill the memo (and warm up): not measured.
  const cpu = [];
  for (let i = 0; i < 5 + Number(checksArg); i++) {
    const c0 = process.cpuUsage();
    g.checkGrounding(large);
    const c = process.cpuUsage(c0);
    if (i >= 5) cpu.push((c.user + c.system) / 1000);
  }
  console.log(median(cpu));
  process.exit(0);
}

const [lang = 'zh', roundsArg = '4', checksArg = '20', dist = ''] = process.argv.slice(2);
const per = { icu: [], memo: [] };
for (let round = 1; round <= Number(roundsArg); round++) {
  for (const mode of round % 2 ? ['icu', 'memo'] : ['memo', 'icu']) {
    const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, lang, checksArg, dist], { encoding: 'utf8' });
    per[mode].push(Number(out.trim()));
  }
  console.log(`round ${round}: with ICU ${per.icu.at(-1).toFixed(1)}, ICU's cuts remembered ${per.memo.at(-1).toFixed(1)} ms CPU per check (median of ${checksArg}, a process each)`);
}
const shares = per.memo.map((x, i) => x / per.icu[i]);
console.log(`${lang} median of round medians: with ICU ${median(per.icu).toFixed(1)} ms, without its cost ${median(per.memo).toFixed(1)} ms; median of round ratios ${median(shares).toFixed(3)}`);
