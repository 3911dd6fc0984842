import { CommanderError } from 'commander';
import { CliError, errorJson } from './errors.js';
import { processIo, type Io } from './output.js';
import { makeProgram } from './program.js';

// A reader that stops early (`svc-cli deliveries show ID | head -3`) closes the pipe: that ends the output, it
// is not an error worth a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

// Whether the command printed its result on stdout: with --json a failure before that prints an error object there,
// so that a script reading stdout gets JSON in either case.
let printed = false;
const io: Io = {
  ...processIo,
  out(text) {
    printed = true;
    processIo.out(text);
  },
};
const program = makeProgram(io, { exitOverride: true });
try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (!(err instanceof CommanderError) && program.opts<{ json?: boolean }>().json === true && !printed) io.out(`${errorJson(err)}\n`);
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
