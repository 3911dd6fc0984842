import { performance } from 'node:perf_hooks';
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { Agent } from '../http/undici-dispatchers.js';
import { Deadlines } from './deadlines.js';
import { signBody, signStandard } from './signer.js';
import { guardedLookup, parseAttemptUrl, WebhookAddressRefusedError, WebhookUrlRefusedError, type AllowPrivate } from './url-guard.js';
import { SERVER_VERSION } from '../version.js';

/**
 * A receiver's text as the attempt log can keep it: NUL becomes U+FFFD, as invalid UTF-8 already does.
 * Postgres text refuses NUL, and an attempt that cannot be recorded is sent again when its lease lapses:
 * a receiver answering `ok\0` was sent the same delivery forever, its attempt count never rising.
 */
function recordable(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\ufffd') : text;
}

/** How much of a receiver's response body the attempt log keeps. */
export const RESPONSE_BODY_LIMIT = 2048;

export interface OutgoingDelivery {
  url: string;
  /** The stored bytes, sent and signed as they are. */
  body: string;
  event: string;
  deliveryId: string;
  /** Plaintext signing secret (decrypted for this attempt only), or null for no signature header. */
  secret: string | null;
  /** The secret a rotation replaced, while its overlap lasts: `webhook-signature` carries a signature for it too. */
  previousSecret?: string | null;
  /** `webhook-timestamp`, unix seconds: set at each attempt, so a retry is signed afresh (same bytes, same id). */
  timestamp: number;
}

/** A 2xx answer. */
export interface AttemptSuccess {
  ok: true;
  statusCode: number;
  durationMs: number;
  error: null;
  responseBody: string;
}

/**
 * Why an attempt failed: `refused` (the SSRF guard kept it from connecting: a blocked address or an unusable
 * URL), `timeout` (no whole answer within the attempt's timeout), `http` (an answer that is not a 2xx),
 * `network` (connection or protocol error), `unprepared` (never sent: the key's secret could not be read).
 */
export type AttemptFailureKind = 'refused' | 'timeout' | 'http' | 'network' | 'unprepared';

export interface AttemptFailure {
  ok: false;
  kind: AttemptFailureKind;
  /**
   * Stable: `SVC_WEBHOOK_ADDRESS_REFUSED`, `SVC_WEBHOOK_URL_REFUSED`, `SVC_WEBHOOK_TIMEOUT`,
   * `SVC_WEBHOOK_HTTP_STATUS`, `SVC_WEBHOOK_UNPREPARED`, or for `network` the socket error's own code
   * (`ECONNREFUSED`, `UND_ERR_SOCKET`, …; `SVC_WEBHOOK_NETWORK` when it has none).
   */
  code: string;
  statusCode: number | null;
  durationMs: number;
  /** What the attempt log and the key's last status show. */
  error: string;
  responseBody: string | null;
  /** From a `Retry-After` header, when the receiver sent one. */
  retryAfterMs?: number;
}

/**
 * What one attempt did. Never an exception: failures are outcomes. `requestHeaders`: the headers it sent
 * (absent when it was not prepared), kept in the attempt log so a delivery view shows what was sent.
 */
export type AttemptOutcome = (AttemptSuccess | AttemptFailure) & { requestHeaders?: Readonly<Record<string, string>> };

export interface Sender {
  /** One attempt; `direct` (test sends) uses connections of its own, never queued behind the worker's. */
  send(delivery: OutgoingDelivery, options?: { direct?: boolean }): Promise<AttemptOutcome>;
  close(): Promise<void>;
}


export const USER_AGENT = `svc-webhooks/${SERVER_VERSION}`;

/** Milliseconds to wait from a `Retry-After` value (delta-seconds or HTTP-date). */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The kind, code and message of an attempt that failed before any answer (bad URL, refused address, socket error). */
function classifyError(err: unknown): Pick<AttemptFailure, 'kind' | 'code' | 'error'> {
  let current: unknown = err;
  // undici wraps socket errors; the innermost cause says what happened (refused, reset, SSRF guard).
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    if (current instanceof WebhookAddressRefusedError || current instanceof WebhookUrlRefusedError) {
      return { kind: 'refused', code: current.code, error: current.message };
    }
    if (!(current.cause instanceof Error)) break;
    current = current.cause;
  }
  const e = current as { code?: string; message?: string };
  const prefix = e.code && !String(e.message).includes(e.code) ? `${e.code}: ` : '';
  // The message of a parse error may quote what the receiver sent.
  return { kind: 'network', code: e.code ?? 'SVC_WEBHOOK_NETWORK', error: recordable(`${prefix}${e.message ?? String(current)}`) };
}

/** How many distinct URLs keep their parsed, vetted form (see `targetOf`); past that the cache starts over. */
const TARGET_CACHE_SIZE = 1024;

/** Where a URL's requests go, as undici's dispatcher takes it. */
interface Target {
  origin: string;
  path: string;
}

/**
 * One attempt, as undici's dispatch handler: the status, the first RESPONSE_BODY_LIMIT bytes, then one
 * outcome. No response stream, promise per chunk or abort signal: an attempt ends by its response, an error,
 * or its deadline (`Deadlines`), whichever comes first; the later ones are ignored.
 */
class Attempt implements Dispatcher.DispatchHandler {
  settled = false;
  /** When its total timeout runs out (performance.now() time). */
  readonly deadline: number;
  private controller: Dispatcher.DispatchController | null = null;
  private statusCode = 0;
  private retryAfter: string | string[] | undefined;
  private location: string | string[] | undefined;
  private chunks: Buffer[] = [];
  private kept = 0;

  constructor(
    private readonly started: number,
    private readonly timeoutMs: number,
    private readonly resolve: (outcome: AttemptOutcome) => void,
  ) {
    this.deadline = started + timeoutMs;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Timed out while waiting for a connection: give it up now.
    if (this.settled) controller.abort(new Error('attempt ended'));
    else this.controller = controller;
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return; // 1xx: the final response follows.
    this.statusCode = statusCode;
    this.retryAfter = headers['retry-after'];
    this.location = headers.location;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    const room = RESPONSE_BODY_LIMIT - this.kept;
    this.chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
    this.kept += Math.min(chunk.length, room);
    if (this.kept >= RESPONSE_BODY_LIMIT) {
      // The rest is not needed; dropping the connection is cheaper than reading a large body.
      this.respond();
      controller.abort(new Error('response body limit reached'));
    }
  }

  onResponseEnd(): void {
    this.respond();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.fail(err);
  }

  /** The deadline passed: ends the attempt as timed out and drops its request. */
  expire(): void {
    if (this.settled) return;
    const { controller } = this;
    const error = `timed out after ${this.timeoutMs} ms`;
    // A receiver that answered its status and then stalled or trickled its body: the log keeps what it did say
    // (the status and the body so far), so "200, then timed out" is not shown as no answer at all. Still a
    // timeout, retried: the answer never finished.
    const answered = this.statusCode > 0;
    this.settle({
      ok: false,
      kind: 'timeout',
      code: 'SVC_WEBHOOK_TIMEOUT',
      statusCode: answered ? this.statusCode : null,
      durationMs: this.elapsed(),
      error: answered ? `answered ${this.statusCode}, then its body ${error}` : error,
      responseBody: answered ? this.bodySoFar() : null,
    });
    // Still connecting: `onRequestStart` drops it.
    controller?.abort(new Error(error));
  }

  /** The attempt failed: bad URL, refused address, connection or protocol error. */
  fail(err: unknown): void {
    if (this.settled) return;
    this.settle({ ok: false, ...classifyError(err), statusCode: null, durationMs: this.elapsed(), responseBody: null });
  }

  private respond(): void {
    if (this.settled) return;
    const { statusCode } = this;
    const responseBody = this.bodySoFar();
    const durationMs = this.elapsed();
    if (statusCode >= 200 && statusCode < 300) {
      this.settle({ ok: true, statusCode, durationMs, error: null, responseBody });
      return;
    }
    const retryAfterMs = parseRetryAfter(this.retryAfter, Date.now());
    const error = statusCode >= 300 && statusCode < 400 ? `HTTP ${statusCode} (redirects are not followed${redirectTarget(this.location)})` : `HTTP ${statusCode}`;
    this.settle({
      ok: false,
      kind: 'http',
      code: 'SVC_WEBHOOK_HTTP_STATUS',
      statusCode,
      durationMs,
      error,
      responseBody,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
  }

  /** The response body read so far (at most RESPONSE_BODY_LIMIT bytes), as the attempt log keeps it. */
  private bodySoFar(): string {
    return recordable(this.chunks.length === 1 ? this.chunks[0]!.toString('utf8') : Buffer.concat(this.chunks).toString('utf8'));
  }

  private settle(outcome: AttemptOutcome): void {
    this.settled = true;
    // Settled attempts wait in `Deadlines` until swept: keep them small.
    this.chunks = [];
    this.controller = null;
    this.resolve(outcome);
  }

  private elapsed(): number {
    return Math.round(performance.now() - this.started);
  }
}

/**
 * Posts deliveries with undici: keep-alive agents with a pool per receiver (origin) of at most `connections`
 * (the worker's per-receiver share; no ceiling across receivers), a total timeout per attempt, redirects
 * never followed (a 3xx is a failure), and — unless `allowPrivate` is true — every address checked after DNS
 * resolution. Direct sends (test sends) go through an agent of their own.
 *
 * @example
 * const sender = createSender({ timeoutMs: 10_000, allowPrivate: false, connections: 64 });
 * const outcome = await sender.send({ url, body, event, deliveryId, secret, timestamp });
 */
export function createSender(options: { timeoutMs: number; allowPrivate: AllowPrivate; connections?: number }): Sender {
  const agentOptions = {
    keepAliveTimeout: 4_000,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    connect: { timeout: options.timeoutMs, ...(options.allowPrivate === true ? {} : { lookup: guardedLookup(options.allowPrivate) }) },
  };
  const agent = new Agent({ ...agentOptions, connections: options.connections ?? 64 });
  // Made on the first test send; its pools have no connection limit (test sends are one per user action).
  let directAgent: InstanceType<typeof Agent> | undefined;
  const deadlines = new Deadlines();
  const targets = new Map<string, Target>();

  /** The URL parsed and checked (`parseAttemptUrl`, a pure check of the URL); only URLs that pass are kept. */
  function targetOf(href: string): Target {
    let target = targets.get(href);
    if (target === undefined) {
      const url = parseAttemptUrl(href, options.allowPrivate);
      target = { origin: url.origin, path: `${url.pathname}${url.search}` };
      if (targets.size >= TARGET_CACHE_SIZE) targets.clear();
      targets.set(href, target);
    }
    return target;
  }

  function send(delivery: OutgoingDelivery, sendOptions?: { direct?: boolean }): Promise<AttemptOutcome> {
    return new Promise((resolve) => {
      const attempt = new Attempt(performance.now(), options.timeoutMs, (outcome) => {
        outcome.requestHeaders = headers;
        resolve(outcome);
      });
      let target: Target;
      // The bytes once: signed and sent as they are (a string would be encoded to UTF-8 by the HMAC, for the
      // content-length and again for the socket).
      const body = Buffer.from(delivery.body, 'utf8');
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        'x-svc-event': delivery.event,
        'x-svc-delivery': delivery.deliveryId,
        'webhook-id': delivery.deliveryId,
        'webhook-timestamp': String(delivery.timestamp),
      };
      try {
        target = targetOf(delivery.url);
        if (delivery.secret) {
          headers['x-svc-signature'] = signBody(body, delivery.secret);
          headers['webhook-signature'] = signStandard(body, delivery.deliveryId, delivery.timestamp, delivery.secret, delivery.previousSecret);
        }
      } catch (err) {
        attempt.fail(err);
        return;
      }
      deadlines.add(attempt);
      // Errors, thrown ones included, reach the handler's onResponseError.
      const dispatcher = sendOptions?.direct ? (directAgent ??= new Agent(agentOptions)) : agent;
      dispatcher.dispatch({ origin: target.origin, path: target.path, method: 'POST', headers, body }, attempt);
    });
  }

  return {
    send,
    async close() {
      deadlines.close();
      await Promise.all([agent.close(), directAgent?.close()]);
    },
  };
}

/**
 * Where a receiver's redirect points, for the attempt's error: the URL to set instead (a trailing slash, http to
 * https), cut to 200 characters; nothing without a Location.
 */
function redirectTarget(location: string | string[] | undefined): string {
  const value = Array.isArray(location) ? location[0] : location;
  if (!value) return '';
  return `: it points to ${value.length > 200 ? `${value.slice(0, 200)}…` : value}`;
}
