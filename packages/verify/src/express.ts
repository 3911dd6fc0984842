import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditPayload } from './audit-payload.js';
import { assertLimit, declaredOver, DEFAULT_LIMIT, payloadTooLarge } from './body-limit.js';
import { assertOptions, type ConstructEventOptions } from './construct-event.js';
import { assertDropGraceMs, claimedDelivery, DEFAULT_DROP_GRACE_MS } from './claimed-delivery.js';
import { assertDeduper, deliveryId, delivered, duplicateAnswer, type Deduper } from './deduper.js';
import { constructDelivery } from './node/construct-event.js';
import { isBytes } from './raw-body.js';
import { toSecretList, type Secret } from './secrets.js';
import { WebhookVerificationError, errorBody } from './webhook-verification-error.js';

export type { AuditPayload, ConstructEventOptions, Secret };
export { WebhookVerificationError, errorBody, type WebhookErrorBody, type WebhookVerificationErrorCode } from './webhook-verification-error.js';

declare global {
  namespace Express {
    interface Request {
      /** The verified audit payload, set by `verifyMiddleware` (also in `req.body`). */
      svcEvent?: AuditPayload;
    }
  }
}

/** Options for `verifyMiddleware`. */
export interface VerifyMiddlewareOptions extends ConstructEventOptions {
  /** The signing secret, or several while rotating. */
  secret: Secret;
  /** Largest body accepted, in bytes; larger deliveries get 413. Default 64 MiB (a delivery holds the prompt and the answer). */
  limit?: number;
  /**
   * A deduper (`createDeduper()`): a delivery whose id was already processed is answered 200 with
   * `svc-duplicate: true` and never reaches the route. A delivery the route does not answer with a 2xx
   * (an error, a 500) releases its id, so svc's retry of it is processed; so does a connection that closes
   * before the route answers (svc's timeout) once `dropGraceMs` has passed without an answer.
   */
  dedupe?: Deduper;
  /**
   * With `dedupe`: how long the id of a delivery whose connection closed before the route answered (svc's
   * timeout) stays claimed, in milliseconds; a positive number. Default 60,000. Meanwhile svc's retry is answered
   * 409 and the route's answer decides as if svc had waited; after it the id is released (a route that never
   * answers), and a later 2xx records it as processed unless svc's retry has claimed it.
   */
  dropGraceMs?: number;
}

/** The parts of an Express (or plain node:http) request the middleware uses. */
export type VerifiableRequest = IncomingMessage & { body?: unknown; rawBody?: unknown; svcEvent?: AuditPayload };

const BODY_ALREADY_PARSED =
  '[@svc/verify] req.body is already set, so a body parser (express.json(), express.urlencoded(), ...) read the ' +
  'request before verifyMiddleware and the exact signed bytes are gone. Put the webhook route before ' +
  "app.use(express.json()), e.g. app.post('/webhooks/svc', verifyMiddleware({ secret }), handler); app.use(express.json()); " +
  "or mount the parser only on other routes. express.raw({ type: 'application/json' }) or express.text({ type: 'application/json' }) before it is fine (the bytes or text are used as is). " +
  'In a Next.js pages/api route, turn its parser off: export const config = { api: { bodyParser: false } }.';

const STREAM_ALREADY_READ =
  '[@svc/verify] The request stream was already read by another middleware, so the exact signed bytes are gone. ' +
  'Mount verifyMiddleware before any middleware that reads the body.';

/**
 * Express middleware (works with plain node:http too) that reads the raw body itself, verifies
 * `X-Svc-Signature` and puts the typed payload in `req.body` and `req.svcEvent`. An untrusted delivery
 * is answered here (401 for signature problems, 400 for an unusable payload, 413 when too large) with
 * svc's JSON error body; misconfiguration goes to `next(err)` with an explanation.
 *
 * @example
 * app.post('/webhooks/svc', verifyMiddleware({ secret: process.env.SVC_WEBHOOK_SECRET! }), (req, res) => {
 *   console.log(req.svcEvent!.request_id);
 *   res.sendStatus(204);
 * });
 */
export function verifyMiddleware(
  options: VerifyMiddlewareOptions,
): (req: VerifiableRequest, res: ServerResponse, next: (err?: unknown) => void) => Promise<void> {
  const { secret, limit = DEFAULT_LIMIT, dedupe, dropGraceMs = DEFAULT_DROP_GRACE_MS, ...eventOptions } = options;
  toSecretList(secret);
  assertOptions(eventOptions);
  assertDeduper(dedupe);
  assertDropGraceMs(dropGraceMs);
  assertLimit(limit);

  return async (req, res, next) => {
    let event: AuditPayload;
    try {
      event = constructDelivery(await rawBodyOf(req, limit), req.headers, secret, eventOptions);
    } catch (err) {
      if (err instanceof WebhookVerificationError) return sendJson(res, err.status, errorBody(err));
      return next(err);
    }
    const id = dedupe && deliveryId(req.headers);
    if (id) {
      let first: boolean;
      try {
        first = await dedupe!.claim(id);
      } catch (err) {
        return next(err);
      }
      if (!first) {
        const answer = duplicateAnswer(dedupe!, id);
        for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
        return sendJson(res, answer.status, answer.body);
      }
      // The route's own answer decides, also one given after svc hung up (its timeout): a slow route that ends
      // with a 2xx has processed the delivery, so svc's retry of it is a duplicate, not a second processing. Node
      // emits no event for an answer to a closed connection, hence the wrapped end().
      const claim = claimedDelivery(dedupe!, id, dropGraceMs);
      const end = res.end;
      res.end = function (this: ServerResponse, ...args: Parameters<ServerResponse['end']>) {
        res.end = end;
        // A failed release leaves the id claimed until its TTL; nothing here can report it, so it is not thrown.
        claim.settled(delivered(res.statusCode)).catch(() => {});
        return end.apply(this, args);
      } as ServerResponse['end'];
      // Closed before any answer (svc hung up on a route that is slow, or will never answer): released after the
      // grace period unless answered by then, so svc's retry is neither processed alongside a slow route nor
      // answered 409 until the TTL. After an answer this is ignored.
      if (res.destroyed) claim.dropped();
      else res.on('close', claim.dropped);
    }
    req.body = event;
    req.svcEvent = event;
    next();
  };
}

async function rawBodyOf(req: VerifiableRequest, limit: number): Promise<Uint8Array | string> {
  // express.json({ verify: (req, _res, buf) => { req.rawBody = buf } }) is a common way to keep the bytes, and
  // `req.rawBody = buf.toString()` (UTF-8: svc's JSON comes back exactly) as common.
  // Read as unknown: @koa/bodyparser's types declare every IncomingMessage's rawBody a string.
  const kept: unknown = req.rawBody;
  if (isBytes(kept) || typeof kept === 'string') return kept;
  if (isBytes(req.body)) return req.body;
  // express.text() decodes the bytes (UTF-8 unless the content type says otherwise): svc's UTF-8 JSON comes back
  // exactly, and anything that would not is a signature mismatch, never a pass.
  if (typeof req.body === 'string') return req.body;
  // Only a read stream means the bytes are gone: Express 4's parsers (body-parser 1) set req.body = {} on every
  // request, also one of a content type they skip (app.use(express.urlencoded()) and a JSON delivery).
  if (req.readableEnded) throw new TypeError(req.body === undefined ? STREAM_ALREADY_READ : BODY_ALREADY_PARSED);
  return readStream(req, limit);
}

function readStream(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (declaredOver(req.headers['content-length'], limit)) {
      // Node discards the unread rest of the body once the response ends.
      reject(payloadTooLarge(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Keep draining past the limit (ignoring the bytes) so the 413 reaches the sender on a live connection.
      if (size > limit) reject(payloadTooLarge(limit));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.end(JSON.stringify(body));
}
