/**
 * True for a plain JSON object (not null, not an array): what a parsed body or field must be before its
 * properties are read.
 *
 * @example
 * if (isRecord(json) && Array.isArray(json.choices)) …
 */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
