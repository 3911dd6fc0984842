import { isUtf8 } from 'node:buffer';
import { nestsDeeperThan } from '../json-depth.js';

/** What is wrong with a body that is not JSON svc reads: nested too deep, not UTF-8, or not JSON. */
export type JsonBodyProblem = 'deep' | 'utf8' | 'json';

/**
 * A request body's bytes parsed as svc reads them: `{}` for an empty body (as body-parser), a UTF-8 byte-order
 * mark skipped (as its decoder does), else the problem, checked in that order. Pure, so that it runs alike on
 * the main thread and on the parse thread (json-parse-thread.ts).
 *
 * @example
 * parseBodyBytes(Buffer.from('{"a":1}')) // { value: { a: 1 } }
 */
export function parseBodyBytes(buffer: Uint8Array): { value: unknown } | { problem: JsonBodyProblem } {
  if (buffer.length === 0) return { value: {} };
  const bytes = Buffer.from(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  if (nestsDeeperThan(bytes)) return { problem: 'deep' };
  const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  // Invalid bytes would otherwise become U+FFFD silently: the text a model and an audit record see would not
  // be the text the client sent.
  if (!isUtf8(bytes.subarray(start))) return { problem: 'utf8' };
  try {
    return { value: JSON.parse(bytes.toString('utf8', start)) as unknown };
  } catch {
    return { problem: 'json' };
  }
}
