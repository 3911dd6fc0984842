import { createServer, maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { networkInterfaces } from 'node:os';
import { createDeduper, DUPLICATE_HEADER, errorBody, WebhookVerificationError } from '@svc/verify';
import type { AddressInfo } from 'node:net';
import { createDeliveryLog, type LoggedDelivery } from './delivery-log.js';
import { formatReceivedLine, formatSentLine } from './delivery-line.js';
import { CliError } from './errors.js';
import { clockTime, kleur, lineWidth, printable, shown, type Io } from './output.js';
import { deliveryHeaders, refusedLine, sendDelivery } from './send-delivery.js';
import { createSignatureCheck, type SignatureVerdict } from './signature-check.js';
import { createGapWatch } from './sequence-gaps.js';

type Refusal = Extract<SignatureVerdict, { signature: 'invalid' }>;

export interface ListenerOptions {
  host: string;
  port: number;
  path: string;
  /** The signing secret, or several (a rotation): a delivery verifies under any of them. */
  secret?: string | readonly string[];
  /** How far `webhook-timestamp` may be from now, in seconds, before a delivery is refused as a replay. Default 300. */
  toleranceSeconds?: number;
  forwardTo?: string;
  /** How long a forward waits for the target's answer. Default `FORWARD_TIMEOUT_MS`. */
  forwardTimeoutMs?: number;
  /** Print each raw body on one line to stdout (human lines then go to stderr). */
  json: boolean;
  /** Full ids and every detail even on a terminal; otherwise a line written to a terminal fits its width (`lineWidth`). */
  wide?: boolean;
  logFile: string;
  io: Io;
  clock?: () => Date;
}

export interface ListenerStats {
  received: number;
  verified: number;
  rejected: number;
  /** Forwarded and answered 2xx by the target. */
  forwarded: number;
  /** Forwarded, and the target answered with another status (its app refused or failed: not a forwarding failure). */
  refused: number;
  /** The target could not be reached (refused connection, timeout). */
  forwardFailed: number;
}

export interface Listener {
  /**
   * The URL deliveries are accepted at, port 0 resolved, e.g. `http://127.0.0.1:4000/`. On a wildcard bind
   * (`--host 0.0.0.0` or `::`): at this machine's first network address, the one another host or a container reaches.
   */
  url: string;
  /** Every URL that reaches the listener, `url` first: on a wildcard bind each network address, then loopback. */
  urls: string[];
  /** The address and port bound, as given (`0.0.0.0:4000`, `127.0.0.1:4000`, `[::]:4000`). */
  bound: string;
  stats: ListenerStats;
  /** How many deliveries are being forwarded now (waiting for the target's answer). */
  forwarding(): number;
  /** Stops accepting, waits for in-flight deliveries and forwards to finish. */
  close(): Promise<void>;
}

/**
 * Above any delivery svc sends: its payload holds the request's prompt (up to the 10 MiB request limit) and the
 * answer (up to 32 MiB from upstream), so 10 MiB — the request limit — refused real deliveries of long prompts.
 */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

/**
 * Body bytes held at once over every delivery being handled. Each may be up to MAX_BODY_BYTES, and a sender
 * opening many at once would have them all held (and copied for the log) until the process runs out of memory;
 * past this a delivery is answered 503 with `retry-after`, which svc retries as any failed attempt.
 */
const MAX_BYTES_IN_FLIGHT = 256 * 1024 * 1024;

/** Seconds a delivery refused for want of room is asked to wait. */
const BUSY_RETRY_SECONDS = 5;

/** How long a forward waits for the target by default: as long as svc waits for a receiver by default (SVC_WEBHOOK_TIMEOUT_MS). */
export const FORWARD_TIMEOUT_MS = 10_000;

/**
 * A local webhook receiver: prints, verifies, logs and forwards each delivery.
 *
 * @example
 * const listener = await startListener({ host: '127.0.0.1', port: 0, path: '/', json: false, logFile, io });
 * console.log(listener.url);
 */
export async function startListener(options: ListenerOptions): Promise<Listener> {
  const { io } = options;
  const clock = options.clock ?? (() => new Date());
  const log = createDeliveryLog(options.logFile);
  const stats: ListenerStats = { received: 0, verified: 0, rejected: 0, forwarded: 0, refused: 0, forwardFailed: 0 };
  const inFlight = new Set<Promise<void>>();
  let forwarding = 0;
  const forwardTimeoutMs = options.forwardTimeoutMs ?? FORWARD_TIMEOUT_MS;
  const gaps = createGapWatch(io);
  // With --json stdout carries only raw bodies, so the human lines move to stderr.
  const humanStream = options.json ? 'err' : 'out';
  const human = options.json ? io.err : io.out;
  // The columns a line fits on `stream`: none (the whole line) with --wide or where it is not a terminal.
  const widthOf = (stream: 'out' | 'err'): number | undefined => (options.wide ? undefined : lineWidth(io, stream));
  let baseUrl = '';
  const checkSignature = options.secret === undefined ? undefined : createSignatureCheck(options.secret, options.toleranceSeconds ?? 300);
  // Without --forward-to the listener is the receiver, so it de-duplicates as one must: a delivery id it already
  // accepted (a retry, signed afresh or not) is answered 200 `svc-duplicate: true`. With it, the target decides.
  const seen = options.forwardTo === undefined ? createDeduper() : undefined;
  const budget: BodyBudget = { held: 0 };

  const server = createServer((req, res) => {
    const task = handle(req, res).catch((err: unknown) => {
      io.err(`${clockTime(clock())}  ${kleur.red('✘')} ${(err as Error).message}\n`);
      if (!res.headersSent) reply(res, 500, { error: 'listener failure' });
    });
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
  });
  // A request node refuses before the handler (headers over its limit, bytes that are not HTTP) was answered without
  // a word here: said in one line, then answered as node answers it.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, why] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, `its headers are over node's ${maxHeaderSize / 1024} KB`]
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'it was not sent in time']
          : [400, `it is not HTTP node can read (${err.code ?? 'parse error'})`];
    io.err(`${clockTime(clock())}  ${kleur.red(`✘ [${status}]`)} a request refused before it was read: ${why}\n`);
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = new URL(req.url ?? '/', 'http://listener');
    if (target.pathname !== options.path) {
      // Said on stderr too: a webhook URL with the wrong path is the usual reason nothing seems to arrive.
      io.err(`${clockTime(clock())}  ${kleur.yellow(`[404] ${req.method ?? 'GET'} ${shown(target.pathname)}`)}: not a delivery path; deliveries are accepted at ${options.path}\n`);
      req.resume();
      reply(res, 404, { error: `not found: deliveries are accepted at ${options.path}` });
      return;
    }
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      reply(res, 405, { error: 'method not allowed: deliveries are POSTed' });
      return;
    }
    const read = await readBody(req, budget);
    try {
      await receive(req, res, target, read);
    } finally {
      budget.held -= read.held;
    }
  }

  async function receive(req: IncomingMessage, res: ServerResponse, target: URL, read: BodyRead): Promise<void> {
    if (read.refused === 503) {
      req.resume();
      const id = shown(String(req.headers['x-svc-delivery'] ?? req.headers['webhook-id'] ?? 'no delivery id'));
      io.err(`${clockTime(clock())}  ${kleur.yellow(`! [503] POST ${shown(target.pathname)}`)}: ${MAX_BYTES_IN_FLIGHT / 1024 / 1024} MiB of deliveries are being read already; asked to retry [${id}]\n`);
      res.setHeader('retry-after', String(BUSY_RETRY_SECONDS));
      reply(res, 503, { error: `busy: ${MAX_BYTES_IN_FLIGHT / 1024 / 1024} MiB of deliveries are being read already` });
      return;
    }
    const body = read.body;
    if (body === undefined) {
      req.resume();
      // Said on the terminal too: svc keeps retrying a delivery answered 413, and nothing else would show it.
      const id = shown(String(req.headers['x-svc-delivery'] ?? req.headers['webhook-id'] ?? 'no delivery id'));
      io.err(`${clockTime(clock())}  ${kleur.red(`✘ [413] POST ${shown(target.pathname)}`)}: a body over ${MAX_BODY_BYTES / 1024 / 1024} MiB, not read [${id}]\n`);
      reply(res, 413, { error: `body over ${MAX_BODY_BYTES / 1024 / 1024} MiB` });
      return;
    }
    const time = clock();
    stats.received++;
    let signature: LoggedDelivery['signature'] = 'unchecked';
    let refusal: Refusal | undefined;
    if (checkSignature !== undefined) {
      const verdict = checkSignature(body, req.headers, time);
      signature = verdict.signature;
      if (verdict.signature === 'valid') stats.verified++;
      else {
        stats.rejected++;
        refusal = verdict;
      }
    }
    const headers = flatHeaders(req);
    const deliveryId = headers['x-svc-delivery'] ?? null;

    human(formatReceivedLine({ time, body, headers, signature, width: widthOf(humanStream) }));
    if (refusal !== undefined) io.err(`${clockTime(time)}  ${kleur.red('✘')} ${printable(refusal.reason)}\n`);
    // Escaped too: svc's bodies are compact JSON, where an unprintable character can only be inside a string,
    // and there a \u escape means the same character.
    if (options.json) io.out(`${printable(body.toString('utf8'))}\n`);
    if (signature !== 'invalid') await gaps.observe(body, time);
    // An empty id (`webhook-id:` with no value) is none: claimed, it was a TypeError answered 500 "listener failure".
    const answer = refusal !== undefined ? rejected(time, refusal) : await forward(body, req, headers['webhook-id'] || deliveryId || null, time);

    // Everything a caller can observe is done before answering: the sender's call returning means
    // the delivery is printed, forwarded and logged.
    try {
      await log.append({
        time: time.toISOString(),
        id: deliveryId,
        event: headers['x-svc-event'] ?? null,
        method: 'POST',
        url: `${baseUrl}${target.pathname}${target.search}`,
        headers,
        body_base64: body.toString('base64'),
        signature,
        status: answer.status,
      });
    } catch (err) {
      io.err(`${clockTime(time)}  ${kleur.red('✘')} could not append to ${options.logFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}\n`);
    }
    res.writeHead(answer.status, { ...answer.headers, 'content-type': answer.contentType, 'content-length': Buffer.byteLength(answer.body) });
    res.end(answer.body);
  }

  /**
   * The answer a receiver built on `@svc/verify` gives (its status and `errorBody`: 401 `authentication_error` for a
   * signature, 400 for a timestamp out of range), saying why: svc's attempt log (dashboard, `deliveries show`) keeps
   * the body's start.
   */
  function rejected(time: Date, refusal: Refusal): Answer {
    if (options.forwardTo !== undefined) io.err(`${clockTime(time)}  ${kleur.yellow('not forwarded: the signature is invalid')}\n`);
    const err = new WebhookVerificationError(refusal.code, refusal.reason);
    return jsonAnswer(err.status, errorBody(err));
  }

  /**
   * Without --forward-to: 200, with `svc-duplicate: true` for a delivery id already accepted. With it, svc gets the forward target's answer (its status, the start of its body,
   * its `retry-after` and `svc-duplicate`), or a 502 when the target cannot be reached, so svc's retries and
   * attempt log are the target's.
   */
  async function forward(body: Buffer, req: IncomingMessage, deliveryId: string | null, time: Date): Promise<Answer> {
    if (seen !== undefined) {
      if (deliveryId === null || (await seen.claim(deliveryId))) {
        if (deliveryId !== null) seen.complete(deliveryId);
        return jsonAnswer(200, { received: true });
      }
      // A status line, on stderr as the gap warnings: stdout keeps one line per delivery.
      io.err(`${clockTime(time)}  ${kleur.yellow(`duplicate of ${shown(deliveryId)}: answered 200 ${DUPLICATE_HEADER}: true`)}\n`);
      return { ...jsonAnswer(200, { duplicate: true }), headers: { [DUPLICATE_HEADER]: 'true' } };
    }
    const forwardTo = options.forwardTo!;
    forwarding++;
    const outcome = await sendDelivery(forwardTo, body, deliveryHeaders(req.headers), forwardTimeoutMs).finally(() => forwarding--);
    if (outcome.ok) stats.forwarded++;
    else if (outcome.status !== null) stats.refused++;
    else stats.forwardFailed++;
    if (outcome.status === null) {
      io.err(formatSentLine(clock(), forwardTo, outcome, deliveryId, widthOf('err')));
      if (!outcome.ok && outcome.error === 'timed out') {
        // A slow handler is the usual cause, and svc gives up on it as listen did: say what a receiver must do.
        io.err(
          `${clockTime(clock())}  ${kleur.yellow('!')} no answer within ${forwardTimeoutMs / 1000} s: svc waits SVC_WEBHOOK_TIMEOUT_MS (10 s by default) for a receiver, then retries; answer 2xx at once and do slow work after (--forward-timeout sets how long listen waits)\n`,
        );
      }
      return jsonAnswer(502, { error: `svc-cli listen could not reach ${forwardTo}: ${outcome.ok ? '' : outcome.error}` });
    }
    human(formatSentLine(clock(), forwardTo, outcome, deliveryId, widthOf(humanStream)));
    if (!outcome.ok && outcome.reason !== undefined) io.err(refusedLine(clock(), outcome.status, outcome.reason));
    // A redirect is answered with the reason listen printed: svc's attempt log and `webhooks test` show the answer's
    // body, and a redirect's (empty, or "Redirecting to /x") says nothing of nothing following it.
    const redirect = !outcome.ok && outcome.status >= 300 && outcome.status < 400 ? outcome.reason : undefined;
    const answerBody = redirect ?? outcome.body;
    return { status: outcome.status, contentType: 'text/plain; charset=utf-8', body: answerBody, headers: outcome.headers };
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      const where = `${options.host}:${options.port}`;
      if (err.code === 'EADDRINUSE') reject(new CliError(`cannot listen on ${where}: the port is already in use (try --port 0)`));
      else if (err.code === 'EACCES') reject(new CliError(`cannot listen on ${where}: permission denied (try a port above 1023)`));
      else if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') reject(new CliError(`cannot listen on ${where}: no such local address`));
      else reject(new CliError(`cannot listen on ${where}: ${err.code ?? err.message}`));
    });
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const bases = reachableHosts(address).map((host) => `http://${host}:${address.port}`);
  baseUrl = bases[0]!;

  return {
    url: `${baseUrl}${options.path}`,
    urls: bases.map((base) => `${base}${options.path}`),
    bound: `${urlHost(address.address)}:${address.port}`,
    stats,
    forwarding: () => forwarding,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await Promise.allSettled([...inFlight]);
      server.closeAllConnections();
      await closed;
    },
  };
}

/** Body bytes held by the deliveries being handled (MAX_BYTES_IN_FLIGHT). */
interface BodyBudget {
  held: number;
}

/** A body read (`body`), or refused: 413 over MAX_BODY_BYTES, 503 past MAX_BYTES_IN_FLIGHT; `held`: bytes it took of the budget. */
interface BodyRead {
  body?: Buffer;
  refused?: 413 | 503;
  held: number;
}

/**
 * Reads the body as bytes, taking its room in `budget`: its declared length at once (a sender announcing
 * gigabytes is refused before sending them), then the bytes as they come.
 */
async function readBody(req: IncomingMessage, budget: BodyBudget): Promise<BodyRead> {
  const read: BodyRead = { held: 0 };
  const take = (bytes: number): boolean => {
    budget.held += bytes;
    read.held += bytes;
    return budget.held <= MAX_BYTES_IN_FLIGHT;
  };
  const declared = Number(req.headers['content-length']);
  if (Number.isSafeInteger(declared) && declared > 0) {
    if (declared > MAX_BODY_BYTES) return { refused: 413, held: 0 };
    if (budget.held + declared > MAX_BYTES_IN_FLIGHT) return { refused: 503, held: 0 };
    take(declared);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) return { ...read, refused: 413 };
      if (size > read.held && !take(size - read.held)) return { ...read, refused: 503 };
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    // A body cut off (the sender's connection lost mid-way) gives its room back here: the caller, which gives back
    // what a read it gets holds, gets none.
    budget.held -= read.held;
    throw err;
  }
  return { ...read, body: Buffer.concat(chunks) };
}

function flatHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return headers;
}

/**
 * The hosts a bind is reached at. A wildcard bind is asked for to be reached from elsewhere (svc in a container or
 * on another host): this machine's network addresses first (link-local IPv6 left out: it needs a zone), then
 * loopback; an IPv6 wildcard takes IPv4 too.
 */
function reachableHosts({ address, family }: AddressInfo): string[] {
  if (address !== '0.0.0.0' && address !== '::') return [urlHost(address)];
  const families = family === 'IPv6' ? ['IPv4', 'IPv6'] : ['IPv4'];
  const external = Object.values(networkInterfaces())
    .flatMap((addresses) => addresses ?? [])
    .filter((a) => !a.internal && families.includes(a.family) && !a.address.toLowerCase().startsWith('fe80:'))
    .sort((a, b) => families.indexOf(a.family) - families.indexOf(b.family))
    .map((a) => urlHost(a.address));
  return [...external, family === 'IPv6' ? '[::1]' : '127.0.0.1'];
}

/** IPv6 addresses need brackets in a URL. */
function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

interface Answer {
  status: number;
  contentType: string;
  body: string;
  headers?: Record<string, string>;
}

function jsonAnswer(status: number, body: unknown): Answer {
  return { status, contentType: 'application/json', body: JSON.stringify(body) };
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
