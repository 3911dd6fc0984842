// Two builds of the server measured alternately (bench/ab.mjs, bench/instructions.mjs): A is this checkout's
// build, B another build's apps/server/dist/bin.js (e.g. a copy of the build before a change).
import { median, round } from './procs.mjs';
import { SVC_BIN } from './svc.mjs';

/** The builds to measure: this checkout's, and `binB` when given. */
export function buildsOf(binB) {
  return [{ name: 'A', bin: SVC_BIN }, ...(binB ? [{ name: 'B', bin: binB }] : [])];
}

/**
 * Runs `measure(build, run)` for every build, `runs` times, in alternating order (A B, B A, …) so that a host
 * whose speed drifts moves both alike; `measure` resolves with the figure compared (lower is better). With two
 * builds, prints each build's median of it and their ratio, as `label`.
 */
export async function measureAlternately(builds, runs, measure, label) {
  const figures = new Map(builds.map((b) => [b.name, []]));
  for (let run = 0; run < runs; run++) {
    const order = run % 2 === 0 ? builds : [...builds].reverse();
    for (const build of order) figures.get(build.name).push(await measure(build, run));
  }
  if (builds.length < 2) return;
  const [a, b] = builds.map((build) => median(figures.get(build.name)));
  process.stdout.write(`median ${label}: A ${a.toLocaleString('en')} (${builds[0].bin})  B ${b.toLocaleString('en')} (${builds[1].bin})  A/B ${round(a / b, 4)}\n`);
}
