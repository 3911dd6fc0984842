import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { signBody } from './signer.js';
import { assertAllowedUrl, guardedLookup } from './url-guard.js';

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
}

/** What one attempt did. Never an exception: failures are outcomes. */
export interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
  /** From a `Retry-After` header, when the receiver sent one. */
  retryAfterMs?: number;
}

export interface Sender {
  send(delivery: OutgoingDelivery): Promise<AttemptOutcome>;
  close(): Promise<void>;
}

/** The server's version, from the nearest @svc/server package.json (src/ and bundled dist/ alike). */
function serverVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
        if (pkg.name === '@svc/server' && pkg.version) return pkg.version;
      } catch {
        // Not ours or unreadable: keep looking upwards.
      }
    }
    dir = dirname(dir);
  }
  return '0.0.0';
}

export const USER_AGENT = `svc-webhooks/${serverVersion()}`;

/** Milliseconds to wait from a `Retry-After` value (delta-seconds or HTTP-date). */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function describeError(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `timed out after ${timeoutMs} ms`;
  let current: unknown = err;
  // undici wraps socket errors; the innermost cause says what happened (refused, reset, SSRF guard).
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    if (current.name === 'WebhookAddressRefusedError') return current.message;
    if (!(current.cause instanceof Error)) break;
    current = current.cause;
  }
  const e = current as { code?: string; message?: string; name?: string };
  const code = e.code && !String(e.message).includes(e.code) ? `${e.code}: ` : '';
  return `${code}${e.message ?? String(current)}`;
}

/**
 * Posts deliveries with undici: one shared keep-alive agent, a total timeout per attempt, redirects never
 * followed (a 3xx is a failure), and — unless `allowPrivate` — every address checked after DNS resolution.
 *
 * @example
 * const sender = createSender({ timeoutMs: 10_000, allowPrivate: false });
 * const outcome = await sender.send({ url, body, event, deliveryId, secret });
 */
export function createSender(options: { timeoutMs: number; allowPrivate: boolean; connections?: number }): Sender {
  const agent = new Agent({
    connections: options.connections ?? 128,
    keepAliveTimeout: 4_000,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    connect: { timeout: options.timeoutMs, ...(options.allowPrivate ? {} : { lookup: guardedLookup }) },
  });

  async function send(delivery: OutgoingDelivery): Promise<AttemptOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, options.timeoutMs);
    try {
      const url = new URL(delivery.url);
      assertAllowedUrl(url, options.allowPrivate);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        'x-svc-event': delivery.event,
        'x-svc-delivery': delivery.deliveryId,
      };
      if (delivery.secret) headers['x-svc-signature'] = signBody(delivery.body, delivery.secret);
      const response = await request(url, {
        method: 'POST',
        headers,
        body: delivery.body,
        dispatcher: agent,
        signal: controller.signal,
      });
      const chunks: Buffer[] = [];
      let kept = 0;
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        if (kept < RESPONSE_BODY_LIMIT) {
          chunks.push(chunk.subarray(0, RESPONSE_BODY_LIMIT - kept));
          kept += Math.min(chunk.length, RESPONSE_BODY_LIMIT - kept);
        }
        if (kept >= RESPONSE_BODY_LIMIT) {
          // The rest is not needed; dropping the connection is cheaper than reading a large body.
          response.body.destroy();
          break;
        }
      }
      const statusCode = response.statusCode;
      const ok = statusCode >= 200 && statusCode < 300;
      const responseBody = chunks.length ? Buffer.concat(chunks).toString('utf8') : '';
      const retryAfterMs = ok ? undefined : parseRetryAfter(response.headers['retry-after'], Date.now());
      let error: string | null = null;
      if (!ok) {
        error = statusCode >= 300 && statusCode < 400 ? `HTTP ${statusCode} (redirects are not followed)` : `HTTP ${statusCode}`;
      }
      return { ok, statusCode, durationMs: elapsed(), error, responseBody, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    } catch (err) {
      return { ok: false, statusCode: null, durationMs: elapsed(), error: describeError(err, timedOut, options.timeoutMs), responseBody: null };
    } finally {
      clearTimeout(timer);
    }
  }

  return { send, close: () => agent.close() };
}
