/** What a signature can be checked against: the body exactly as received. */
export type RawBody = string | Uint8Array | ArrayBuffer;

const HOW_TO_GET_THE_RAW_BODY =
  'Pass the raw request body (string, Buffer/Uint8Array or ArrayBuffer) exactly as received: a parsed ' +
  'JSON object cannot be verified, because re-serialising it changes the bytes that were signed. ' +
  "Express: app.post(path, express.raw({ type: 'application/json' }), handler) and pass req.body, or use " +
  "verifyMiddleware from '@svc/verify/express'. Fetch/Hono/Next.js: await request.text() or use verifyRequest " +
  "from '@svc/verify/fetch'. Fastify: register the plugin from '@svc/verify/fastify'. Koa with @koa/bodyparser: " +
  "ctx.request.rawBody. Next.js pages/api: " +
  "export const config = { api: { bodyParser: false } } and use verifyMiddleware (it reads req itself).";

const tag = (value: unknown): string => Object.prototype.toString.call(value);

/**
 * A Uint8Array (a Buffer too) from any realm. `instanceof` is per realm: Jest runs tests in a vm context whose
 * Uint8Array is not the one Node's Buffer extends (jest#4422), so `express.raw()`'s Buffer body failed
 * `instanceof Uint8Array` there, as do bytes from a vm context, a worker's or an iframe's.
 */
export function isBytes(value: unknown): value is Uint8Array {
  return ArrayBuffer.isView(value) && tag(value) === '[object Uint8Array]';
}

const arrayBufferByteLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength')!.get!;

/**
 * An ArrayBuffer from any realm (`request.arrayBuffer()` in a test environment with its own globals). The tag alone
 * is any object's to claim (`Symbol.toStringTag`): such a look-alike would be hashed as no bytes, a `false` where
 * misuse is a TypeError. The byteLength getter checks the buffer's internal slot, which every realm's has.
 */
export function isArrayBuffer(value: unknown): value is ArrayBuffer {
  return tag(value) === '[object ArrayBuffer]' && hasArrayBufferSlot(value);
}

function hasArrayBufferSlot(value: unknown): boolean {
  try {
    arrayBufferByteLength.call(value);
    return true;
  } catch {
    return false;
  }
}

/** Throws a TypeError explaining how to get the raw body unless `rawBody` is one. */
export function assertRawBody(rawBody: unknown): asserts rawBody is RawBody {
  if (typeof rawBody === 'string' || isBytes(rawBody) || isArrayBuffer(rawBody)) return;
  throw new TypeError(`[@svc/verify] rawBody must be the raw request body, got ${what(rawBody)}. ${HOW_TO_GET_THE_RAW_BODY}`);
}

const RAW_TYPE =
  "express.raw() reads only application/octet-stream unless given { type: 'application/json' }, and svc sends application/json";

/**
 * What was passed instead, with the usual cause: `undefined` and `{}` are mostly a body parser that skipped the
 * delivery's content type (Express 5 leaves req.body undefined, Express 4 sets it to {}), not a parsed body.
 */
function what(rawBody: unknown): string {
  if (rawBody === undefined) return `undefined: nothing read the body (${RAW_TYPE})`;
  if (rawBody === null) return 'null';
  if (typeof rawBody === 'object' && Object.getPrototypeOf(rawBody) === Object.prototype && Object.keys(rawBody).length === 0) {
    return `an empty object: a body parser skipped the request (Express 4's set req.body = {} then; ${RAW_TYPE})`;
  }
  return typeof rawBody;
}

const encoder = new TextEncoder();

/** The bytes a body stands for; strings are UTF-8, as svc sends them. */
export function toBytes(rawBody: RawBody): Uint8Array {
  if (typeof rawBody === 'string') return encoder.encode(rawBody);
  return isBytes(rawBody) ? rawBody : new Uint8Array(rawBody);
}
