import { Command, Option } from 'commander';
import { sign, signWebhook } from '@svc/verify';
import { DEFAULT_LOG_FILE, readDeliveryLog, type LoggedDelivery } from '../delivery-log.js';
import { formatSentLine } from '../delivery-line.js';
import { idMatches } from '../short-id.js';
import { CliError } from '../errors.js';
import { globalOptions } from '../global-options.js';
import { parseForwardTimeout, parseForwardUrl, parsePositiveInt, parseOneSecret, parseTimeAgo } from '../options.js';
import { lineWidth, processIo, type Io } from '../output.js';
import { deliveryHeaders, refusedLine, sendDelivery } from '../send-delivery.js';

interface ReplayOptions {
  last?: number;
  since?: string;
  until?: string;
  log: string;
  to?: string;
  secret?: string;
  timeout: number;
  wide?: boolean;
}

/**
 * How long a replay waits for an answer by default: as long as svc waits for a receiver. Replays go one after the
 * other, so a receiver that never answers costs this per delivery: `--timeout` shortens it.
 */
const REPLAY_TIMEOUT_MS = 10_000;

/** `svc-cli replay`: resends deliveries recorded by `listen`, byte-for-byte. */
export function makeReplayCommand(io: Io = processIo): Command {
  return new Command('replay')
    .description('resend deliveries recorded by "svc-cli listen", byte-for-byte')
    .argument('[ids...]', 'delivery ids (the X-Svc-Delivery header, printed by listen)')
    .addOption(new Option('-n, --last <n>', 'replay the last N logged deliveries').argParser(parsePositiveInt))
    .addOption(new Option('--since <time>', 'replay the deliveries listen received at or after: a duration back from now (30m, 2h, 7d) or an ISO 8601 time').argParser((v) => parseTimeAgo(v)))
    .addOption(new Option('--until <time>', 'with or without --since: received before this time (a duration back from now or an ISO 8601 time)').argParser((v) => parseTimeAgo(v)))
    .addOption(new Option('--log <file>', 'delivery log written by listen').default(DEFAULT_LOG_FILE))
    .addOption(new Option('--to <url>', 'send here instead of the URL each delivery was received at').argParser(parseForwardUrl))
    .addOption(
      new Option('-s, --secret <secret>', 're-sign each body with this secret (X-Svc-Signature, and webhook-signature with a fresh webhook-timestamp); without it, X-Svc-Signature as recorded and no webhook-* headers')
        .env('SVC_WEBHOOK_SECRET')
        .argParser(parseOneSecret),
    )
    .addOption(
      new Option('--timeout <time>', "how long each replay waits for the receiver's answer, e.g. 10s or 500ms (as svc waits SVC_WEBHOOK_TIMEOUT_MS)")
        .default(REPLAY_TIMEOUT_MS, '10s')
        .argParser(parseForwardTimeout),
    )
    .option('-w, --wide', 'full ids and URLs on a terminal too (lines there are cut to its width; to a pipe or a file they are always whole)')
    .addHelpText(
      'after',
      `
Each delivery is sent with its original body bytes, Content-Type, User-Agent and X-Svc-* headers
(X-Svc-Delivery included, so receivers can de-duplicate). The Standard Webhooks headers (webhook-id,
-timestamp, -signature) are sent only with --secret, signed anew with a fresh timestamp: recorded ones are
refused as a replay. Exits 1 when any replay is not answered 2xx. A target that refuses the connection
(or is not found) gets none of the deliveries after the first: they are counted as not sent. ^C stops
after abandoning the delivery in flight, says how many were sent, and exits 130.

Examples:
  $ svc-cli replay --last 1
  $ svc-cli replay whd_01a2271f… 9e0ca7e6          (a full id, or the tail listen and deliveries list print)
  $ svc-cli replay --last 5 --to http://localhost:3000/webhooks/svc --secret whsec_...
  $ svc-cli replay --since 2h --until 30m --to http://localhost:3000/webhooks/svc --secret whsec_...
  $ svc-cli replay --last 100 --to localhost:3000/webhooks/svc --timeout 2s`,
    )
    .action(async (ids: string[], opts: ReplayOptions, command: Command) => {
      const { json } = globalOptions(command);
      if (ids.length === 0 && opts.last === undefined && opts.since === undefined && opts.until === undefined) {
        // A usage error: exit 2, as commander's own, so a script tells it from a replay that failed (1).
        throw new CliError('nothing to replay: give delivery ids, --last N, or --since/--until', { exitCode: 2 });
      }
      const entries = await readDeliveryLog(opts.log, io);
      const chosen = select(entries, ids, opts);
      if (opts.last !== undefined && opts.last > entries.length) {
        // Not an error (the newest N, as many as there are), but "--last 50" sending 3 is worth a word.
        io.err(`The log has ${entries.length} ${entries.length === 1 ? 'delivery' : 'deliveries'}, fewer than --last ${opts.last}: replaying ${entries.length === 1 ? 'it' : 'all of them'}.\n`);
      }
      let failed = 0;
      let duplicates = 0;
      let replayed = 0;
      let unsigned = false;
      // Listener URLs that could not be reached: replay's default target, often a listen that has since stopped.
      const unreachable = new Set<string>();
      // Targets nothing listens at, with why: the deliveries still bound for one are not sent (each would fail the
      // same way, one line apiece), and are counted so the user knows to replay them once it is up.
      const down = new Map<string, string>();
      const notSent = new Map<string, number>();
      if (opts.secret !== undefined && command.getOptionValueSource('secret') === 'env') {
        io.err('Re-signing with SVC_WEBHOOK_SECRET (a fresh webhook-timestamp).\n');
      }
      // ^C stops after the delivery in flight is abandoned, and says what was and was not sent (the rest are still
      // in the log); a second ^C quits at once.
      const interrupted = new AbortController();
      const onSignal = (): void => {
        if (interrupted.signal.aborted) process.exit(130);
        interrupted.abort();
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      try {
        for (const entry of chosen) {
          if (interrupted.signal.aborted) break;
          const url = opts.to ?? entry.url;
          const why = down.get(url);
          if (why !== undefined) {
            notSent.set(url, (notSent.get(url) ?? 0) + 1);
            if (json) io.out(`${JSON.stringify({ id: entry.id, url, ok: false, status_code: null, error: `not sent: ${why} at an earlier delivery`, duplicate: false })}\n`);
            continue;
          }
          const body = Buffer.from(entry.body_base64, 'base64');
          // A recorded webhook-id + webhook-timestamp is a replay to any receiver that checks them (listen does, and
          // refuses the pair it has seen): the Standard Webhooks headers go only re-signed, with --secret;
          // X-Svc-Signature, which has no timestamp, as recorded. The hint below says so when a receiver refuses.
          const headers = deliveryHeaders(entry.headers, { standard: false });
          if (opts.secret !== undefined) {
            headers['x-svc-signature'] = sign(body, opts.secret);
            // A replay is a new attempt: a fresh timestamp, so a receiver's tolerance check accepts it.
            const id = headers['x-svc-delivery'];
            if (id !== undefined) {
              const timestamp = Math.floor(Date.now() / 1000);
              headers['webhook-id'] = id;
              headers['webhook-timestamp'] = String(timestamp);
              headers['webhook-signature'] = signWebhook(body, { id, timestamp }, opts.secret);
            }
          }
          const outcome = await sendDelivery(url, body, headers, opts.timeout, interrupted.signal);
          // Abandoned by ^C: neither sent nor failed.
          if (interrupted.signal.aborted) break;
          replayed++;
          if (!outcome.ok) failed++;
          if (!outcome.ok && outcome.status === null && UNREACHABLE.has(outcome.error)) down.set(url, outcome.error);
          if (!outcome.ok && outcome.status === null && opts.to === undefined) unreachable.add(url);
          if (outcome.ok && outcome.duplicate) duplicates++;
          if (!outcome.ok && opts.secret === undefined && outcome.status !== null && outcome.status < 500) unsigned = true;
          if (json) {
            io.out(`${JSON.stringify({ id: entry.id, url, ok: outcome.ok, status_code: outcome.status, error: outcome.ok ? null : outcome.error, duplicate: outcome.ok && outcome.duplicate === true })}\n`);
          } else {
            // A line fits the terminal it is written to; to a pipe or a file (or with --wide) it is whole.
            const stream = outcome.status === null ? 'err' : 'out';
            const line = formatSentLine(new Date(), url, outcome, entry.id, opts.wide === true ? undefined : lineWidth(io, stream));
            io[stream](line);
            if (!outcome.ok && outcome.reason !== undefined) io.err(refusedLine(new Date(), outcome.status, outcome.reason));
          }
        }
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
      for (const [url, count] of notSent) {
        io.err(`Not sent: ${count} more ${count === 1 ? 'delivery' : 'deliveries'} to ${url} (${down.get(url)} at the first): start the receiver and replay ${count === 1 ? 'it' : 'them'} again.\n`);
      }
      if (unreachable.size > 0) {
        io.err(
          `Without --to, a delivery goes back to where listen received it (${[...unreachable].join(', ')}): is svc-cli listen running there? Or pass --to URL (your app).\n`,
        );
      }
      if (unsigned) {
        io.err(
          'Sent with the recorded X-Svc-Signature and without webhook-id/-timestamp/-signature (recorded ones are refused as a replay): to sign them anew for this receiver, pass --secret (or set SVC_WEBHOOK_SECRET).\n',
        );
      }
      if (duplicates > 0) {
        io.err(
          `${duplicates} of ${chosen.length} answered as ${duplicates === 1 ? 'a duplicate' : 'duplicates'} (svc-duplicate: true): the receiver had processed ${duplicates === 1 ? 'that delivery id' : 'those delivery ids'} already and did not again. To have ${duplicates === 1 ? 'it' : 'them'} processed, replay to a receiver that has not seen ${duplicates === 1 ? 'it' : 'them'}, or clear its de-duplication store.\n`,
        );
      }
      const skipped = [...notSent.values()].reduce((a, b) => a + b, 0);
      if (interrupted.signal.aborted) {
        const left = chosen.length - replayed - skipped;
        throw new CliError(`stopped: ${replayed} of ${chosen.length} replayed${failed > 0 ? ` (${failed} failed)` : ''}, ${left} not sent`, { exitCode: 130 });
      }
      if (skipped > 0) throw new CliError(`${failed} of ${chosen.length} replayed deliveries failed, ${skipped} not sent`);
      if (failed > 0) throw new CliError(`${failed} of ${chosen.length} replayed deliveries failed`);
      io.err(`Replayed ${chosen.length} ${chosen.length === 1 ? 'delivery' : 'deliveries'}.\n`);
    });
}

/** Network errors that mean nothing takes requests at the URL (a timeout or a reset may be one slow delivery: the others are still sent). */
const UNREACHABLE = new Set(['connection refused', 'host not found', 'connect timeout']);

/** The requested entries, oldest first; an id logged several times (retries) means its latest copy. */
function select(entries: LoggedDelivery[], ids: string[], opts: ReplayOptions): LoggedDelivery[] {
  if (entries.length === 0) throw new CliError(`the delivery log ${opts.log} has no delivery to replay`);
  const chosen: LoggedDelivery[] = [];
  for (const id of ids) {
    // The short ids listen prints (the id's tail) name a delivery too.
    const entry = entries.findLast((e) => e.id === id) ?? entries.findLast((e) => e.id !== null && idMatches(e.id, id));
    if (!entry) throw new CliError(`delivery ${id} is not in ${opts.log}`);
    chosen.push(entry);
  }
  if (opts.last !== undefined) {
    for (const entry of entries.slice(-opts.last)) if (!chosen.includes(entry)) chosen.push(entry);
  }
  if (opts.since !== undefined || opts.until !== undefined) {
    const from = opts.since === undefined ? -Infinity : Date.parse(opts.since);
    const to = opts.until === undefined ? Infinity : Date.parse(opts.until);
    const inRange = entries.filter((e) => Date.parse(e.time) >= from && Date.parse(e.time) < to);
    if (inRange.length === 0) {
      const range = [opts.since && `at or after ${opts.since}`, opts.until && `before ${opts.until}`].filter(Boolean).join(' and ');
      throw new CliError(`no delivery in ${opts.log} was received ${range} (it holds ${entries.length}, from ${entries[0]!.time} to ${entries.at(-1)!.time})`);
    }
    // A delivery retried within the range is logged once per attempt: it is replayed once, its latest copy.
    for (const entry of inRange) {
      const later = entry.id !== null && inRange.findLast((e) => e.id === entry.id) !== entry;
      if (!later && !chosen.includes(entry)) chosen.push(entry);
    }
  }
  return chosen;
}
