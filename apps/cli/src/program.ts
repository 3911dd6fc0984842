import { Command, Option } from 'commander';
import { makeChatCommand } from './commands/chat.js';
import { makeDeliveriesCommand } from './commands/deliveries.js';
import { makeListenCommand } from './commands/listen.js';
import { makeReplayCommand } from './commands/replay.js';
import { makeWebhooksCommand } from './commands/webhooks.js';
import { DEFAULT_BASE_URL } from './global-options.js';
import { parseHttpUrl } from './options.js';
import { configureColors, processIo, type Io } from './output.js';
import { VERSION } from './version.js';

/** Stripe CLI commands a user coming from `stripe listen` types first, and what does their work here. */
const STRIPE_CLI_NAMES = new Map([
  ['trigger', "stripe trigger's counterpart: svc-cli webhooks test [--sample ok|failed|ungrounded|streamed], or svc-cli listen --trigger"],
  ['events', "stripe events resend's counterpart: svc-cli deliveries redeliver ID"],
]);

/**
 * The whole `svc-cli` command tree. Global options are declared here and read by subcommands
 * through `optsWithGlobals()`.
 *
 * @example
 * await makeProgram().parseAsync(['node', 'svc-cli', 'webhooks', 'test']);
 */
export function makeProgram(io: Io = processIo, options: { exitOverride?: boolean } = {}): Command {
  const program = new Command('svc-cli')
    .description('svc from the terminal: test and receive audit webhooks, replay them, inspect deliveries, chat')
    .version(VERSION, '-v, --version')
    .addOption(new Option('--base-url <url>', 'svc server').default(DEFAULT_BASE_URL).env('SVC_BASE_URL').argParser(parseHttpUrl))
    .addOption(new Option('--api-key <key>', 'API key (sent as a bearer token)').env('SVC_API_KEY'))
    .option('--json', 'machine-readable output on stdout')
    .option('--no-color', 'no colours (NO_COLOR is honoured too; FORCE_COLOR forces them)')
    .configureOutput({
      writeOut: (text) => io.out(text),
      writeErr: (text) => io.err(text),
      // Commander's own errors (bad option values, unknown commands) read like ours: one line.
      outputError: (text, write) =>
        write(
          `svc-cli: ${text
            .replace(/^error: /, '')
            .replace(/\n\(Did you mean (.*)\?\)/, ' (did you mean $1?)')
            .replace(/^unknown command '([^']*)'$/m, (line, name: string) => (STRIPE_CLI_NAMES.has(name) ? `${line} (${STRIPE_CLI_NAMES.get(name)})` : line))}`,
        ),
    })
    .showSuggestionAfterError()
    .configureHelp({ showGlobalOptions: true })
    .hook('preAction', (thisCommand) => configureColors(thisCommand.opts<{ color: boolean }>().color))
    .addHelpText(
      'after',
      `
Environment:
  SVC_BASE_URL   server URL (default ${DEFAULT_BASE_URL})
  SVC_API_KEY    API key
  NO_COLOR       disable colours
  FORCE_COLOR    colours also where stdout or stderr is not a terminal (0: as detected)

Examples:
  $ export SVC_API_KEY=sk-svc-...
  $ svc-cli listen --secret whsec_... --forward-to localhost:3000/webhooks/svc
  $ svc-cli webhooks test
  $ svc-cli replay --last 1
  $ svc-cli deliveries list --status failed
  $ svc-cli chat "What is the capital of France?"`,
    );

  for (const command of [makeWebhooksCommand(io), makeListenCommand(io), makeReplayCommand(io), makeDeliveriesCommand(io), makeChatCommand(io)]) {
    program.addCommand(command);
  }
  // Tests get a thrown CommanderError instead of process.exit().
  if (options.exitOverride) program.exitOverride();
  inheritSettings(program);
  return program;
}

/** `addCommand` does not copy output and exit settings; copy them down the whole tree. */
function inheritSettings(parent: Command): void {
  for (const child of parent.commands) {
    child.copyInheritedSettings(parent);
    inheritSettings(child);
  }
}
