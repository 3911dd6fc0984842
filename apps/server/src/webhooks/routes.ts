import express, { type Request, type Response, type Router } from 'express';
import {
  DELIVERY_STATUSES,
  type Delivery,
  type DeliveryAttempt,
  type DeliveryDetail,
  type DeliveryList,
  type DeliveryStatus,
  type WebhookTestResult,
} from '@svc/protocol';
import { ApiError } from '../http/errors.js';
import type { ApiKeyRecord, KeysStore } from '../storage/keys-store.js';
import { type AttemptRow, type DeliveriesStore, type DeliveryRow } from '../storage/deliveries-store.js';
import type { WebhookActions } from './actions.js';

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;
const NO_URL_MESSAGE =
  'No webhook URL is configured for this API key. Set one in the dashboard under Settings, API Keys, then try again.';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A delivery row as the API shows it (design §5). */
export function toDelivery(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    object: 'webhook.delivery',
    event: row.event,
    request_id: row.request_id,
    url: row.url,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    created_at: new Date(row.created_at).toISOString(),
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    delivered_at: iso(row.delivered_at),
  };
}

function toAttempt(row: AttemptRow): DeliveryAttempt {
  return {
    attempt: row.attempt,
    attempted_at: new Date(row.attempted_at).toISOString(),
    status_code: row.status_code,
    duration_ms: row.duration_ms,
    error: row.error,
    response_body: row.response_body,
  };
}

function single(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ApiError('invalid_value', `'${name}' must be given once.`, { param: name });
  return value;
}

function parseListQuery(req: Request): { limit: number; status?: DeliveryStatus; before?: string } {
  const limitText = single(req, 'limit');
  let limit = DEFAULT_LIMIT;
  if (limitText !== undefined) {
    if (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > MAX_LIMIT) {
      throw new ApiError('invalid_value', `'limit' must be an integer from 1 to ${MAX_LIMIT}; got '${limitText}'.`, { param: 'limit' });
    }
    limit = Number(limitText);
  }
  const status = single(req, 'status');
  if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
    throw new ApiError('invalid_value', `'status' must be one of ${DELIVERY_STATUSES.join(', ')}; got '${status}'.`, { param: 'status' });
  }
  const before = single(req, 'before');
  if (before !== undefined && !/^whd_[0-9a-f]{32}$/.test(before)) {
    throw new ApiError('invalid_value', `'before' must be a delivery id (whd_…) from a previous page; got '${before}'.`, { param: 'before' });
  }
  return { limit, status: status as DeliveryStatus | undefined, before };
}

function notFound(id: string): ApiError {
  return new ApiError('not_found', `No webhook delivery '${id}' exists for this API key.`, { param: 'id' });
}

export interface RoutesDeps {
  deliveries: DeliveriesStore;
  keys: KeysStore;
  actions: WebhookActions;
}

/**
 * `/v1/webhooks`: the test endpoint and the deliveries API, every route scoped to the calling key.
 *
 * @example
 * v1.use('/webhooks', webhooksRouter(deps));
 */
export function webhooksRouter(deps: RoutesDeps): Router {
  const router = express.Router();
  const caller = (res: Response) => res.locals.apiKey as ApiKeyRecord;

  router.post('/test', async (_req, res) => {
    // The cached key may be a second old; the test must use the URL and secret as they are now.
    const key = (await deps.keys.byId(caller(res).id)) ?? caller(res);
    if (!key.webhook_url) throw new ApiError('invalid_request', NO_URL_MESSAGE, { includeParam: false });
    const result = await deps.actions.sendTest(key);
    res.json(result);
  });

  router.get('/deliveries', async (req, res) => {
    const query = parseListQuery(req);
    const { rows, hasMore } = await deps.deliveries.list(caller(res).id, query);
    const data = rows.map(toDelivery);
    const body: DeliveryList = { object: 'list', data, has_more: hasMore, next_cursor: hasMore ? (data.at(-1)?.id ?? null) : null };
    res.json(body);
  });

  router.get('/deliveries/:id', async (req, res) => {
    const id = String(req.params.id);
    const found = await deps.deliveries.get(caller(res).id, id);
    if (!found) throw notFound(id);
    const body: DeliveryDetail = { ...toDelivery(found.delivery), payload: found.delivery.payload, attempt_log: found.attempts.map(toAttempt) };
    res.json(body);
  });

  router.post('/deliveries/:id/redeliver', async (req, res) => {
    const id = String(req.params.id);
    const key = (await deps.keys.byId(caller(res).id)) ?? caller(res);
    const row = await deps.actions.redeliver(key, id);
    if (!row) throw notFound(id);
    res.status(202).json(toDelivery(row));
  });

  router.post('/deliveries/:id/cancel', async (req, res) => {
    const id = String(req.params.id);
    const row = await deps.actions.cancel(caller(res), id);
    if (!row) throw notFound(id);
    res.json(toDelivery(row));
  });

  return router;
}
