import { Command, Option } from 'commander';
import { DEFAULT_LOG_FILE, ensureWritable } from '../delivery-log.js';
import { apiClientFor, globalOptions } from '../global-options.js';
import { FORWARD_TIMEOUT_MS, startListener, type ListenerStats } from '../listener.js';
import { parseForwardTimeout, parseForwardUrl, parsePath, parsePort, parseSecrets, parseTolerance } from '../options.js';
import { kleur, processIo, type Io } from '../output.js';
import { ApiError, CliError } from '../errors.js';
import { webhookTestResult } from '../response-shapes.js';

interface ListenOptions {
  port: number;
  host: string;
  path: string;
  secret?: string[];
  tolerance: number;
  forwardTo?: string;
  forwardTimeout: number;
  log: string;
  wide?: boolean;
  trigger?: boolean;
}

/** `svc-cli listen`: a local receiver for audit webhooks, in the manner of `stripe listen`. */
export function makeListenCommand(io: Io = processIo): Command {
  return new Command('listen')
    .description('receive webhook deliveries locally: print, verify, log and forward them')
    .addOption(new Option('-p, --port <port>', 'port to listen on (0 picks a free one)').default(4000).argParser(parsePort).env('SVC_LISTEN_PORT'))
    .addOption(new Option('--host <host>', 'address to bind (0.0.0.0: every interface, for svc in a container or on another host)').default('127.0.0.1'))
    .addOption(new Option('--path <path>', 'path deliveries are POSTed to').default('/').argParser(parsePath))
    .addOption(
      new Option(
        '-s, --secret <secret>',
        "the key's signing secret: verify webhook-signature (or X-Svc-Signature), answer 401 when wrong, 400 when stale (a replay); repeat it to accept any of several (a rotation)",
      )
        .env('SVC_WEBHOOK_SECRET')
        .argParser(parseSecrets),
    )
    .addOption(new Option('--tolerance <seconds>', 'with --secret: refuse a webhook-timestamp further than this from now (a replay)').default(300).argParser(parseTolerance))
    .addOption(new Option('-f, --forward-to <url>', 'forward every delivery (exact bytes; Content-Type, X-Svc-* and webhook-* headers) to this URL').argParser(parseForwardUrl))
    .addOption(
      new Option('--forward-timeout <time>', "how long a forward waits for the target's answer, e.g. 10s or 500ms (as svc waits SVC_WEBHOOK_TIMEOUT_MS)")
        .default(FORWARD_TIMEOUT_MS, '10s')
        .argParser(parseForwardTimeout),
    )
    .option('-w, --wide', 'full ids and every detail on a terminal too (lines there are cut to its width; to a pipe or a file they are always whole)')
    .option('-t, --trigger', "once ready, send a test delivery through svc with the API key (SVC_API_KEY): it shows the loop works, or where the key's deliveries go instead")
    .addOption(new Option('--log <file>', 'append every delivery (headers and raw body) to this JSON-lines file').default(DEFAULT_LOG_FILE))
    .addHelpText(
      'after',
      `
Set the API key's webhook URL to the URL printed after "Ready!" (dashboard: Settings → API Keys), then
trigger a delivery with "svc-cli webhooks test" or any chat completion.

With --json only the raw bodies go to stdout, one per line, byte-for-byte as received; everything else
goes to stderr.

Examples:
  $ svc-cli listen
  $ svc-cli listen --port 4000 --secret whsec_... --forward-to localhost:3000/webhooks/svc
  $ SVC_API_KEY=sk-... svc-cli listen --port 4000 --trigger
  $ svc-cli listen --secret "$NEW_SECRET" --secret "$OLD_SECRET"     (either verifies: a rotation)
  $ svc-cli listen --json | jq .request_id
  $ svc-cli listen --port 0 --log /tmp/deliveries.jsonl`,
    )
    .action(async (opts: ListenOptions, command: Command) => {
      const { json } = globalOptions(command);
      await ensureWritable(opts.log);
      const listener = await startListener({
        host: opts.host,
        port: opts.port,
        path: opts.path,
        secret: opts.secret,
        toleranceSeconds: opts.tolerance,
        forwardTo: opts.forwardTo,
        forwardTimeoutMs: opts.forwardTimeout,
        json,
        wide: opts.wide === true,
        logFile: opts.log,
        io,
      });
      if (opts.forwardTo !== undefined && sameListener(opts.forwardTo, listener.urls, { anyPath: true })) {
        // Each delivery would be forwarded to the listener itself, again and again (or refused 404 on another path).
        await listener.close();
        throw new CliError(`--forward-to ${opts.forwardTo} is this listener (port ${new URL(listener.url).port}): forward to your app's port, and listen on another (--port)`);
      }
      // Each only acts with the option it qualifies: given alone it would be dropped without a word.
      const qualifiers = [
        ['tolerance', '--tolerance', '--secret', opts.secret],
        ['forwardTimeout', '--forward-timeout', '--forward-to', opts.forwardTo],
      ] as const;
      for (const [name, flag, needs, value] of qualifiers) {
        if (value === undefined && command.getOptionValueSource(name) === 'cli') io.err(`${kleur.yellow('!')} ${flag} has no effect without ${needs}\n`);
      }
      if (opts.secret !== undefined) {
        const endings = opts.secret.map((s) => s.slice(-4)).join(', ');
        io.err(`Verifying signatures with the ${opts.secret.length === 1 ? 'secret ending' : `${opts.secret.length} secrets ending`} in ${endings}\n`);
      }
      if (opts.forwardTo) io.err(`Forwarding deliveries to ${opts.forwardTo}\n`);
      io.err(`Logging deliveries to ${opts.log}\n`);
      if (new URL(listener.url).host !== listener.bound) {
        // A wildcard bind is no URL: say what is bound, and every URL that reaches it (loopback last).
        io.err(`Bound to ${listener.bound} (every network interface): deliveries reach it at ${listener.urls.join(', ')}\n`);
      }
      io.err(`${kleur.bold('Ready!')} Listening on ${kleur.underline(listener.url)} (^C to quit)\n`);
      // Listening for ^C from here on: one pressed while --trigger waits for a slow server stops cleanly too.
      // A forward to a target that does not answer holds the exit for up to its timeout: say what it waits for.
      const stop = waitForSignal(() => {
        const waiting = listener.forwarding();
        const what = waiting === 0 ? '' : ` waiting for ${waiting} ${waiting === 1 ? 'delivery' : 'deliveries'} being forwarded to ${opts.forwardTo} (at most ${opts.forwardTimeout / 1000} s)`;
        io.err(`Stopping…${what} (^C again to quit now)\n`);
      });
      if (opts.trigger) {
        const stopped = new AbortController();
        await Promise.race([trigger(command, listener.urls, io, stopped.signal), stop.then(() => stopped.abort())]);
      }

      await stop;
      await listener.close();
      io.err(summary(listener.stats, opts.secret !== undefined, opts.forwardTo !== undefined));
    });
}

/** Resolves on the first SIGINT or SIGTERM; a second one quits at once. */
function waitForSignal(onFirst: () => void): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const handler = (): void => {
      if (stopping) process.exit(130);
      stopping = true;
      onFirst();
      resolve();
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  });
}

function summary(stats: ListenerStats, verifying: boolean, forwarding: boolean): string {
  const parts = [`${stats.received} ${stats.received === 1 ? 'delivery' : 'deliveries'} received`];
  if (verifying) parts.push(`${stats.verified} verified`, `${stats.rejected} failed verification`);
  if (forwarding) {
    // A target answering 500 got the delivery: counted apart from the ones that never reached it.
    parts.push(`${stats.forwarded} forwarded`);
    if (stats.refused > 0) parts.push(`${stats.refused} answered non-2xx by the target`);
    parts.push(`${stats.forwardFailed} failed to forward`);
  }
  return `Done: ${parts.join(', ')}.\n`;
}

/**
 * `--trigger`: one test delivery through the server, sent to the key's webhook URL. When that URL is this
 * listener the delivery shows up here; when it is not, say where the key's deliveries go (the usual reason
 * nothing arrives). A failure is reported and the listener keeps listening; `signal` (^C) abandons the request.
 */
async function trigger(command: Command, urls: string[], io: Io, signal: AbortSignal): Promise<void> {
  const url = urls[0]!;
  try {
    const { data } = await apiClientFor(command).json('POST', '/v1/webhooks/test', webhookTestResult, {}, { signal });
    if (!sameListener(data.delivered_to, urls)) {
      io.err(`${kleur.yellow('!')} The key's webhook URL is ${data.delivered_to}, not this listener: set it to ${url} (${WHERE_TO_SET}) to receive its deliveries here\n`);
    } else if (data.success) {
      io.err(`${kleur.green('✔')} A test delivery through svc arrived\n`);
    } else {
      io.err(`${kleur.red('✘')} The test delivery through svc was refused here: ${data.status_code ?? data.error ?? 'no answer'}\n`);
    }
  } catch (err) {
    // ^C while waiting for the server: stopping says enough.
    if (signal.aborted) return;
    if (err instanceof ApiError && err.status === 400 && err.message.startsWith('No webhook URL is configured')) {
      io.err(`${kleur.yellow('!')} The key has no webhook URL: set it to ${url} (${WHERE_TO_SET}) to receive its deliveries here\n`);
      return;
    }
    io.err(`svc-cli: --trigger: ${err instanceof Error ? err.message : String(err)}\n`);
  }
}

const WHERE_TO_SET = 'dashboard: Settings → API Keys; or on the server: svc-server keys update KEY --webhook-url URL';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/**
 * Whether a webhook URL reaches this listener at one of its URLs: same port and path (any path with `anyPath`), the
 * same host or both loopback.
 */
function sameListener(webhookUrl: string, listenerUrls: string[], options: { anyPath?: boolean } = {}): boolean {
  let a: URL;
  try {
    a = new URL(webhookUrl);
  } catch {
    return false;
  }
  return listenerUrls.some((listenerUrl) => {
    const b = new URL(listenerUrl);
    const sameHost = a.hostname === b.hostname || (LOOPBACK.has(a.hostname) && LOOPBACK.has(b.hostname));
    return sameHost && a.port === b.port && (options.anyPath === true || a.pathname === b.pathname);
  });
}
