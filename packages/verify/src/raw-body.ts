/** What a signature can be checked against: the body exactly as received. */
export type RawBody = string | Uint8Array | ArrayBuffer;

const HOW_TO_GET_THE_RAW_BODY =
  'Pass the raw request body (string, Buffer/Uint8Array or ArrayBuffer) exactly as received: a parsed ' +
  'JSON object cannot be verified, because re-serialising it changes the bytes that were signed. ' +
  "Express: app.post(path, express.raw({ type: 'application/json' }), handler) and pass req.body, or use " +
  "verifyMiddleware from '@svc/verify/express'. Fetch/Hono/Next.js: await request.text() or use verifyRequest " +
  "from '@svc/verify/fetch'. Fastify: register the plugin from '@svc/verify/fastify'.";

/** Throws a TypeError explaining how to get the raw body unless `rawBody` is one. */
export function assertRawBody(rawBody: unknown): asserts rawBody is RawBody {
  if (typeof rawBody === 'string' || rawBody instanceof Uint8Array || rawBody instanceof ArrayBuffer) return;
  const got = rawBody === null ? 'null' : typeof rawBody;
  throw new TypeError(`[@svc/verify] rawBody must be the raw request body, got ${got}. ${HOW_TO_GET_THE_RAW_BODY}`);
}

const encoder = new TextEncoder();

/** The bytes a body stands for; strings are UTF-8, as svc sends them. */
export function toBytes(rawBody: RawBody): Uint8Array {
  if (typeof rawBody === 'string') return encoder.encode(rawBody);
  return rawBody instanceof Uint8Array ? rawBody : new Uint8Array(rawBody);
}
