// Bundles modules of the server's TypeScript sources for a bench that drives them directly (the store, say), so
// a bench can compare two checkouts' sources without building either.
import { createRequire } from 'node:module';
import { join } from 'node:path';

const REPO = new URL('../..', import.meta.url).pathname;
const require = createRequire(join(REPO, 'package.json'));

/**
 * Writes one ESM file exporting `exports` ({ name: 'path relative to src' }) from `src` (an apps/server/src) and
 * returns its path. It imports packages by name, so it lives under the repository's node_modules to find them.
 *
 * @example
 * const file = await bundleSrc(src, { openStore: 'storage/store.ts' }, 'outbox-pace', 'base');
 * const { openStore } = await import(file);
 */
export async function bundleSrc(src, exports, bench, name) {
  const esbuild = require('esbuild');
  const out = join(REPO, 'node_modules/.cache', bench, `${name}-${process.pid}.mjs`);
  await esbuild.build({
    stdin: {
      contents: Object.entries(exports)
        .map(([binding, path]) => `export { ${binding} } from ${JSON.stringify(join(src, path))};`)
        .join('\n'),
      resolveDir: src,
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outfile: out,
    logLevel: 'error',
    nodePaths: [join(REPO, 'node_modules')],
  });
  return out;
}
