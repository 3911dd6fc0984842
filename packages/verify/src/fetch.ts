import type { AuditPayload } from './audit-payload.js';
import { assertLimit, declaredOver, DEFAULT_LIMIT, payloadTooLarge } from './body-limit.js';
import { assertOptions, type ConstructEventOptions } from './construct-event.js';
import { assertDropGraceMs, claimedDelivery, DEFAULT_DROP_GRACE_MS } from './claimed-delivery.js';
import { assertDeduper, deliveryId, delivered, duplicateAnswer, type Deduper } from './deduper.js';
import { toSecretList, type Secret } from './secrets.js';
import { constructDelivery } from './web/construct-event.js';
import { WebhookVerificationError, errorBody } from './webhook-verification-error.js';

export type { AuditPayload, ConstructEventOptions, Secret };
export { WebhookVerificationError, errorBody, type WebhookErrorBody, type WebhookVerificationErrorCode } from './webhook-verification-error.js';

/** Options for `verifyRequest`. */
export interface VerifyRequestOptions extends ConstructEventOptions {
  /**
   * Largest body accepted, in bytes; a larger one is refused (413, `payload_too_large`) as soon as its
   * `content-length` or the bytes read so far pass it. Default 64 MiB (a delivery holds the prompt and the answer).
   */
  limit?: number;
}

/**
 * Verifies a Fetch API `Request` (Next.js route handlers, Hono's `c.req.raw`, Cloudflare Workers, Deno,
 * Bun) and resolves to its typed payload. Reads the body itself, up to `limit` bytes, so call it before
 * anything else reads the body. Rejects with `WebhookVerificationError` for an untrusted delivery (401, 400,
 * or 413 over the limit: answer it with `errorResponse(err)`), TypeError for misuse.
 *
 * @example
 * export async function POST(request: Request) {
 *   try {
 *     const event = await verifyRequest(request, process.env.SVC_WEBHOOK_SECRET!);
 *     return new Response(null, { status: 204 });
 *   } catch (err) {
 *     if (err instanceof WebhookVerificationError) return errorResponse(err);
 *     throw err;
 *   }
 * }
 */
export async function verifyRequest(request: Request, secret: Secret, options: VerifyRequestOptions = {}): Promise<AuditPayload> {
  const { limit = DEFAULT_LIMIT, ...eventOptions } = options;
  assertLimit(limit);
  if (request.bodyUsed) {
    throw new TypeError(
      '[@svc/verify] The request body was already read (request.json(), request.text(), a validator or body-parsing ' +
        'middleware), so the exact signed bytes are gone. Call verifyRequest(request, secret) before anything reads ' +
        'the body, or pass request.clone() to whatever reads it first.',
    );
  }
  return constructDelivery(await readBody(request, limit), request.headers, secret, eventOptions);
}

/** The body's bytes, read chunk by chunk and given up (the stream cancelled) once past `limit`. */
async function readBody(request: Request, limit: number): Promise<Uint8Array> {
  if (declaredOver(request.headers.get('content-length'), limit)) throw payloadTooLarge(limit);
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw payloadTooLarge(limit);
    }
    chunks.push(value);
  }
  const body = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/**
 * The `Response` to answer a rejected delivery with: the error's status (400/401/413) and svc's JSON error body.
 *
 * @example
 * if (err instanceof WebhookVerificationError) return errorResponse(err);
 */
export function errorResponse(err: WebhookVerificationError): Response {
  return Response.json(errorBody(err), { status: err.status });
}

/** Options for `createWebhookHandler`. */
export interface WebhookHandlerOptions extends VerifyRequestOptions {
  /** The signing secret, or several while rotating. */
  secret: Secret;
  /**
   * A deduper (`createDeduper()`): a delivery whose id was already processed is answered 200 with
   * `svc-duplicate: true` and never reaches the handler. A delivery the handler does not answer with a 2xx
   * (or rejects) releases its id, so svc's retry of it is processed; so does `request.signal` aborting before
   * the handler answers (runtimes abort it when the client goes: svc's timeout) once `dropGraceMs` has passed
   * without an answer.
   */
  dedupe?: Deduper;
  /**
   * With `dedupe`: how long the id of a delivery whose `request.signal` aborted before the handler answered
   * (svc's timeout) stays claimed, in milliseconds; a positive number. Default 60,000. Meanwhile svc's retry is
   * answered 409 and the handler's answer decides as if svc had waited; after it the id is released (a handler
   * that never answers), and a later 2xx records it as processed unless svc's retry has claimed it.
   */
  dropGraceMs?: number;
}

/**
 * A Fetch API route handler (Next.js, Hono's `c.req.raw`, Workers, Deno, Bun) that verifies the delivery,
 * answers an untrusted one with `errorResponse`, skips duplicates when given `dedupe`, and otherwise calls
 * `handler` with the typed payload and returns its response.
 *
 * @example
 * export const POST = createWebhookHandler(
 *   { secret: process.env.SVC_WEBHOOK_SECRET!, dedupe: createDeduper() },
 *   async (event) => {
 *     await save(event);
 *     return new Response(null, { status: 204 });
 *   },
 * );
 */
export function createWebhookHandler(
  options: WebhookHandlerOptions,
  handler: (event: AuditPayload, request: Request) => Response | Promise<Response>,
): (request: Request) => Promise<Response> {
  const { secret, dedupe, dropGraceMs = DEFAULT_DROP_GRACE_MS, ...eventOptions } = options;
  toSecretList(secret);
  assertOptions(eventOptions);
  assertLimit(eventOptions.limit ?? DEFAULT_LIMIT);
  assertDeduper(dedupe);
  assertDropGraceMs(dropGraceMs);
  if (typeof handler !== 'function') throw new TypeError('[@svc/verify] createWebhookHandler(options, handler) needs a handler function.');

  return async (request) => {
    let event: AuditPayload;
    try {
      event = await verifyRequest(request, secret, eventOptions);
    } catch (err) {
      if (err instanceof WebhookVerificationError) return errorResponse(err);
      throw err;
    }
    const respond = async (): Promise<Response> => {
      const response: unknown = await handler(event, request);
      if (typeof (response as { status?: unknown } | null | undefined)?.status !== 'number') {
        throw new TypeError(`[@svc/verify] createWebhookHandler's handler must return a Response, e.g. new Response(null, { status: 204 }); it returned ${response === null ? 'null' : typeof response}.`);
      }
      return response as Response;
    };
    const id = dedupe && deliveryId(request.headers);
    if (!id) return respond();
    if (!(await dedupe!.claim(id))) {
      const answer = duplicateAnswer(dedupe!, id);
      return Response.json(answer.body, { status: answer.status, headers: answer.headers });
    }
    const claim = claimedDelivery(dedupe!, id, dropGraceMs);
    // The client went before an answer (svc's timeout; runtimes that abort request.signal then): released after
    // the grace period unless answered by then, so svc's retry is neither processed alongside a slow handler nor
    // answered 409 until the TTL.
    const { signal } = request;
    if (signal.aborted) claim.dropped();
    else signal.addEventListener('abort', claim.dropped);
    let response: Response;
    try {
      // A handler returning no Response releases the id like one that throws; left claimed, every retry would get 409.
      response = await respond();
    } catch (err) {
      await claim.settled(false);
      throw err;
    } finally {
      signal.removeEventListener('abort', claim.dropped);
    }
    await claim.settled(delivered(response.status));
    return response;
  };
}
