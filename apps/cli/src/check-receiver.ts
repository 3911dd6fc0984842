import { randomBytes, randomUUID } from 'node:crypto';
import type { AuditPayload } from '@svc/protocol';
import { AUDIT_EVENT } from '@svc/protocol/audit-event';
import { sign, signWebhook } from '@svc/verify';
import { describeNetworkError } from './errors.js';
import { loadUndici } from './load-undici.js';
import { redirectReason } from './send-delivery.js';
import { VERSION } from './version.js';

/**
 * The header a receiver sets (value `true`) on its 2xx answer to a delivery id it has already processed, so that
 * `check-receiver` can tell "de-duplicated" from "processed twice". `@svc/verify`'s de-duplication sets it.
 */
export const DUPLICATE_HEADER = 'svc-duplicate';

/** The cases, in the order they run. */
export const CHECK_CASES = [
  'valid',
  'exact-bytes',
  'large-body',
  'tampered-body',
  'wrong-signature',
  'missing-signature',
  'stale-timestamp',
  'unknown-secret',
  'duplicate',
  'rotation',
] as const;
export type CheckCaseId = (typeof CHECK_CASES)[number];

/** What one request of a case got back. */
export interface Answer {
  /** null: no answer (network error or timeout, see `error`). */
  status: number | null;
  /** The first 200 characters of the answer's body. */
  body: string;
  duplicate: boolean;
  error?: string;
  /** For a 3xx: where it points, and that nothing follows it. */
  redirect?: string;
}

export interface CaseResult {
  id: CheckCaseId;
  /** What was sent, in a few words. */
  sent: string;
  /** What a correct receiver answers. */
  expected: string;
  /** passed, failed, or skipped (`--skip`). */
  outcome: 'passed' | 'failed' | 'skipped';
  /** The answer the verdict rests on (the second one for `duplicate`); absent when skipped. */
  answer?: Answer;
  /** The delivery id sent. */
  delivery_id?: string;
  /** Why it failed, and what to change. */
  reason?: string;
}

export interface CheckReport {
  url: string;
  ok: boolean;
  passed: number;
  failed: number;
  skipped: number;
  duplicate_header: string;
  /**
   * Set when the first case could not connect at all (`connection refused`, `host not found`): the check stopped
   * there, as every other case would fail the same way; `cases` has the cases run.
   */
  unreachable?: string;
  /**
   * Set when the first case, a delivery that must be accepted, was answered with a redirect, 404 or 405: nothing
   * takes deliveries at this URL (a path prefix left out, a trailing slash, http for https), so the check stopped
   * there, as the refusal cases would "pass" on a 404 that checked no signature. Says why and what to check.
   */
  wrong_url?: string;
  cases: CaseResult[];
}

export interface CheckOptions {
  url: string;
  /** The receiver's current signing secret. */
  secret: string;
  timeoutMs: number;
  skip: ReadonlySet<CheckCaseId>;
  /** Called after each case, for output as the check goes. */
  onCase?: (result: CaseResult) => void;
  /** For tests: the clock. */
  now?: () => number;
}

const STALE_SECONDS = 600;

/**
 * The `large-body` case's size: a delivery holds the request's prompt (up to svc's 10 MiB request limit) and the
 * answer, so a receiver must take more than 10 MiB; body parsers' defaults (100 KB in Express's, 1 MB in Koa's
 * and Fastify's, nginx's 1 MB) refuse such a delivery at every attempt.
 */
export const LARGE_BODY_BYTES = 12 * 1024 * 1024;
const BODY_PREVIEW = 200;

/** `whd_` + 32 hex: a delivery id of the form svc gives them. */
export function deliveryId(): string {
  return `whd_${randomBytes(16).toString('hex')}`;
}

function otherSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

let sequence = 0;

/** A realistic `llm.request.completed` payload (not a test delivery: it has a `sequence`, no `test`). */
export function samplePayload(now: number, prompt = 'user: What is the capital of France?'): AuditPayload {
  sequence += 1;
  return {
    event: AUDIT_EVENT,
    request_id: `chatcmpl-${randomBytes(12).toString('hex')}`,
    timestamp: new Date(now).toISOString(),
    user_id: randomUUID(),
    model: 'gpt-4o-mini',
    input_tokens: 14,
    output_tokens: 8,
    total_tokens: 22,
    latency_ms: 812,
    status_code: 200,
    streaming: false,
    prompt,
    response_text: 'The capital of France is Paris.',
    grounded: true,
    hallucination_score: 0.03,
    sequence,
    grounding_checked: true,
    flagged_spans: [],
  };
}

interface Delivery {
  id: string;
  body: Buffer;
  headers: Record<string, string>;
}

/**
 * The delivery svc would send: the body's bytes, `X-Svc-*` and the Standard Webhooks headers, signed with
 * `secrets` (the first one also signs `X-Svc-Signature`, as the server signs it with the current secret only).
 */
function signedDelivery(body: Buffer, secrets: string[], options: { id?: string; timestamp: number }): Delivery {
  const id = options.id ?? deliveryId();
  return {
    id,
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': `svc-webhooks/${VERSION} (svc-cli check-receiver)`,
      'x-svc-event': AUDIT_EVENT,
      'x-svc-delivery': id,
      'x-svc-signature': sign(body, secrets[0]!),
      'webhook-id': id,
      'webhook-timestamp': String(options.timestamp),
      'webhook-signature': signWebhook(body, { id, timestamp: options.timestamp }, secrets),
    },
  };
}

async function send(url: string, delivery: Delivery, timeoutMs: number): Promise<Answer> {
  const { request } = await loadUndici();
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const response = await request(url, {
      method: 'POST',
      body: delivery.body,
      headers: delivery.headers,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal,
    });
    const duplicate = String(response.headers[DUPLICATE_HEADER] ?? '').trim().toLowerCase() === 'true';
    // An HTML error page (Express's default error handler) is read further: its message comes after the markup.
    const html = /html/i.test(String(response.headers['content-type'] ?? ''));
    let text = '';
    for await (const chunk of response.body) {
      text += Buffer.from(chunk as Uint8Array).toString('utf8');
      if (text.length >= (html ? HTML_READ : BODY_PREVIEW)) break;
    }
    await response.body.dump().catch(() => undefined);
    const redirect = redirectReason(url, response.statusCode, response.headers.location);
    return { status: response.statusCode, body: (html ? htmlText(text) : text).slice(0, BODY_PREVIEW), duplicate, ...(redirect ? { redirect } : {}) };
  } catch (err) {
    const timedOut = signal.aborted || (err as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT' || (err as { code?: string }).code === 'UND_ERR_BODY_TIMEOUT';
    return { status: null, body: '', duplicate: false, error: timedOut ? `no answer within ${timeoutMs} ms` : describeNetworkError(err) };
  }
}

const HTML_READ = 4096;
const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', '#39': "'", '#x27': "'", nbsp: ' ' };

/** The text of an HTML page on one line: what its markup says, not the markup. */
function htmlText(html: string): string {
  return html
    .replace(/<(script|style)[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&(lt|gt|amp|quot|#39|#x27|nbsp);/g, (_, name: string) => ENTITIES[name]!)
    .replace(/\s+/g, ' ')
    .trim();
}

const is2xx = (a: Answer): boolean => a.status !== null && a.status >= 200 && a.status < 300;
const is4xx = (a: Answer): boolean => a.status !== null && a.status >= 400 && a.status < 500;

function got(answer: Answer): string {
  return answer.status === null ? (answer.error ?? 'no answer') : `answered ${answer.status}`;
}

/**
 * Why an answer to a delivery that must be accepted says the URL is not the receiver's: a redirect (svc follows none),
 * or no POST route at this path. Undefined for any other answer.
 */
function wrongUrl(url: string, answer: Answer): string | undefined {
  const { status } = answer;
  if (status !== null && status >= 300 && status < 400) return `${got(answer)}, ${answer.redirect ?? 'a redirect: svc follows no redirects'}`;
  if (status === 404 || status === 405) {
    return (
      `${got(answer)}: nothing takes a POST at ${new URL(url).pathname} there. Check the path: the prefix the app or a proxy ` +
      'mounts the route under (/api…), a trailing slash, the route\'s method'
    );
  }
  return undefined;
}

/** Failure reason when a delivery that must be accepted was not. */
function mustAccept(answer: Answer, why: string, url: string): string | undefined {
  if (is2xx(answer)) return undefined;
  if (answer.status === null) return `${got(answer)}: a receiver must answer within svc's timeout, or svc retries`;
  const wrong = wrongUrl(url, answer);
  if (wrong !== undefined) return wrong;
  if (answer.status >= 500) {
    // A crash, not a refusal: what it said is the lead (with @svc/verify, a TypeError naming the misplaced body parser).
    const said = answer.body === '' ? '' : ` (it said: ${answer.body})`;
    return `${got(answer)} to a correctly signed delivery: the receiver failed${said}. See its log; a body parser (express.json()) run before the verification is the usual cause`;
  }
  return `${got(answer)} to a correctly signed delivery: ${why}`;
}

/** Failure reason when a delivery that must be refused was not refused with a 4xx. */
function mustRefuse(answer: Answer, why: string): string | undefined {
  if (is4xx(answer)) return undefined;
  if (answer.status === null) return `${got(answer)}: refuse at once with 4xx`;
  if (is2xx(answer)) return `accepted it (${answer.status}): ${why}`;
  return `${got(answer)}: refuse with 4xx (401 or 400); ${answer.status >= 500 ? 'a 5xx makes svc retry a delivery that can never verify' : 'anything else is not a refusal'}`;
}

/**
 * Sends the receiver at `url` one signed fixture (two for `duplicate`) per case and reports, case by case,
 * whether it answered as a correct receiver must. Never throws for the receiver's behaviour: a refused
 * connection or a hang is a failed case.
 *
 * @example
 * const report = await checkReceiver({ url: 'http://localhost:3000/webhooks', secret, timeoutMs: 5000, skip: new Set() });
 * if (!report.ok) process.exitCode = 1;
 */
export async function checkReceiver(options: CheckOptions): Promise<CheckReport> {
  const { url, secret, timeoutMs, skip } = options;
  const nowMs = options.now ?? Date.now;
  const seconds = (): number => Math.floor(nowMs() / 1000);
  const json = (payload: AuditPayload): Buffer => Buffer.from(JSON.stringify(payload));
  const fresh = (secrets: string[] = [secret]): Delivery => signedDelivery(json(samplePayload(nowMs())), secrets, { timestamp: seconds() });

  const cases: Record<CheckCaseId, { sent: string; expected: string; run(): Promise<{ answer: Answer; id: string; reason?: string }> }> = {
    valid: {
      sent: 'signed with the secret',
      expected: '2xx',
      async run() {
        const d = fresh();
        const answer = await send(url, d, timeoutMs);
        return { answer, id: d.id, reason: mustAccept(answer, 'check the secret, and that the signature is checked over the raw body bytes', url) };
      },
    },
    'exact-bytes': {
      sent: 'signed, JSON with \\u00e9 escapes (not what a re-serialiser makes)',
      expected: '2xx',
      async run() {
        // Valid JSON that JSON.stringify(JSON.parse(body)) (or any other parser's round trip) does not reproduce
        // byte for byte: a receiver that verifies a re-serialised body refuses it.
        const text = JSON.stringify(samplePayload(nowMs(), 'user: Résumé of the café menu, please.')).replace(
          /[\u0080-\uffff]/g,
          (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
        );
        const d = signedDelivery(Buffer.from(text), [secret], { timestamp: seconds() });
        const answer = await send(url, d, timeoutMs);
        return {
          answer,
          id: d.id,
          reason: mustAccept(answer, 'verify the raw body bytes as received, before any JSON parsing; a re-serialised body is not what was signed', url),
        };
      },
    },
    'large-body': {
      sent: `signed, ${LARGE_BODY_BYTES / 1024 / 1024} MiB (a long prompt's delivery)`,
      expected: '2xx',
      async run() {
        const payload = samplePayload(nowMs(), 'user: ');
        const page = 'Quarterly report: revenue, costs and outlook, region by region. ';
        // The prompt fills the body to LARGE_BODY_BYTES (all ASCII: one byte a character).
        payload.prompt += page.repeat(Math.ceil(LARGE_BODY_BYTES / page.length)).slice(0, LARGE_BODY_BYTES - JSON.stringify(payload).length);
        const d = signedDelivery(json(payload), [secret], { timestamp: seconds() });
        const answer = await send(url, d, timeoutMs);
        const why =
          answer.status === 413
            ? "the receiver's body limit is below svc's largest deliveries (the prompt, up to svc's 10 MiB request limit, " +
              "and the answer): raise it to 64 MiB (express.raw({ type: 'application/json', limit: '64mb' }), @koa/bodyparser's " +
              "jsonLimit, Fastify's bodyLimit, nginx's client_max_body_size); @svc/verify's adapters take 64 MiB by default"
            : 'a delivery of a long prompt must be taken whole: check the body limits of the receiver and of any proxy before it';
        return { answer, id: d.id, reason: mustAccept(answer, why, url) };
      },
    },
    'tampered-body': {
      sent: 'body changed after signing',
      expected: '4xx',
      async run() {
        const d = fresh();
        d.body = Buffer.from(d.body.toString('utf8').replace(/"total_tokens":\d+/, '"total_tokens":1'));
        const answer = await send(url, d, timeoutMs);
        return { answer, id: d.id, reason: mustRefuse(answer, 'the signature must be checked over the exact body received') };
      },
    },
    'wrong-signature': {
      sent: 'signatures that match nothing',
      expected: '4xx',
      async run() {
        const d = fresh();
        d.headers['x-svc-signature'] = `sha256=${randomBytes(32).toString('hex')}`;
        d.headers['webhook-signature'] = `v1,${randomBytes(32).toString('base64')}`;
        const answer = await send(url, d, timeoutMs);
        return { answer, id: d.id, reason: mustRefuse(answer, 'compare the signature (in constant time) and refuse on mismatch') };
      },
    },
    'missing-signature': {
      sent: 'no X-Svc-Signature, no webhook-signature',
      expected: '4xx',
      async run() {
        const d = fresh();
        delete d.headers['x-svc-signature'];
        delete d.headers['webhook-signature'];
        const answer = await send(url, d, timeoutMs);
        return { answer, id: d.id, reason: mustRefuse(answer, 'an unsigned delivery must be refused, not waved through') };
      },
    },
    'stale-timestamp': {
      sent: `signed, webhook-timestamp ${STALE_SECONDS / 60} minutes old`,
      expected: '4xx',
      async run() {
        const then = nowMs() - STALE_SECONDS * 1000;
        const d = signedDelivery(json(samplePayload(then)), [secret], { timestamp: Math.floor(then / 1000) });
        const answer = await send(url, d, timeoutMs);
        return {
          answer,
          id: d.id,
          reason: mustRefuse(
            answer,
            'refuse a webhook-timestamp more than 5 minutes from now (a replay). A receiver verifying only X-Svc-Signature ' +
              '(GitHub style, no timestamp) fails this case by design: verify the Standard Webhooks headers ' +
              '(webhook-id, webhook-timestamp, webhook-signature) instead',
          ),
        };
      },
    },
    'unknown-secret': {
      sent: 'signed only with another secret',
      expected: '4xx',
      async run() {
        const d = fresh([otherSecret()]);
        const answer = await send(url, d, timeoutMs);
        return { answer, id: d.id, reason: mustRefuse(answer, 'a signature made with a secret the receiver does not hold must be refused') };
      },
    },
    duplicate: {
      sent: 'the same delivery id twice (a retry)',
      expected: `2xx, then 2xx with ${capitalise(DUPLICATE_HEADER)}: true`,
      async run() {
        const body = json(samplePayload(nowMs()));
        const first = signedDelivery(body, [secret], { timestamp: seconds() });
        const a1 = await send(url, first, timeoutMs);
        if (!is2xx(a1)) return { answer: a1, id: first.id, reason: `first delivery: ${mustAccept(a1, 'see the valid case', url)}` };
        if (a1.duplicate) return { answer: a1, id: first.id, reason: `the first delivery of a new id was answered as a duplicate (${capitalise(DUPLICATE_HEADER)}: true)` };
        const again = signedDelivery(body, [secret], { id: first.id, timestamp: seconds() });
        const a2 = await send(url, again, timeoutMs);
        let reason: string | undefined;
        if (!is2xx(a2)) reason = `${got(a2)} to the repeat: answer a delivery already processed with 2xx, or svc retries it until it gives up`;
        else if (!a2.duplicate) {
          reason =
            `duplicate processed twice: the repeat of ${first.id} was answered ${a2.status} without ${capitalise(DUPLICATE_HEADER)}: true. ` +
            'De-duplicate on webhook-id (= X-Svc-Delivery) and say so with that header; a receiver that de-duplicates silently can pass --skip duplicate';
        }
        return { answer: a2, id: first.id, reason };
      },
    },
    rotation: {
      sent: 'rotation overlap, webhook-signature "v1,<new> v1,<old>"',
      expected: '2xx',
      async run() {
        const d = fresh([secret, otherSecret()]);
        const answer = await send(url, d, timeoutMs);
        return {
          answer,
          id: d.id,
          reason: mustAccept(answer, 'webhook-signature may carry several space-separated signatures; accept when any of them matches', url),
        };
      },
    },
  };

  const results: CaseResult[] = [];
  let unreachable: string | undefined;
  let wrongUrlReason: string | undefined;
  for (const id of CHECK_CASES) {
    const { sent, expected, run } = cases[id];
    let result: CaseResult;
    if (skip.has(id)) {
      result = { id, sent, expected, outcome: 'skipped' };
    } else {
      const { answer, id: deliveryIdSent, reason } = await run();
      result = { id, sent, expected, outcome: reason ? 'failed' : 'passed', answer, delivery_id: deliveryIdSent, ...(reason ? { reason } : {}) };
    }
    results.push(result);
    options.onCase?.(result);
    const first = results.filter((r) => r.outcome !== 'skipped').length === 1;
    if (first && result.answer?.status === null && UNREACHABLE.has(result.answer.error ?? '')) {
      unreachable = result.answer.error;
      break;
    }
    if (first && result.answer !== undefined && MUST_ACCEPT.has(id)) {
      wrongUrlReason = wrongUrl(url, result.answer);
      if (wrongUrlReason !== undefined) break;
    }
  }
  const count = (outcome: CaseResult['outcome']): number => results.filter((r) => r.outcome === outcome).length;
  return {
    url,
    ok: count('failed') === 0,
    passed: count('passed'),
    failed: count('failed'),
    skipped: count('skipped'),
    duplicate_header: DUPLICATE_HEADER,
    ...(unreachable ? { unreachable } : {}),
    ...(wrongUrlReason ? { wrong_url: wrongUrlReason } : {}),
    cases: results,
  };
}

/** The cases whose delivery a correct receiver accepts. */
const MUST_ACCEPT: ReadonlySet<CheckCaseId> = new Set(['valid', 'exact-bytes', 'large-body', 'duplicate', 'rotation']);

/** Network errors that mean nothing listens at the URL (a timeout may be one slow case: the others still run). */
const UNREACHABLE = new Set(['connection refused', 'host not found']);

/** `svc-duplicate` → `Svc-Duplicate`, as it reads in prose. */
export function capitalise(header: string): string {
  return header.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase());
}
