/**
 * `retry-after` (whole seconds, rounded up) and `retry-after-ms` for a 429 whose cause clears in `ms`: the
 * OpenAI SDKs read `retry-after-ms` first and wait exactly that long.
 *
 * @example
 * throw new ApiError('rate_limit_exceeded', 'Retry after 12s.', { headers: retryAfterHeaders(11_200) });
 */
export function retryAfterHeaders(ms: number): Record<string, string> {
  const wait = Math.max(1, Math.ceil(ms));
  return { 'retry-after': String(Math.ceil(wait / 1000)), 'retry-after-ms': String(wait) };
}
