import { CommandError } from './command-error.js';

/** The one rule for a dashboard password, whichever command sets it. */
const MIN_PASSWORD_LENGTH = 8;

/**
 * The password of `users create` and `users set-password`: `--password P`, or `--password-stdin`, which keeps it
 * out of shell history and `ps`. Standard input is read to its end and one final line break dropped (what `echo`
 * or a here-string adds), as `docker login --password-stdin` reads it.
 *
 * @example
 * const password = await passwordOption(opts, io.readStdin); // opts: { password?: string; passwordStdin?: boolean }
 */
export async function passwordOption(opts: { password?: string; passwordStdin?: boolean }, readStdin: () => Promise<string>): Promise<string> {
  if (opts.password !== undefined && opts.passwordStdin) throw new CommandError('give the password once: --password P or --password-stdin, not both');
  if (opts.password === undefined && !opts.passwordStdin) {
    throw new CommandError('give the password: --password P, or --password-stdin to read it from standard input');
  }
  const password = opts.password ?? (await readStdin()).replace(/\r?\n$/, '');
  if (password.length < MIN_PASSWORD_LENGTH) throw new CommandError(`the password must have at least ${MIN_PASSWORD_LENGTH} characters`);
  return password;
}

/**
 * The signing secret of `keys create` and `keys update`: `--signing-secret S`, or `--signing-secret-stdin`, read as
 * `--password-stdin` is (a secret on the command line stays in shell history and shows in `ps`); undefined when
 * neither is given.
 *
 * @example
 * const secret = await signingSecretOption(opts, io.readStdin); // opts: { signingSecret?: string; signingSecretStdin?: boolean }
 */
export async function signingSecretOption(
  opts: { signingSecret?: string; signingSecretStdin?: boolean },
  readStdin: () => Promise<string>,
): Promise<string | undefined> {
  if (!opts.signingSecretStdin) return opts.signingSecret;
  if (opts.signingSecret !== undefined) throw new CommandError('give the signing secret once: --signing-secret S or --signing-secret-stdin, not both');
  return (await readStdin()).replace(/\r?\n$/, '');
}
