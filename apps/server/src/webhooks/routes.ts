import express, { type Response, type Router } from 'express';
import { WebhookTestRequestSchema, type DeliveryList, type WebhookTestSample } from '@svc/protocol';
import { readJsonBody } from '../http/json-body.js';
import { ApiError, quoted } from '../http/errors.js';
import type { ApiKeyRecord, KeysStore } from '../storage/keys-store.js';
import type { OutboxStore } from '../storage/outbox-store.js';
import type { WebhookActions } from './actions.js';
import { bulkRedeliverFilter, deliveryDetailView, deliveryListQuery, deliveryView } from './delivery-shapes.js';

const NO_URL_MESSAGE =
  'No webhook URL is configured for this API key. Set one in the dashboard under Settings, API Keys (or with svc-server keys update KEY --webhook-url URL), then try again.';

function notFound(id: string): ApiError {
  return new ApiError('not_found', `No webhook delivery '${quoted(id)}' exists for this API key.`, { param: 'id' });
}

export interface RoutesDeps {
  deliveries: OutboxStore;
  keys: KeysStore;
  actions: WebhookActions;
}

/** Bodies of these routes are a few fields. */
const BODY_LIMIT = 16 * 1024;

/** The test endpoint's optional `{ "sample": … }`; no body (or `{}`) is `ok`. */
function testSample(body: unknown): WebhookTestSample {
  const parsed = WebhookTestRequestSchema.safeParse(body ?? {});
  if (parsed.success) return parsed.data.sample ?? 'ok';
  throw new ApiError('invalid_value', `Invalid 'sample': expected one of ok, failed, ungrounded, streamed.`, { param: 'sample' });
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

  router.post('/test', async (req, res) => {
    const sample = testSample(await readJsonBody(req, BODY_LIMIT));
    // The cached key may be a second old; the test must use the URL and secret as they are now.
    const key = (await deps.keys.byId(caller(res).id)) ?? caller(res);
    if (!key.webhook_url) throw new ApiError('invalid_request', NO_URL_MESSAGE, { includeParam: false });
    const result = await deps.actions.sendTest(key, sample);
    res.json(result);
  });

  router.get('/deliveries', async (req, res) => {
    const { rows, hasMore } = await deps.deliveries.list(caller(res).id, deliveryListQuery(req.query));
    const data = rows.map(deliveryView);
    const body: DeliveryList = { object: 'list', data, has_more: hasMore, next_cursor: hasMore ? (data.at(-1)?.id ?? null) : null };
    res.json(body);
  });

  router.get('/deliveries/:id', async (req, res) => {
    const id = String(req.params.id);
    const found = await deps.deliveries.get(caller(res).id, id);
    if (!found) throw notFound(id);
    res.json(deliveryDetailView(found));
  });

  router.post('/deliveries/redeliver', async (req, res) => {
    const { filter, dryRun } = bulkRedeliverFilter(await readJsonBody(req, BODY_LIMIT));
    const key = (await deps.keys.byId(caller(res).id)) ?? caller(res);
    res.json(await deps.actions.redeliverMatching(key, filter, dryRun));
  });

  router.post('/deliveries/:id/redeliver', async (req, res) => {
    const id = String(req.params.id);
    const key = (await deps.keys.byId(caller(res).id)) ?? caller(res);
    const row = await deps.actions.redeliver(key, id);
    if (!row) throw notFound(id);
    res.status(202).json(deliveryView(row));
  });

  router.post('/deliveries/:id/cancel', async (req, res) => {
    const id = String(req.params.id);
    const row = await deps.actions.cancel(caller(res), id);
    if (!row) throw notFound(id);
    res.json(deliveryView(row));
  });

  return router;
}
