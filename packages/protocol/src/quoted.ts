// No zod here: the delivery list's query parser (a zod-free entry) quotes with it too.
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
  return value.length > MAX_QUOTED_CHARS ? `${value.slice(0, MAX_QUOTED_CHARS)}…` : value;
}
