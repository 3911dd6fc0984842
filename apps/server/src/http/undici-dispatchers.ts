import { Agent, buildConnector, Client, Dispatcher, errors, Pool } from 'undici';

/** undici's `Pool`, `Client`, `Agent` and the `Dispatcher` they extend, its connector and its errors, from its public entry point: what svc's upstream calls and webhook attempts send through. */
export { Agent, buildConnector, Client, Dispatcher, errors, Pool };

/**
 * Sends one request through `dispatcher` (a `Pool`, an `Agent`, a test's `MockAgent`).
 *
 * @example
 * const { statusCode, body } = await request(pool, { origin, path: '/v1/models', method: 'GET' });
 */
export function request(dispatcher: Dispatcher, options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData> {
  return dispatcher.request(options);
}
