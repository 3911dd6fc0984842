import type { WebhookTestResult } from '@svc/protocol';
import type { Store } from '../storage/store.js';
import { newDeliveryId } from '../storage/deliveries-store.js';
import { buildTestPayload, type DeliveryWorker } from '../webhooks/index.js';
import type { DashboardWebhooks } from './api-router.js';

/**
 * The dashboard's Send test and Redeliver, done exactly as `/v1/webhooks/test` and `…/redeliver` do them: the
 * same test payload, stored in the outbox leased to this request, one synchronous attempt by the delivery
 * worker (signing, SSRF guard, attempt log, the key's last delivery status), and a redelivery that keeps the
 * stored bytes and id.
 *
 * @example
 * createDashboardRouter({ …, webhooks: dashboardWebhookActions({ store, worker: webhooks.worker, clock, timeoutMs }) });
 */
export function dashboardWebhookActions(deps: {
  store: Store;
  worker: DeliveryWorker;
  clock: () => number;
  timeoutMs: number;
}): DashboardWebhooks {
  const { store, worker, clock } = deps;
  return {
    async sendTest(key): Promise<WebhookTestResult> {
      const url = key.webhook_url;
      if (!url) throw new Error('sendTest needs a key with a webhook URL');
      const id = newDeliveryId();
      const now = clock();
      const { payload, body } = buildTestPayload(key, id, now);
      await store.deliveries.insert({
        id,
        keyId: key.id,
        userId: key.user_id,
        event: payload.event,
        requestId: payload.request_id,
        url,
        payload: body,
        now,
        lease: { until: now + deps.timeoutMs + 60_000, by: 'dashboard-test' },
      });
      const row = await store.deliveries.byId(id);
      if (!row) throw new Error(`test delivery ${id} vanished`);
      // freshKey: the secret may have just been generated or cleared on this page.
      const outcome = await worker.attempt(row, { retries: false, freshKey: true });
      return outcome.ok
        ? { success: true, delivered_to: url }
        : { success: false, delivered_to: url, status_code: outcome.statusCode, error: outcome.error };
    },
    async redeliver(key, deliveryId) {
      const row = await store.deliveries.redeliver(key.id, deliveryId, clock(), key.webhook_url ?? undefined);
      if (row) worker.wake();
      return row;
    },
  };
}
