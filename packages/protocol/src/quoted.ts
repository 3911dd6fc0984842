// No zod here: the delivery list's query parser (a zod-free entry) quotes with it too, and this module is also
// the `@svc/protocol/quoted` entry the CLI loads without the schemas.
/** Characters of a request's value an error message quotes (an id or a name is far shorter). */
const MAX_QUOTED_CHARS = 128;

/**
 * A value from the request as an error message quotes it: cut to its first 128 characters (then `…`), so a
 * megabytes-long id, name or query value does not come back as a megabytes-long message.
 *
 * @example
 * `No response with id '${quoted(id)}'.` // a 1 MB id: its first 128 characters, then …
 */
export function quoted(value: string): string {
  if (value.length <= MAX_QUOTED_CHARS) return value;
  // Not between the two halves of a surrogate pair (an emoji): a lone half is an escape strict JSON readers refuse.
  const last = value.charCodeAt(MAX_QUOTED_CHARS - 1);
  return `${value.slice(0, last >= 0xd800 && last <= 0xdbff ? MAX_QUOTED_CHARS - 1 : MAX_QUOTED_CHARS)}…`;
}
