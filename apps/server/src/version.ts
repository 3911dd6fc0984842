import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The server's version, from the nearest @svc/server package.json (src/ and bundled dist/ alike). */
function readServerVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
        if (pkg.name === '@svc/server' && pkg.version) return pkg.version;
      } catch {
        // Not ours or unreadable: keep looking upwards.
      }
    }
    dir = dirname(dir);
  }
  return '0.0.0';
}

/** `@svc/server`'s version: the webhook User-Agent, `svc-server --version`, the start line. */
export const SERVER_VERSION = readServerVersion();
