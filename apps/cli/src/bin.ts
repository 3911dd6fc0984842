import { CommanderError } from 'commander';
import { CliError } from './errors.js';
import { makeProgram } from './program.js';

// A reader that stops early (`svc-cli deliveries show ID | head -3`) closes the pipe: that ends the output, it
// is not an error worth a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

try {
  await makeProgram(undefined, { exitOverride: true }).parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Commander has said what is wrong (an unknown option or command, a bad or missing value) on stderr: a usage
    // error, exit 2 as the CLI's own usage errors; --help and --version exit 0.
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else {
    // One line, never a stack trace: the message says what to fix.
    const message = err instanceof CliError ? err.message : `unexpected error: ${err instanceof Error ? err.message : String(err)}`;
    process.stderr.write(`svc-cli: ${message.split('\n')[0]}\n`);
    process.exitCode = err instanceof CliError ? err.exitCode : 1;
  }
}
