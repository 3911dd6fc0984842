// Module hooks (node's `register`) for start-up.test.ts: every module the CLI loads, by resolved URL, one a line
// appended to the file named by RECORD_IMPORTS.
import { appendFileSync } from 'node:fs';

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  appendFileSync(process.env.RECORD_IMPORTS, `${resolved.url}\n`);
  return resolved;
}
