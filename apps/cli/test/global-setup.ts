import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The tests run the built binary; build it from the current source first so they never test a stale one. */
export default function setup(): void {
  const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
  const tsup = join(dirname(createRequire(import.meta.url).resolve('tsup/package.json')), 'dist/cli-default.js');
  execFileSync(process.execPath, [tsup, '--silent'], { cwd: appDir, stdio: 'pipe' });
}
