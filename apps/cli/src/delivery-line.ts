import type { AuditPayload } from '@svc/protocol';
import { clockTime, kleur, mark, shown, visibleLength } from './output.js';
import { shortId, truncate } from './short-id.js';
import type { SendOutcome } from './send-delivery.js';

interface Detail {
  text: string;
  /** Details with a drop rank are left out, lowest rank first, when the line would pass `width` columns. */
  drop?: number;
}

/**
 * One line per received delivery. With a `width` (a terminal's, `lineWidth`) it fits that many columns:
 * `12:03:04  --> llm.request.completed [chatcmpl-3Jx0…]  200 · 46 tok · not grounded · sig ✔`
 * (request id cut, latency then tokens left out when there is no room). Without one (a pipe, a file, `--wide`)
 * it holds everything:
 * `12:03:04  --> llm.request.completed [chatcmpl-…]  svc01 200 · 12+34=46 tokens · 532 ms · grounded (hallucination 0.07) · test · signature ✔  whd_…`
 * (`refused` after the verdict when the model refused: the payload's `refusal`, its `response_text` ""; a
 * `/v1/responses` call's `response_id` last).
 *
 * Fields missing from the body are left out, so a body that is not an audit payload still prints. Text from the
 * request (event, ids, model) is printed with `shown`: a sender, trusted or not, cannot drive the terminal, and a value
 * of megabytes is cut to its first 128 characters.
 */
export function formatReceivedLine(input: {
  time: Date;
  body: Buffer;
  headers: Record<string, string | string[] | undefined>;
  signature: 'valid' | 'invalid' | 'unchecked';
  /** Columns to fit; `undefined` prints the whole line. */
  width?: number;
}): string {
  const width = input.width;
  const wide = width === undefined;
  const payload = parsePayload(input.body);
  const header = (name: string): string | undefined => {
    const value = input.headers[name];
    const first = Array.isArray(value) ? value[0] : value;
    return first === undefined ? undefined : shown(first);
  };
  const event = str(payload?.event) ?? header('x-svc-event') ?? 'unknown event';
  const head = `${clockTime(input.time)}  --> ${kleur.cyan(event)}`;
  const requestId = str(payload?.request_id);
  const details: Detail[] = [];

  if (!payload) {
    details.push({ text: kleur.yellow(wide ? `body is not a JSON object (${input.body.length} bytes)` : 'not JSON') });
  } else {
    const model = wide ? str(payload.model) : undefined;
    const status = num(payload.status_code);
    if (model || status !== undefined) details.push({ text: [model, status !== undefined ? String(status) : undefined].filter(Boolean).join(' ') });
    const inTokens = num(payload.input_tokens);
    const outTokens = num(payload.output_tokens);
    const total = num(payload.total_tokens);
    if (wide && (inTokens !== undefined || outTokens !== undefined || total !== undefined)) {
      details.push({ text: `${inTokens ?? '?'}+${outTokens ?? '?'}=${total ?? '?'} tokens` });
    } else if (total !== undefined) {
      details.push({ text: `${total} tok`, drop: 2 });
    }
    const latency = num(payload.latency_ms);
    if (latency !== undefined) details.push({ text: `${latency} ms`, drop: 1 });
    if (payload.grounding_checked === false) {
      // `grounded` is true by the payload's types when nothing was checked (no answer, no source): say so.
      details.push({ text: kleur.dim('not checked'), drop: 3 });
    } else if (typeof payload.grounded === 'boolean') {
      const score = num(payload.hallucination_score);
      const scoreText = wide && score !== undefined ? ` (hallucination ${score.toFixed(2)})` : '';
      details.push({ text: payload.grounded ? kleur.green(`grounded${scoreText}`) : kleur.red(`not grounded${scoreText}`) });
    }
    // A refusal's `response_text` is "": without this the line reads as an empty answer.
    if (typeof payload.refusal === 'string' && payload.refusal !== '') details.push({ text: kleur.yellow('refused') });
    if (payload.test === true) details.push({ text: kleur.yellow('test') });
    // A Responses API call: the id its app holds (`resp_…`), beside the request id in brackets.
    const responseId = wide ? str(payload.response_id) : undefined;
    if (responseId) details.push({ text: responseId });
  }
  if (input.signature !== 'unchecked') {
    details.push({ text: `${wide ? 'signature' : 'sig'} ${input.signature === 'valid' ? mark.ok() : mark.bad()}` });
  }
  const deliveryId = header('x-svc-delivery');

  if (width === undefined) {
    const parts = [requestId ? `${head} [${requestId}]` : head];
    if (details.length > 0) parts.push(details.map((d) => d.text).join(' · '));
    if (deliveryId) parts.push(kleur.dim(deliveryId));
    return `${parts.join('  ')}\n`;
  }

  // Leave out the droppable details until the request id keeps at least 14 characters.
  let kept = details;
  for (let rank = 0; ; rank++) {
    const detailText = kept.map((d) => d.text).join(' · ');
    const fixed = visibleLength(head) + (detailText ? 2 + visibleLength(detailText) : 0);
    const room = width - fixed - 3; // ' [' + ']'
    const droppable = kept.some((d) => d.drop !== undefined);
    if (!requestId || requestId.length <= room || room >= 14 || !droppable) {
      const id = requestId ? ` [${truncate(requestId, Math.max(room, 2))}]` : '';
      return `${head}${id}${detailText ? `  ${detailText}` : ''}\n`;
    }
    kept = kept.filter((d) => d.drop === undefined || d.drop > rank + 1);
  }
}

/**
 * `12:03:04  <-- [200] POST http://localhost:3000/webhooks [4b5c6d7e]`, or the failure; with a `width` (a
 * terminal's) the URL is cut to fit it; without one the line is whole, the full delivery id included.
 */
export function formatSentLine(time: Date, url: string, outcome: SendOutcome, deliveryId: string | null | undefined, width?: number): string {
  const wide = width === undefined;
  const id = deliveryId ? ` ${kleur.dim(`[${shown(wide ? deliveryId : shortId(deliveryId))}]`)}` : '';
  const fit = (before: string, after: string): string =>
    width === undefined ? `${before}${url}${after}` : `${before}${truncate(url, Math.max(width - visibleLength(before) - visibleLength(after), 20))}${after}`;
  if (!outcome.ok && outcome.status === null) {
    const before = `${clockTime(time)}  ${mark.bad()} POST `;
    if (width === undefined) return `${before}${url} failed: ${outcome.error}${id}\n`;
    // The URL says which target failed, so the delivery id, then the error text give way first.
    const failed = (shownId: string): string => {
      const errorRoom = width - visibleLength(before) - url.length - visibleLength(shownId) - ' failed: '.length;
      return ` failed: ${truncate(outcome.error, Math.max(errorRoom, 18))}${shownId}`;
    };
    const withId = failed(id);
    return `${fit(before, visibleLength(before) + url.length + visibleLength(withId) <= width ? withId : failed(''))}\n`;
  }
  const status = outcome.ok ? kleur.green(`[${outcome.status}]`) : kleur.red(`[${outcome.status}]`);
  const duplicate = outcome.ok && outcome.duplicate ? kleur.yellow(' duplicate') : '';
  return `${fit(`${clockTime(time)}  <-- ${status} POST `, `${id}${duplicate}`)}\n`;
}

function parsePayload(body: Buffer): Partial<Record<keyof AuditPayload, unknown>> | undefined {
  try {
    const value: unknown = JSON.parse(body.toString('utf8'));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Partial<Record<keyof AuditPayload, unknown>>) : undefined;
  } catch {
    return undefined;
  }
}

/** A non-empty string field of the body, as a line shows it (printable, cut short). */
function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? shown(value) : undefined;
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}
