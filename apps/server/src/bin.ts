#!/usr/bin/env node
// First: evaluated before the rest of the command loads (see there).
import './cluster/early.js';
import { closeSync } from 'node:fs';
import { constants } from 'node:os';
import { isatty } from 'node:tty';
import { setFlagsFromString } from 'node:v8';
import { CommanderError } from 'commander';
import { CommandError, makeProgram } from './admin/commands.js';
import { stopSignalReader } from './stop-signals.js';

// Under load V8 lets the old space grow to several times the live set between full collections, and that
// growth is most of the peak RSS; capping the growth step at 20 % keeps it small for a few % of CPU. A value
// given in NODE_OPTIONS or on the command line wins. (glibc's malloc thresholds cannot be set from here: they
// are read when the process starts, so bin/svc-server sets them.)
if (![process.env.NODE_OPTIONS ?? '', ...process.execArgv].some((arg) => arg.includes('heap-growing-percent'))) {
  setFlagsFromString('--heap-growing-percent=20');
}

// Node restores the terminal's modes as it exits, and crashes on a failed assertion (SIGABRT or SIGSEGV; Node 20,
// nodejs/node#51519) when the terminal is gone, as it is after a closed terminal window's hangup: a stop that had
// drained everything would end in a crash. Node skips a closed descriptor, so one that was a terminal at start
// and no longer is gets closed just before the exit (nothing can be written to it any more anyway).
const terminalsAtStart = [0, 1, 2].filter((fd) => isatty(fd));
function exit(code: number): never {
  for (const fd of terminalsAtStart) if (!isatty(fd)) closeSync(fd);
  process.exit(code);
}

// Whether the command printed its result on stdout, and whether it was asked for JSON there: a --json command that
// fails before printing prints an error object there instead (as svc-cli does), so a script reading stdout gets JSON
// in either case.
let printed = false;
let json = false;

const program = makeProgram({
  // The one place the environment is read; config.ts validates it.
  env: process.env,
  stdout: (line) => {
    printed = true;
    process.stdout.write(`${line}\n`);
  },
  stderr: (line) => process.stderr.write(`${line}\n`),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
  stopSignal: () =>
    new Promise((resolve) => {
      const read = stopSignalReader();
      // A "stop now" is said, and the exit code is the signal's as if it had killed the process.
      const onSignal = (signal: NodeJS.Signals) => {
        const answer = read(signal);
        if (answer === 'stop') return resolve(signal);
        if (answer === 'ignore') return;
        process.stderr.write(`${signal} received again: stopping now; requests still in flight are cut off (webhook deliveries already recorded stay in the outbox: another instance or the next start sends them)\n`);
        exit(128 + (constants.signals[signal] ?? 0));
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
      // The terminal that ran `svc-server start` closed (or an ssh session dropped): node's default for SIGHUP
      // is to die at once, cutting requests and deliveries in flight. It is a stop like the others.
      process.on('SIGHUP', onSignal);
    }),
});
program.exitOverride();
program.hook('preAction', (_program, command) => {
  json = command.opts<{ json?: boolean }>().json === true;
});

try {
  await program.parseAsync(process.argv);
  exit(0);
} catch (err) {
  if (err instanceof CommanderError) exit(err.exitCode);
  const message = err instanceof CommandError ? err.message : `error: ${(err as Error).message ?? String(err)}`;
  if (json && !printed) process.stdout.write(`${JSON.stringify({ error: { message, type: 'cli_error', code: null, param: null } })}\n`);
  process.stderr.write(`${message}\n`);
  exit(1);
}
