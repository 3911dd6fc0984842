import { request } from 'undici';
import { sign, signWebhook } from '@svc/verify';

export const SECRET = 'whsec_cli-test-secret';

/**
 * An audit payload serialised the way no JSON.stringify would (spacing, key order, an escaped
 * character): a receiver that re-serialised it would change the bytes and break the signature.
 */
export function samplePayload(requestId = 'test-0001'): string {
  return `{"event": "llm.request.completed","test":true, "request_id":"${requestId}","timestamp":"2025-01-02T03:04:05.678Z","user_id":"0d3f4a52-9a3c-4c44-8f0e-6f3e4b1a2c3d","model":"svc01","input_tokens":12,"output_tokens":34,"total_tokens":46,"latency_ms":532,"status_code":200,"streaming":false,"prompt":"user: caf\\u00e9?","response_text":"Café – yes.","grounded":false,"hallucination_score":0.25}`;
}

/** POSTs a delivery the way the server does: JSON body, X-Svc-* and webhook-* headers, signed when a secret is given. */
export async function postDelivery(
  url: string,
  body: string,
  options: { secret?: string; deliveryId?: string; timestamp?: number; standard?: boolean } = {},
): Promise<{ status: number; body: string; headers: Headers }> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'svc-webhooks/0.1.0',
    'x-svc-event': 'llm.request.completed',
    'x-svc-delivery': options.deliveryId ?? 'whd_00000000000000000000000000000001',
  };
  if (options.secret) headers['x-svc-signature'] = sign(body, options.secret);
  // As svc sends them now: the Standard Webhooks headers beside X-Svc-Signature (`standard: false` leaves them out).
  if (options.secret && options.standard !== false) {
    const id = headers['x-svc-delivery']!;
    const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
    Object.assign(headers, { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signWebhook(body, { id, timestamp }, options.secret) });
  }
  const response = await request(url, { method: 'POST', body, headers });
  const answered = new Headers();
  for (const [name, value] of Object.entries(response.headers)) if (value !== undefined) answered.set(name, Array.isArray(value) ? value.join(', ') : value);
  return { status: response.statusCode, body: await response.body.text(), headers: answered };
}
