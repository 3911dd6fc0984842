/**
 * `text` as a request body that undici sends without keeping it. undici holds a string body (and a Buffer copy
 * of it) until the response ended, and a streamed response lasts as long as the answer: every open stream
 * would hold its prompt twice. An iterable is read once, and this one lets go of the text as it hands it over.
 *
 * A second read throws: svc does not replay an upstream call (a replay is a second paid LLM call), and an empty
 * body under the first content-length would only fail later with a cause nobody could name. (Over HTTP/2,
 * h2-upstream.ts reads it once too, and sends it again only on a stream the server refused unprocessed.)
 *
 * @example
 * await request(pool, { origin, path, method: 'POST', body: sentOnce(json), headers: { 'content-length': String(Buffer.byteLength(json)) } });
 */
export function sentOnce(text: string): Iterable<string> {
  let pending: string | null = text;
  return {
    *[Symbol.iterator]() {
      if (pending === null) throw new Error('The request body was already sent; svc does not replay upstream calls.');
      const out = pending;
      pending = null;
      yield out;
    },
  };
}
