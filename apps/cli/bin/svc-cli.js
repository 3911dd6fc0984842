#!/usr/bin/env node
// The command as the repository installs it: `npm ci` links this file (it exists before any build), and it
// runs the build output, or says how to make it. `npx svc-cli` finds it here and never asks the registry.
import { existsSync } from 'node:fs';

const built = new URL('../dist/bin.js', import.meta.url);
if (!existsSync(built)) {
  process.stderr.write('svc-cli: not built yet. Run `npm run build` (or `npm start`) at the repository root, then try again.\n');
  process.exit(1);
}
await import(built.href);
