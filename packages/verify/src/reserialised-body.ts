import { toBytes, type RawBody } from './raw-body.js';

const decoder = new TextDecoder();

/** Bodies up to this size are parsed to tell a re-serialised one apart; svc's deliveries are mostly far smaller. */
const NOTE_MAX_BYTES = 1024 * 1024;

/** Base64 of a JSON object (`{"` encodes as `eyJ`): what AWS API Gateway and Lambda URLs hand over with `isBase64Encoded`. */
const BASE64_JSON = /^eyJ[A-Za-z0-9+/]*={0,2}$/;
const BASE64_NOTE =
  " The body is base64-encoded JSON (AWS API Gateway or a Lambda function URL sets event.isBase64Encoded): verify the decoded bytes, Buffer.from(event.body, 'base64').";

/**
 * What a signature mismatch adds when the body is JSON but not as svc sends it. svc sends `JSON.stringify` of the
 * payload: compact, no spaces, non-ASCII as UTF-8. A body that parses and stringifies to other bytes was changed
 * on the way in — a framework's parser re-serialised it (Python's `json.dumps` puts a space after `:` and escapes
 * non-ASCII, a pretty-printer adds line breaks, some append a newline) — which is the cause to name, not the secret.
 * A body that is base64 of JSON was never decoded (AWS's `isBase64Encoded`).
 */
export function reserialisedNote(rawBody: RawBody): string {
  // A forged delivery is refused anyway: a large one is not parsed a second time only to word its refusal.
  if ((typeof rawBody === 'string' ? rawBody.length : toBytes(rawBody).byteLength) > NOTE_MAX_BYTES) return '';
  const text = typeof rawBody === 'string' ? rawBody : decoder.decode(toBytes(rawBody));
  let compact: string;
  try {
    compact = JSON.stringify(JSON.parse(text));
  } catch {
    return BASE64_JSON.test(text) ? BASE64_NOTE : '';
  }
  if (compact === text) return '';
  let at = 0;
  // They differ, so the loop stops at the first difference or where the shorter one ends.
  while (text[at] === compact[at]) at++;
  // The two characters only, never the text around them: receivers log this message, and the body holds prompts.
  const shown = (c: string | undefined) => (c === undefined ? 'its end' : JSON.stringify(c));
  return (
    ` The body is not byte for byte what svc sends (compact JSON: no spaces or line breaks between fields, non-ASCII ` +
    `as UTF-8, nothing after it); it differs at character ${at}, ${shown(text[at])} where compact JSON has ` +
    `${shown(compact[at])}: a body parser or framework re-serialised it before verification. Verify the raw request bytes as received.`
  );
}
