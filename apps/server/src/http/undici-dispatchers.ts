import { createRequire } from 'node:module';
import type { Agent as UndiciAgent, Dispatcher, Pool as UndiciPool } from 'undici';

/**
 * undici's `Pool`, `Agent` and `request()`, loaded from their own modules. undici's index also loads its
 * fetch, WebSocket, EventSource, cache and mock modules: 5.1 MB of heap against 1.6 MB for these
 * (`node --expose-gc`, heap used after a full collection), kept for the life of the process and part of the
 * old generation the peak RSS is made of. The same classes and function; undici has no `exports` map, so these
 * are plain files of the package (pinned by package-lock.json; `undici-dispatchers.test.ts` checks they are
 * undici's own).
 */
const load = createRequire(import.meta.url);

export const Pool = load('undici/lib/dispatcher/pool.js') as typeof UndiciPool;
export type Pool = UndiciPool;
export const Agent = load('undici/lib/dispatcher/agent.js') as typeof UndiciAgent;
export type Agent = UndiciAgent;

const requestApi = load('undici/lib/api/api-request.js') as (this: Dispatcher, options: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;

/**
 * `dispatcher.request(options)` for any dispatcher (undici's index puts `request` on `Dispatcher.prototype`;
 * without the index the method is taken from its module).
 */
export function request(dispatcher: Dispatcher, options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData> {
  return requestApi.call(dispatcher, options);
}
