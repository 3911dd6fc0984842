/**
 * Makes V8 keep `text` as one string: a string built by `+` is a tree of its pieces and the nodes joining them
 * (32 bytes each), kept whole as long as the string lives; reading a character flattens it in place. For
 * strings that live as long as a stream (a response's header block, a frame prefix), where the tree would cost
 * several times the text.
 */
export function flatten(text: string): string {
  if (text.length > 0) text.charCodeAt(0);
  return text;
}
