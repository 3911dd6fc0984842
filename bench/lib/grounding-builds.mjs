// Two builds of @svc/grounding in one process (bench/grounding-ab.mjs, bench/grounding-large-ab.mjs): the one at
// the path given first on the command line ("base") and this checkout's ("new"); the other arguments as given.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/** `[['base', module], ['new', module]]` and the arguments after the base path; exits with `usage` without one. */
export async function groundingBuilds(usage) {
  const [basePath, ...rest] = process.argv.slice(2);
  if (!basePath) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  const builds = [
    ['base', await import(pathToFileURL(resolve(basePath)).href)],
    ['new', await import('@svc/grounding')],
  ];
  return { builds, args: rest };
}
