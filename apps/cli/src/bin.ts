import { CliError } from './errors.js';
import { makeProgram } from './program.js';

try {
  await makeProgram().parseAsync(process.argv);
} catch (err) {
  // One line, never a stack trace: the message says what to fix.
  const message = err instanceof CliError ? err.message : `unexpected error: ${err instanceof Error ? err.message : String(err)}`;
  process.stderr.write(`svc-cli: ${message.split('\n')[0]}\n`);
  process.exitCode = err instanceof CliError ? err.exitCode : 1;
}
