// Two checkouts' server sources measured in one process, alternated (bench/feature-path-ab.mjs,
// bench/frame-path-ab.mjs): the shared command line, loading, and the alternated rounds with their report.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { bundleSrc } from './bundle-src.mjs';

/**
 * The command line of a source A/B: `--base OTHER/apps/server/src` (required), `--src` (this checkout's),
 * `--rounds`, and `count` (e.g. `requests`) with its default.
 */
export function srcAbOptions(script, count, countDefault) {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      src: { type: 'string', default: new URL('../../apps/server/src', import.meta.url).pathname },
      rounds: { type: 'string', default: '20' },
      [count]: { type: 'string', default: countDefault },
    },
  });
  if (!values.base) throw new Error(`usage: node bench/${script}.mjs --base OTHER/apps/server/src [--rounds 20] [--${count} ${countDefault}]`);
  return { base: resolve(values.base), src: resolve(values.src), rounds: Number(values.rounds), count: Number(values[count]) };
}

/** `modules` (export name → path under src) of both checkouts, bundled as `script` does. */
export async function loadBoth(options, modules, script) {
  return {
    base: await import(await bundleSrc(options.base, modules, script, 'base')),
    new: await import(await bundleSrc(options.src, modules, script, 'new')),
  };
}

/**
 * `round(build)` (CPU per unit, sync or async) once each to warm up, then `rounds` times each, alternated so that
 * neither build always runs after the other's garbage; prints `title`, then each build's median as `digits`
 * decimals and in how many rounds the new one was lower.
 */
export async function alternate(builds, rounds, round, title, digits) {
  await round(builds.base);
  await round(builds.new);
  const base = [];
  const next = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) (next.push(await round(builds.new)), base.push(await round(builds.base)));
    else (base.push(await round(builds.base)), next.push(await round(builds.new)));
  }
  const median = (values) => [...values].sort((x, y) => x - y)[values.length >> 1];
  const lower = next.filter((value, i) => value < base[i]).length;
  console.log(title);
  console.log(`base ${median(base).toFixed(digits)}, new ${median(next).toFixed(digits)} (${(((median(next) - median(base)) / median(base)) * 100).toFixed(1)} %); new lower in ${lower} of ${rounds}`);
}
