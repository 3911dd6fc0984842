import type { FastifyPluginAsync } from 'fastify';
import type { AuditPayload } from './audit-payload.js';
import { assertLimit, DEFAULT_LIMIT } from './body-limit.js';
import { assertOptions, type ConstructEventOptions } from './construct-event.js';
import { assertDropGraceMs, claimedDelivery, DEFAULT_DROP_GRACE_MS, type ClaimedDelivery } from './claimed-delivery.js';
import { assertDeduper, deliveryId, delivered, duplicateAnswer, type Deduper } from './deduper.js';
import { constructDelivery } from './node/construct-event.js';
import { toSecretList, type Secret } from './secrets.js';
import { WebhookVerificationError, errorBody } from './webhook-verification-error.js';

export type { AuditPayload, ConstructEventOptions, Secret };
export { WebhookVerificationError, errorBody, type WebhookErrorBody, type WebhookVerificationErrorCode } from './webhook-verification-error.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified audit payload, set by `verifyPlugin` (also in `request.body`). */
    svcEvent?: AuditPayload;
  }
}

/** Options for `verifyPlugin`. */
export interface VerifyPluginOptions extends ConstructEventOptions {
  /** The signing secret, or several while rotating. */
  secret: Secret;
  /**
   * Largest body accepted, in bytes (Fastify answers 413 above it): a positive whole number, anything else throws
   * a TypeError when the plugin is registered. Default 64 MiB (a delivery holds the prompt and the answer).
   */
  bodyLimit?: number;
  /**
   * A deduper (`createDeduper()`): a delivery whose id was already processed is answered 200 with
   * `svc-duplicate: true` and never reaches the route. A delivery the route does not answer with a 2xx
   * (a thrown error, a 500) releases its id, so svc's retry of it is processed; so does a connection that closes
   * before the route answers (svc's timeout) once `dropGraceMs` has passed without an answer.
   */
  dedupe?: Deduper;
  /**
   * With `dedupe`: how long the id of a delivery whose connection closed before the route answered (svc's
   * timeout) stays claimed, in milliseconds; a positive number, anything else throws a TypeError when the plugin
   * is registered. Default 60,000. Meanwhile svc's retry is answered 409 and the route's answer decides as if svc
   * had waited; after it the id is released (a route that never answers), and a later 2xx records it as processed
   * unless svc's retry has claimed it.
   */
  dropGraceMs?: number;
}

const EMPTY = new Uint8Array(0);

const plugin: FastifyPluginAsync<VerifyPluginOptions> = async (fastify, options) => {
  const { secret, bodyLimit = DEFAULT_LIMIT, dedupe, dropGraceMs = DEFAULT_DROP_GRACE_MS, ...eventOptions } = options;
  toSecretList(secret);
  assertOptions(eventOptions);
  assertDeduper(dedupe);
  assertDropGraceMs(dropGraceMs);
  // Fastify itself takes NaN, Infinity, 0 or a string as no limit at all, and a negative one as "refuse every body".
  assertLimit(bodyLimit, 'bodyLimit');
  const claimed = new WeakMap<object, ClaimedDelivery>();

  // Bodies stay raw bytes in this scope: the signature covers those bytes, not a re-serialisation. Whatever type a
  // request claims: Fastify's text/plain parser decoded bytes that are not UTF-8 (a signed body then failed its
  // check), a type without a parser (none given, or a proxy's) was answered 415 before any check, and one the app
  // parses outside the scope (a form parser at its root) reached the check as an object, a 500.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, parsed) => parsed(null, body));

  // preValidation: before Fastify validates the body against the route's schema, which describes the event, not
  // the raw bytes (in a preHandler, a route with a body schema refused every delivery with 400).
  fastify.addHook('preValidation', async (request, reply) => {
    let event: AuditPayload;
    try {
      event = constructDelivery((request.body ?? EMPTY) as Uint8Array, request.headers, secret, eventOptions);
    } catch (err) {
      if (err instanceof WebhookVerificationError) return reply.code(err.status).send(errorBody(err));
      throw err;
    }
    const id = dedupe && deliveryId(request.headers);
    if (id) {
      if (!(await dedupe!.claim(id))) {
        const answer = duplicateAnswer(dedupe!, id);
        return reply.code(answer.status).headers(answer.headers).send(answer.body);
      }
      const claim = claimedDelivery(dedupe!, id, dropGraceMs);
      claimed.set(request, claim);
      // Closed before any answer (svc hung up on a route that is slow, or will never answer): released after the
      // grace period unless answered by then, so svc's retry is neither processed alongside a slow route nor
      // answered 409 until the TTL. After an answer this is ignored.
      if (reply.raw.destroyed) claim.dropped();
      else reply.raw.on('close', claim.dropped);
    }
    request.body = event;
    request.svcEvent = event;
  });

  // The route's answer decides, also one given after svc hung up (its timeout): Fastify runs onSend for it, not
  // onResponse, so a slow route's 2xx still records the id as processed (see `claimedDelivery`).
  fastify.addHook('onSend', async (request, reply, payload) => {
    const claim = claimed.get(request);
    if (claim === undefined) return payload;
    claimed.delete(request);
    await claim.settled(delivered(reply.statusCode));
    return payload;
  });
};

/**
 * Fastify plugin that verifies every request in the scope it is registered in: it keeps
 * bodies as raw bytes whatever their content type, verifies the delivery in a preValidation hook, and puts the typed
 * payload in `request.body` and `request.svcEvent` (so a route's body schema validates the event); untrusted deliveries get 401/400 with svc's JSON
 * error body. Register it in its own scope with the webhook route, so other routes keep Fastify's JSON parser.
 *
 * @example
 * app.register(async (scope) => {
 *   await scope.register(verifyPlugin, { secret: process.env.SVC_WEBHOOK_SECRET! });
 *   scope.post('/webhooks/svc', async (request, reply) => {
 *     console.log(request.svcEvent!.request_id);
 *     return reply.code(204).send();
 *   });
 * });
 */
export const verifyPlugin = Object.assign(plugin, {
  // What fastify-plugin sets: the parser and hook apply to the scope that registers the plugin.
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: '@svc/verify',
});
