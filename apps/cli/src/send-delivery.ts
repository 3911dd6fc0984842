import { DUPLICATE_HEADER } from '@svc/verify';
import { describeNetworkError } from './errors.js';
import { loadUndici } from './load-undici.js';
import { clockTime, kleur, printable } from './output.js';

/** Headers a delivery carries to the next receiver: content type, user agent and every X-Svc-* header. */
export function deliveryHeaders(headers: Record<string, string | string[] | undefined>, options: { standard?: boolean } = {}): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value === undefined) continue;
    if (lower === 'content-type' || lower === 'user-agent' || lower.startsWith('x-svc-') || (options.standard !== false && lower.startsWith('webhook-'))) {
      picked[lower] = Array.isArray(value) ? value.join(', ') : value;
    }
  }
  return picked;
}

/**
 * `body`: the first 2 KB of the receiver's answer, as text (what svc keeps of an attempt's answer too); `duplicate`:
 * a 2xx with `svc-duplicate: true`, the receiver had processed this delivery id already and did not again;
 * `headers`: the answer's headers that tell svc something (`retry-after`, `svc-duplicate`).
 */
export type SendOutcome =
  | { ok: true; status: number; body: string; duplicate?: boolean; headers?: Record<string, string> }
  | { ok: false; status: number | null; error: string; body: string; headers?: Record<string, string>; reason?: string };

/** Of a receiver's answer, the headers svc reads: when to retry, whether it was a duplicate. */
const ANSWER_HEADERS = ['retry-after', DUPLICATE_HEADER];

const ANSWER_BYTES = 2048;

/**
 * POSTs the exact body bytes to `url` (no redirects followed), giving the whole attempt, answer included, `timeoutMs`
 * (as svc's sender does): a receiver trickling its answer a byte at a time would otherwise hold it for as long as
 * each byte comes within the timeout. Never throws: a network failure, the timeout or a non-2xx answer is an outcome
 * the caller prints; so is `signal` aborting it (^C).
 *
 * @example
 * const outcome = await sendDelivery('http://localhost:3000/webhooks', body, deliveryHeaders(req.headers));
 */
export async function sendDelivery(url: string, body: Uint8Array, headers: Record<string, string>, timeoutMs = 10_000, signal?: AbortSignal): Promise<SendOutcome> {
  const { request } = await loadUndici();
  const deadline = AbortSignal.timeout(timeoutMs);
  try {
    const response = await request(url, {
      method: 'POST',
      body,
      headers,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: signal ? AbortSignal.any([signal, deadline]) : deadline,
    });
    const answer = await firstBytes(response.body, ANSWER_BYTES);
    const status = response.statusCode;
    const told: Record<string, string> = {};
    for (const name of ANSWER_HEADERS) {
      const value = response.headers[name];
      if (value !== undefined) told[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    if (status < 200 || status >= 300) {
      const reason = redirectReason(url, status, response.headers.location) ?? answerReason(answer);
      return { ok: false, status, error: `answered ${status}`, body: answer, headers: told, ...(reason === undefined ? {} : { reason }) };
    }
    return { ok: true, status, body: answer, headers: told, duplicate: String(response.headers[DUPLICATE_HEADER] ?? '').trim().toLowerCase() === 'true' };
  } catch (err) {
    if (deadline.aborted && !signal?.aborted) return { ok: false, status: null, error: 'timed out', body: '' };
    return { ok: false, status: null, error: describeNetworkError(err), body: '' };
  }
}

/** Up to `limit` bytes of a body as UTF-8 text; the rest is discarded, so the connection can be reused. */
async function firstBytes(body: AsyncIterable<Uint8Array> & { dump(): Promise<void> }, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(Buffer.from(chunk));
    size += chunk.length;
    if (size >= limit) break;
  }
  await body.dump().catch(() => undefined);
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

/**
 * A 3xx's reason: where it points. A trailing-slash or http→https redirect is the usual cause, and its body (often
 * empty, or "Found. Redirecting to …") does not say that nothing followed it.
 */
export function redirectReason(url: string, status: number, location: string | string[] | undefined): string | undefined {
  if (status < 300 || status >= 400 || typeof location !== 'string' || location === '') return undefined;
  let target = location;
  try {
    target = new URL(location, url).href;
  } catch {
    // Not a URL: shown as sent.
  }
  return `a redirect to ${target}: svc follows no redirects, nor do listen and replay; use that URL`;
}

const REASON_CHARS = 300;

/**
 * Why a receiver refused, from the start of its answer, for the terminal (svc's attempt log keeps the body, a
 * terminal showed only the status): svc's and @svc/verify's error shape `{ error: { code, message } }` as
 * `code: message`; `{ error: "…" }` or `{ message: "…" }`; a development error page's first line (Express shows the
 * thrown error in a `<pre>`); any other text's first line. `undefined` for an empty answer or an HTML page without one.
 *
 * @example
 * answerReason('{"error":{"message":"webhook-signature does not match…","code":"signature_mismatch"}}');
 * // 'signature_mismatch: webhook-signature does not match…'
 */
export function answerReason(body: string): string | undefined {
  const text = body.trim();
  if (text === '') return undefined;
  let reason: string | undefined;
  if (text.startsWith('<')) {
    const pre = /<pre>([\s\S]*?)(?:<br>|<\/pre>|$)/i.exec(text)?.[1];
    reason = pre === undefined ? undefined : decodeEntities(pre);
  } else {
    reason = jsonReason(text) ?? text;
  }
  const line = reason?.split('\n')[0]?.trim();
  if (!line) return undefined;
  return line.length > REASON_CHARS ? `${line.slice(0, REASON_CHARS - 1)}…` : line;
}

function jsonReason(text: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const record = value as { error?: unknown; message?: unknown } | null;
  if (typeof record !== 'object' || record === null) return undefined;
  if (typeof record.error === 'string') return record.error;
  const error = record.error as { message?: unknown; code?: unknown } | null | undefined;
  if (typeof error === 'object' && error !== null && typeof error.message === 'string') {
    return typeof error.code === 'string' ? `${error.code}: ${error.message}` : error.message;
  }
  return typeof record.message === 'string' ? record.message : undefined;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", nbsp: ' ' };

function decodeEntities(html: string): string {
  return html.replace(/&(amp|lt|gt|quot|#39|nbsp);/g, (_, name: string) => ENTITIES[name]!);
}

/** `12:03:04  ✘ the receiver answered 401: signature_mismatch: …`, after the `<-- [401]` line (stderr). */
export function refusedLine(time: Date, status: number | null, reason: string): string {
  return `${clockTime(time)}  ${kleur.red('✘')} the receiver answered ${status}: ${printable(reason)}\n`;
}
