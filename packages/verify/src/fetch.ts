import type { AuditPayload } from './audit-payload.js';
import type { ConstructEventOptions } from './construct-event.js';
import type { Secret } from './secrets.js';
import { constructDelivery } from './web/construct-event.js';
import { errorBody, type WebhookVerificationError } from './webhook-verification-error.js';

export type { AuditPayload, ConstructEventOptions, Secret };
export { WebhookVerificationError, errorBody, type WebhookErrorBody, type WebhookVerificationErrorCode } from './webhook-verification-error.js';

/**
 * Verifies a Fetch API `Request` (Next.js route handlers, Hono's `c.req.raw`, Cloudflare Workers, Deno,
 * Bun) and resolves to its typed payload. Reads the body itself, so call it before anything else reads
 * the body. Rejects with `WebhookVerificationError` for an untrusted delivery (answer it with
 * `errorResponse(err)`), TypeError for misuse.
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
export async function verifyRequest(request: Request, secret: Secret, options?: ConstructEventOptions): Promise<AuditPayload> {
  if (request.bodyUsed) {
    throw new TypeError(
      '[@svc/verify] The request body was already read (request.json(), request.text(), a validator or body-parsing ' +
        'middleware), so the exact signed bytes are gone. Call verifyRequest(request, secret) before anything reads ' +
        'the body, or pass request.clone() to whatever reads it first.',
    );
  }
  const body = new Uint8Array(await request.arrayBuffer());
  return constructDelivery(body, request.headers, secret, options);
}

/**
 * The `Response` to answer a rejected delivery with: the error's status (400/401) and svc's JSON error body.
 *
 * @example
 * if (err instanceof WebhookVerificationError) return errorResponse(err);
 */
export function errorResponse(err: WebhookVerificationError): Response {
  return Response.json(errorBody(err), { status: err.status });
}
