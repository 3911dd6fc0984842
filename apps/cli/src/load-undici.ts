/**
 * undici, loaded by the first request rather than at start-up: it is most of the CLI's start-up time, and
 * `--help`, `--version` and `listen` without `--forward-to` never send a request.
 *
 * @example
 * const { request } = await loadUndici();
 */
export function loadUndici(): Promise<typeof import('undici')> {
  return import('undici');
}
