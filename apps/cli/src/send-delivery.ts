import { request } from 'undici';
import { describeNetworkError } from './errors.js';

/** Headers a delivery carries to the next receiver: content type, user agent and every X-Svc-* header. */
export function deliveryHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value === undefined) continue;
    if (lower === 'content-type' || lower === 'user-agent' || lower.startsWith('x-svc-')) {
      picked[lower] = Array.isArray(value) ? value.join(', ') : value;
    }
  }
  return picked;
}

export type SendOutcome = { ok: true; status: number } | { ok: false; status: number | null; error: string };

/**
 * POSTs the exact body bytes to `url` (no redirects followed). Never throws: a network failure or a
 * non-2xx answer is an outcome the caller prints.
 *
 * @example
 * const outcome = await sendDelivery('http://localhost:3000/webhooks', body, deliveryHeaders(req.headers));
 */
export async function sendDelivery(url: string, body: Uint8Array, headers: Record<string, string>, timeoutMs = 10_000): Promise<SendOutcome> {
  try {
    const response = await request(url, { method: 'POST', body, headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    await response.body.dump();
    const status = response.statusCode;
    return status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: `answered ${status}` };
  } catch (err) {
    return { ok: false, status: null, error: describeNetworkError(err) };
  }
}
