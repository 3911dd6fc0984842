import { Command, InvalidArgumentError } from 'commander';
import { parseProcesses } from '../cluster/processes.js';
import { CommandError } from './command-error.js';
import { makeGroundingCommand } from './grounding-command.js';
import { makeBackupCommand } from './backup.js';
import { SERVER_VERSION } from '../version.js';

// What each command does is in actions.ts, loaded when a command runs: `--help`, `--version` and a mistyped
// command or option then load commander, not the configuration's and the protocol's schemas, the grounding check,
// the database or the tokenizer, most of what a command cost.
const actions = () => import('./actions.js');
type Actions = Awaited<ReturnType<typeof actions>>;

export interface CommandIO {
  env: Record<string, string | undefined>;
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  /** Resolves when the process is asked to stop (SIGTERM, SIGINT, SIGHUP), with the signal's name. */
  stopSignal: () => Promise<string>;
  /** Standard input, read to its end (`--password-stdin`). */
  readStdin: () => Promise<string>;
}

export { CommandError };

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

/** `--processes`: checked here for a clear option error, then passed on as SVC_PROCESSES (the flag wins). */
function processesArg(value: string): string {
  try {
    parseProcesses(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return value;
}

/**
 * `svc-server` and its admin commands (design §2).
 *
 * @example
 * await makeProgram(io).parseAsync(['node', 'svc-server', 'keys', 'create', '--email', 'a@b.c']);
 */
export function makeProgram(io: CommandIO): Command {
  const program = new Command('svc-server')
    .description('svc: an OpenAI-compatible LLM gateway with grounding checks and signed audit webhooks')
    .version(SERVER_VERSION)
    .showHelpAfterError();

  program
    .command('start')
    .description('run the HTTP API and the webhook delivery worker (configured by SVC_* environment variables)')
    .option('--processes <n>', 'server processes sharing the port: a number, or auto for one per core (default: SVC_PROCESSES, else 1)', processesArg)
    .action(async (opts: { processes?: string }) => (await actions()).start(io, opts));

  program
    .command('migrate')
    .description('bring the database schema up to date and exit')
    .action(async () => (await actions()).migrate(io));

  const secrets = program.command('secrets').description('the key that encrypts signing secrets at rest');
  secrets
    .command('rotate')
    .description('re-encrypt every stored signing secret with SVC_SECRET_KEY (the old key in SVC_SECRET_KEY_PREVIOUS); safe to run again')
    .option('--json', 'print {"resealed","current","unreadable"} as JSON')
    .action(async (opts: { json?: boolean }) => (await actions()).rotateSecrets(io, opts));

  const users = program.command('users').description('manage dashboard users');
  users
    .command('create')
    .description('create a user who can sign in to the dashboard')
    .requiredOption('--email <email>', 'sign-in email')
    .option('--password <password>', 'sign-in password (at least 8 characters)')
    .option('--password-stdin', 'read the password from standard input (kept out of shell history and ps)')
    .option('--json', 'print JSON')
    .action(async (opts: { email: string; password?: string; passwordStdin?: boolean; json?: boolean }) => (await actions()).createUser(io, opts));
  users
    .command('list')
    .description('list dashboard users and their active API keys (never a password hash)')
    .option('--json', 'print [{"id","email","created_at","active_keys"}] as JSON')
    .action(async (opts: { json?: boolean }) => (await actions()).listUsers(io, opts));
  users
    .command('set-password')
    .description("set a user's dashboard password (a forgotten one) and end every dashboard session they have")
    .requiredOption('--email <email>', 'the user’s sign-in email')
    .option('--password <password>', 'the new password (at least 8 characters)')
    .option('--password-stdin', 'read the new password from standard input (kept out of shell history and ps)')
    .addHelpText(
      'after',
      `
Whoever was signed in with the old password is signed out at once, in every running server. Example:
  $ printf '%s\n' "$NEW_PASSWORD" | svc-server users set-password --email ana@example.com --password-stdin`,
    )
    .action(async (opts: { email: string; password?: string; passwordStdin?: boolean }) => (await actions()).setPassword(io, opts));

  const keys = program.command('keys').description('manage API keys');
  keys
    .command('create')
    .description('create an API key (printed once)')
    .option('--user-id <uuid>', 'owner by id')
    .option('--email <email>', 'owner by email (default: the only user, if there is exactly one)')
    .option('--name <name>', 'a name to recognise the key by', 'default')
    .option('--webhook-url <url>', 'audit webhook URL')
    .option('--signing-secret <secret>', 'webhook signing secret (stored encrypted)')
    .option('--signing-secret-stdin', 'read the signing secret from standard input (not in shell history or ps)')
    .option('--rate-limit-rpm <n>', 'requests per minute for this key', positiveInt)
    .option('--json', 'print {"id","key","user_id","name",…} as JSON')
    .action(async (opts: Parameters<Actions['createKey']>[1]) => (await actions()).createKey(io, opts));
  keys
    .command('list')
    .description('list API keys (never the keys themselves)')
    .option('--email <email>', 'only this user’s keys')
    .option('--json', 'print JSON')
    .action(async (opts: { email?: string; json?: boolean }) => (await actions()).listKeys(io, opts));
  keys
    .command('update')
    .description("change an API key's webhook URL, signing secret, name or rate limit (as the dashboard's Save does)")
    .argument('<key>', 'the key id (key_…), its prefix as `keys list` shows it, or the key itself (sk-svc-…)')
    .option('--webhook-url <url>', "audit webhook URL; '' removes it (pending deliveries are then cancelled)")
    .option('--signing-secret <secret>', 'webhook signing secret (stored encrypted); the one it replaces keeps signing beside it for SVC_WEBHOOK_SECRET_OVERLAP')
    .option('--signing-secret-stdin', 'read the signing secret from standard input (not in shell history or ps)')
    .option('--name <name>', 'a name to recognise the key by')
    .option('--rate-limit-rpm <n>', 'requests per minute for this key', positiveInt)
    .option('--json', 'print the key (never the key itself) as JSON')
    .addHelpText(
      'after',
      `
A running server uses the change within a second (its key cache); deliveries still waiting to be retried
go to the new URL. Example:
  $ svc-server keys update "$SVC_API_KEY" --webhook-url http://127.0.0.1:4000/ --signing-secret whsec_…`,
    )
    .action(async (ref: string, opts: Parameters<Actions['updateKey']>[2]) => (await actions()).updateKey(io, ref, opts));
  keys
    .command('revoke')
    .description('revoke an API key: it is refused from then on')
    // As update takes it: a leaked key is what an operator holds when revoking, not its id.
    .argument('<key>', 'the key (sk-svc-…), its id (key_…) or its prefix')
    .action(async (ref: string) => (await actions()).revokeKey(io, ref));

  program.addCommand(makeBackupCommand(io, async () => (await actions()).commandConfig(io)));
  program.addCommand(makeGroundingCommand(io));
  return program;
}
