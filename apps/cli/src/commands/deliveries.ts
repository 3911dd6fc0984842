import { Command, Option } from 'commander';
import type { BulkRedeliverRequest, Delivery, DeliveryAttempt, DeliveryList, DeliveryStatus } from '@svc/protocol';
// The zod-free entry: the CLI does not load the schemas at run time (start-up time).
import { DELIVERY_STATUSES, deliveryListSearch, REDELIVERY_MAX } from '@svc/protocol/delivery-list-query';
import { apiClientFor, globalOptions } from '../global-options.js';
import { parsePositiveInt, parseStatusCodeFilter, parseTimeAgo } from '../options.js';
import type { ApiClient } from '../api-client.js';
import { CliError } from '../errors.js';
import { deliveryActionResult, bulkRedeliverResult, deliveryDetail, deliveryList } from '../response-shapes.js';
import { kleur, lineWidth, printable, processIo, table, visibleLength, type Io } from '../output.js';
import { idMatches, shortId, truncate } from '../short-id.js';

interface ListOptions {
  limit?: number;
  status?: DeliveryStatus;
  before?: string;
  requestId?: string;
  since?: string;
  until?: string;
  lastStatusCode?: string;
  wide?: boolean;
}

/** `svc-cli deliveries list|show|redeliver|cancel`: the server's deliveries API for the calling key. */
export function makeDeliveriesCommand(io: Io = processIo): Command {
  const deliveries = new Command('deliveries').description("webhook deliveries of the API key, as the server recorded them");
  deliveries.addHelpText(
    'after',
    `
Examples:
  $ svc-cli deliveries list --status failed
  $ svc-cli deliveries show <id>
  $ svc-cli deliveries redeliver <id>
  $ svc-cli deliveries redeliver --status failed --since 2h
  $ svc-cli deliveries cancel <id>`,
  );

  deliveries
    .command('list')
    .description('list deliveries, newest first')
    .addOption(new Option('-l, --limit <n>', 'how many').argParser(parsePositiveInt))
    .addOption(new Option('--status <status>', 'only deliveries in this state').choices(DELIVERY_STATUSES))
    .addOption(new Option('--before <cursor>', 'continue after this cursor (printed when there are more)'))
    .addOption(new Option('--request-id <id>', "only the deliveries of this request (its x-request-id: chatcmpl-… for a chat completion, req_… for a Responses API request, or test-…)"))
    .addOption(new Option('--since <time>', 'created at or after: a duration back from now (30m, 2h, 7d) or an ISO 8601 time').argParser((v) => parseTimeAgo(v)))
    .addOption(new Option('--until <time>', 'created before: a duration back from now or an ISO 8601 time').argParser((v) => parseTimeAgo(v)))
    .addOption(new Option('--last-status-code <code>', "only deliveries whose last attempt got this HTTP status (503) or one of its class (5xx)").argParser(parseStatusCodeFilter))
    .option('-w, --wide', 'full ids, times and URLs on a terminal too (a line there fits its width; to a pipe or a file the table is always whole)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc-cli deliveries list
  $ svc-cli deliveries list --limit 50 --status failed
  $ svc-cli deliveries list --request-id chatcmpl-4f2a…
  $ svc-cli deliveries list --last-status-code 5xx --since 2h
  $ svc-cli deliveries show <webhook-id>      (a delivery by its id, as the receiver got it in webhook-id)
  $ svc-cli deliveries list --wide
  $ svc-cli deliveries list --json | jq '.data[].id'`,
    )
    .action(async (opts: ListOptions, command: Command) => {
      const { json } = globalOptions(command);
      const filter = { status: opts.status, request_id: opts.requestId, since: opts.since, until: opts.until, last_status_code: opts.lastStatusCode };
      const search = deliveryListSearch({ limit: opts.limit, ...filter, before: opts.before });
      const { data, raw } = await apiClientFor(command).json('GET', `/v1/webhooks/deliveries${search}`, deliveryList);
      if (json) {
        io.out(`${raw.trim()}\n`);
        return;
      }
      if (data.data.length === 0) {
        io.err('No deliveries.\n');
        return;
      }
      // Fitted to a terminal; whole (as with --wide) to a pipe or a file, so a script gets every id.
      const width = opts.wide ? undefined : lineWidth(io, 'out');
      io.out(width === undefined ? wideTable(data.data) : narrowTable(data.data, width));
      if (data.has_more && data.next_cursor) {
        // The next page of the same list: its filter and page size too (without them it was every delivery, 20 a page).
        // Times as the server read them (a duration would move on with the clock).
        const same = [
          opts.limit === undefined ? '' : ` --limit ${opts.limit}`,
          filter.status === undefined ? '' : ` --status ${filter.status}`,
          filter.request_id === undefined ? '' : ` --request-id ${filter.request_id}`,
          filter.since === undefined ? '' : ` --since ${filter.since}`,
          filter.until === undefined ? '' : ` --until ${filter.until}`,
          filter.last_status_code === undefined ? '' : ` --last-status-code ${filter.last_status_code}`,
        ].join('');
        io.err(`More: svc-cli deliveries list --before ${data.next_cursor}${same}\n`);
      }
    });

  deliveries
    .command('show')
    .description('one delivery with its attempts and exact payload')
    .argument('<id>', 'delivery id')
    .addHelpText(
      'after',
      `
Examples:
  $ svc-cli deliveries show 4b5c6d7e          (the short id deliveries list prints)
  $ svc-cli deliveries show whd_0193… --json | jq -r .payload`,
    )
    .action(async (given: string, _opts: unknown, command: Command) => {
      const { json } = globalOptions(command);
      const api = apiClientFor(command);
      const id = await resolveDeliveryId(api, given);
      const { data, raw } = await api.json('GET', `/v1/webhooks/deliveries/${encodeURIComponent(id)}`, deliveryDetail);
      if (json) {
        io.out(`${raw.trim()}\n`);
        return;
      }
      // What receivers answered and what requests held is other people's text: escaped, it cannot drive the
      // terminal (line breaks kept, so an answer or a payload still reads as lines).
      io.out(describe(data));
      const attempts = data.attempt_log ?? [];
      if (attempts.length > 0) {
        io.out(`\nAttempts\n`);
        io.out(
          table(
            ['#', 'TIME', 'CODE', 'DURATION', 'ERROR'],
            attempts.map((a) => [String(a.attempt), a.attempted_at, a.status_code === null ? '-' : String(a.status_code), `${a.duration_ms} ms`, printable(a.error ?? '')]),
          ),
        );
        const sent = attempts.filter((a) => a.request_headers !== null && a.request_headers !== undefined).at(-1);
        if (sent?.request_headers) {
          io.out(`\nHeaders sent with attempt ${sent.attempt}\n${Object.entries(sent.request_headers).map(([name, value]) => printable(`${name}: ${value}`)).join('\n')}\n`);
        }
        const answered = attempts.filter(failedWithAnswer);
        for (const a of answered) io.out(`\nReceiver's answer to attempt ${a.attempt} (first 2 KB)\n${printableLines(a.response_body)}\n`);
      }
      io.out(`\nPayload\n${printableLines(prettyPayload(data.payload))}\n`);
    });

  deliveries
    .command('redeliver')
    .description('send a delivery again now (same bytes and delivery id), or every delivery matching the filters')
    .argument('[id]', 'delivery id (or the short id `deliveries list` shows)')
    .addOption(new Option('--status <status>', 'redeliver every delivery in this state').choices(DELIVERY_STATUSES))
    .addOption(new Option('--request-id <id>', "every delivery of this request (its x-request-id: chatcmpl-…, or test-…)"))
    .addOption(new Option('--since <time>', 'created at or after: a duration back from now (30m, 2h, 7d) or an ISO 8601 time').argParser((v) => parseTimeAgo(v)))
    .addOption(new Option('--until <time>', 'created before: a duration back from now or an ISO 8601 time').argParser((v) => parseTimeAgo(v)))
    .addOption(new Option('--last-status-code <code>', 'every delivery whose last attempt got this HTTP status (503) or one of its class (5xx)').argParser(parseStatusCodeFilter))
    .option('--dry-run', 'only count the deliveries that match')
    .addHelpText(
      'after',
      `
With filters instead of an id (the terms \`deliveries list\` takes), redelivers the newest matching deliveries, at most ${REDELIVERY_MAX} per call (run it
again for more); each keeps its delivery id, so receivers de-duplicate as usual.

Examples:
  $ svc-cli deliveries redeliver 4b5c6d7e
  $ svc-cli deliveries redeliver --status failed --since 2h
  $ svc-cli deliveries redeliver --status failed --since 2026-11-24 --until 2026-11-25 --dry-run
  $ svc-cli deliveries redeliver --status failed --last-status-code 5xx`,
    )
    .action(async (given: string | undefined, opts: BulkOptions, command: Command) => {
      const filtered = [opts.status, opts.requestId, opts.since, opts.until, opts.lastStatusCode].some((term) => term !== undefined);
      if (given !== undefined && filtered) throw new CliError('give a delivery id or filters (--status/--request-id/--since/--until/--last-status-code), not both', { exitCode: 2 });
      if (given === undefined) {
        if (!filtered) throw new CliError('give a delivery id, or filters (--status/--request-id/--since/--until/--last-status-code) to redeliver every delivery that matches', { exitCode: 2 });
        await redeliverMatching(io, command, opts);
        return;
      }
      const done = await deliveryAction(io, command, given, 'redeliver');
      if (!done) return;
      const { id, data } = done;
      // The status is the delivery's now; the code is its last attempt's before this one.
      const state = data.status ? ` (now ${status(data.status)}${typeof data.last_status_code === 'number' ? `; its last attempt got ${data.last_status_code}` : ''})` : '';
      io.out(`Redelivery of ${data.id ?? id} to ${data.url ?? 'the webhook URL'} requested${state}\n`);
    });

  deliveries
    .command('cancel')
    .description('stop a pending delivery: no more attempts (redeliver resumes it)')
    .argument('<id>', 'delivery id (or the short id `deliveries list` shows)')
    .action(async (given: string, _opts: unknown, command: Command) => {
      const done = await deliveryAction(io, command, given, 'cancel');
      if (!done) return;
      io.out(`Delivery ${done.data.id ?? done.id} ${status(done.data.status ?? 'cancelled')}\n`);
    });

  return deliveries;
}

interface BulkOptions {
  status?: DeliveryStatus;
  requestId?: string;
  since?: string;
  until?: string;
  lastStatusCode?: string;
  dryRun?: boolean;
}

/** `deliveries redeliver --status … --since …`: one call to the bulk redelivery endpoint. */
async function redeliverMatching(io: Io, command: Command, opts: BulkOptions): Promise<void> {
  const { json } = globalOptions(command);
  const body: BulkRedeliverRequest = {
    status: opts.status,
    request_id: opts.requestId,
    since: opts.since,
    until: opts.until,
    last_status_code: opts.lastStatusCode,
    dry_run: opts.dryRun === true,
  };
  const { data, raw } = await apiClientFor(command).json('POST', '/v1/webhooks/deliveries/redeliver', bulkRedeliverResult, body);
  if (json) {
    io.out(`${raw.trim()}\n`);
    return;
  }
  const noun = (n: number): string => `${n} ${n === 1 ? 'delivery' : 'deliveries'}`;
  io.out(opts.dryRun ? `${noun(data.matched)} ${data.matched === 1 ? 'matches' : 'match'}; nothing was sent (--dry-run)\n` : `Redelivery of ${noun(data.redelivered)} requested\n`);
  if (data.matched >= data.limit) io.err(`At most ${data.limit} per call: run it again for older ones.\n`);
}

/** POSTs `action` for the delivery `given` names; with --json prints the answer as sent and resolves with undefined. */
async function deliveryAction(
  io: Io,
  command: Command,
  given: string,
  action: 'redeliver' | 'cancel',
): Promise<{ id: string; data: Partial<Delivery> } | undefined> {
  const { json } = globalOptions(command);
  const api = apiClientFor(command);
  const id = await resolveDeliveryId(api, given);
  const { data, raw } = await api.json('POST', `/v1/webhooks/deliveries/${encodeURIComponent(id)}/${action}`, deliveryActionResult);
  if (!json) return { id, data };
  io.out(`${raw.trim()}\n`);
  return undefined;
}

/** ID, STATUS, CODE, ATTEMPTS, CREATED, REQUEST: short id, local time to the minute, request id cut to fit `width` columns. */
function narrowTable(rows: Delivery[], width: number): string {
  const header = ['ID', 'STATUS', 'CODE', 'ATTEMPTS', 'CREATED', 'REQUEST'];
  const cells = rows.map((d) => [shortId(d.id), deliveryState(d), code(d), String(d.attempts), localMinute(new Date(d.created_at))]);
  const widths = header.slice(0, -1).map((h, i) => Math.max(h.length, ...cells.map((row) => visibleLength(row[i] ?? ''))));
  const room = width - widths.reduce((sum, w) => sum + w + 2, 0);
  return table(header, cells.map((row, i) => [...row, truncate(rows[i]!.request_id, Math.max(room, header.at(-1)!.length))]));
}

function wideTable(rows: Delivery[]): string {
  return table(
    ['ID', 'STATUS', 'CODE', 'ATTEMPTS', 'CREATED', 'REQUEST', 'URL'],
    rows.map((d) => [d.id, deliveryState(d), code(d), String(d.attempts), d.created_at, d.request_id, d.url]),
  );
}

function code(d: Delivery): string {
  return d.last_status_code === null ? '-' : String(d.last_status_code);
}

/** `2026-11-25 12:03`, local time. */
function localMinute(date: Date): string {
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

const FULL_ID = /^whd_[0-9a-f]{32}$/;
const SHORT_ID = /^…?[0-9a-f]{4,31}$/;
/** Deliveries looked through to find the one a short id names. */
const SEARCH_PAGES = 10;

/** The full id for a short one (its tail, as `deliveries list` prints it), looked up among the latest deliveries. */
async function resolveDeliveryId(api: ApiClient, given: string): Promise<string> {
  if (FULL_ID.test(given) || !SHORT_ID.test(given)) return given;
  const matches: string[] = [];
  let before: string | null = null;
  let seen = 0;
  for (let page = 0; page < SEARCH_PAGES; page++) {
    const query: string = before ? `&before=${encodeURIComponent(before)}` : '';
    const { data }: { data: DeliveryList } = await api.json('GET', `/v1/webhooks/deliveries?limit=100${query}`, deliveryList);
    seen += data.data.length;
    for (const d of data.data) if (idMatches(d.id, given)) matches.push(d.id);
    if (!data.has_more || !data.next_cursor) break;
    before = data.next_cursor;
  }
  if (matches.length === 1) return matches[0]!;
  if (matches.length === 0) throw new CliError(`no delivery ending in ${given} among the latest ${seen}; pass the full id (svc-cli deliveries list --wide)`);
  throw new CliError(`${matches.length} deliveries end in ${given}; pass more of the id (svc-cli deliveries list --wide)`);
}

/** `retrying` for a pending delivery that has failed at least once (it has attempts left), else its status. */
function deliveryState(d: Delivery): string {
  return d.status === 'pending' && d.attempts > 0 ? kleur.yellow('retrying') : status(d.status);
}

function status(value: string): string {
  if (value === 'delivered') return kleur.green(value);
  if (value === 'failed') return kleur.red(value);
  if (value === 'cancelled') return kleur.gray(value);
  return kleur.yellow(value);
}

function describe(d: Delivery): string {
  const rows: [string, string][] = [
    ['id', printable(d.id)],
    ['status', d.status === 'pending' && d.attempts > 0 ? kleur.yellow(`retrying (attempt ${d.attempts + 1}${d.next_attempt_at ? `, next ${d.next_attempt_at}` : ''})`) : status(d.status)],
    ['event', printable(d.event)],
    ['request_id', printable(d.request_id)],
    ['request', d.request_status_code === null ? '-' : `answered ${d.request_status_code}`],
    ['url', printable(d.url)],
    ['attempts', String(d.attempts)],
    ['last status', d.last_status_code === null ? '-' : String(d.last_status_code)],
    ['last error', printable(d.last_error ?? '-')],
    ['created', d.created_at],
    ['delivered', d.delivered_at ?? '-'],
    ['next attempt', d.next_attempt_at ?? '-'],
  ];
  return rows.map(([k, v]) => `${kleur.dim(k.padEnd(13))}${v}`).join('\n') + '\n';
}

/** `printable` line by line: the line breaks stay. */
function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n');
}

function failedWithAnswer(a: DeliveryAttempt): a is DeliveryAttempt & { response_body: string } {
  const failed = a.status_code === null || a.status_code < 200 || a.status_code >= 300;
  return failed && typeof a.response_body === 'string' && a.response_body !== '';
}

function prettyPayload(payload: string): string {
  try {
    return JSON.stringify(JSON.parse(payload), null, 2);
  } catch {
    return payload;
  }
}
