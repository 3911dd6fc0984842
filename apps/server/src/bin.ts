#!/usr/bin/env node
import { CommanderError } from 'commander';
import { CommandError, makeProgram } from './admin/commands.js';

const program = makeProgram({
  // The one place the environment is read; config.ts validates it.
  env: process.env,
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (line) => process.stderr.write(`${line}\n`),
  stopSignal: () =>
    new Promise((resolve) => {
      process.once('SIGTERM', () => resolve('SIGTERM'));
      process.once('SIGINT', () => resolve('SIGINT'));
    }),
});
program.exitOverride();

try {
  await program.parseAsync(process.argv);
  process.exit(0);
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  const message = err instanceof CommandError ? err.message : `error: ${(err as Error).message ?? String(err)}`;
  process.stderr.write(`${message}\n`);
  process.exit(1);
}
