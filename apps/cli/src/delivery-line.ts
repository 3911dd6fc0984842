import type { AuditPayload } from '@svc/protocol';
import { clockTime, kleur, mark } from './output.js';
import type { SendOutcome } from './send-delivery.js';

/**
 * `12:03:04  --> llm.request.completed [chatcmpl-…]  svc01 200 · 12+34=46 tokens · 532 ms · grounded (hallucination 0.07) · test · signature ✔  dlv_…`
 *
 * Fields missing from the body are left out, so a body that is not an audit payload still prints.
 */
export function formatReceivedLine(input: {
  time: Date;
  body: Buffer;
  headers: Record<string, string | string[] | undefined>;
  signature: 'valid' | 'invalid' | 'unchecked';
}): string {
  const payload = parsePayload(input.body);
  const header = (name: string): string | undefined => {
    const value = input.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const event = str(payload?.event) ?? header('x-svc-event') ?? 'unknown event';
  const parts: string[] = [];
  const head = `${clockTime(input.time)}  --> ${kleur.cyan(event)}`;
  const requestId = str(payload?.request_id);
  const details: string[] = [];

  if (!payload) {
    details.push(kleur.yellow(`body is not a JSON object (${input.body.length} bytes)`));
  } else {
    const model = str(payload.model);
    const status = num(payload.status_code);
    if (model || status !== undefined) details.push([model, status !== undefined ? String(status) : undefined].filter(Boolean).join(' '));
    const inTokens = num(payload.input_tokens);
    const outTokens = num(payload.output_tokens);
    const total = num(payload.total_tokens);
    if (inTokens !== undefined || outTokens !== undefined || total !== undefined) {
      details.push(`${inTokens ?? '?'}+${outTokens ?? '?'}=${total ?? '?'} tokens`);
    }
    const latency = num(payload.latency_ms);
    if (latency !== undefined) details.push(`${latency} ms`);
    if (typeof payload.grounded === 'boolean') {
      const score = num(payload.hallucination_score);
      const scoreText = score !== undefined ? ` (hallucination ${score.toFixed(2)})` : '';
      details.push(payload.grounded ? kleur.green(`grounded${scoreText}`) : kleur.red(`not grounded${scoreText}`));
    }
    if (payload.test === true) details.push(kleur.yellow('test'));
  }
  if (input.signature !== 'unchecked') details.push(`signature ${input.signature === 'valid' ? mark.ok() : mark.bad()}`);

  parts.push(requestId ? `${head} [${requestId}]` : head);
  if (details.length > 0) parts.push(details.join(' · '));
  const deliveryId = header('x-svc-delivery');
  if (deliveryId) parts.push(kleur.dim(deliveryId));
  return `${parts.join('  ')}\n`;
}

/** `12:03:04  <-- [200] POST http://localhost:3000/webhooks [dlv_…]`, or the failure. */
export function formatSentLine(time: Date, url: string, outcome: SendOutcome, deliveryId: string | null | undefined): string {
  const id = deliveryId ? ` ${kleur.dim(`[${deliveryId}]`)}` : '';
  if (!outcome.ok && outcome.status === null) return `${clockTime(time)}  ${mark.bad()} POST ${url} failed: ${outcome.error}${id}\n`;
  const status = outcome.ok ? kleur.green(`[${outcome.status}]`) : kleur.red(`[${outcome.status}]`);
  return `${clockTime(time)}  <-- ${status} POST ${url}${id}\n`;
}

function parsePayload(body: Buffer): Partial<Record<keyof AuditPayload, unknown>> | undefined {
  try {
    const value: unknown = JSON.parse(body.toString('utf8'));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Partial<Record<keyof AuditPayload, unknown>>) : undefined;
  } catch {
    return undefined;
  }
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}
