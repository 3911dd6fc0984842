import type { WebhookTestResult } from '@svc/protocol';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import { newDeliveryId, type DeliveriesStore, type DeliveryRow } from '../storage/deliveries-store.js';
import { buildTestPayload } from './payload.js';
import type { DeliveryWorker } from './worker.js';

export interface WebhookActionsDeps {
  deliveries: DeliveriesStore;
  worker: DeliveryWorker;
  clock: () => number;
  timeoutMs: number;
}

/**
 * Send test and Redeliver, shared by `/v1/webhooks/*` and the dashboard so both behave identically.
 *
 * @example
 * const actions = webhookActions({ deliveries, worker, clock, timeoutMs });
 * const result = await actions.sendTest(key); // { success, delivered_to, status_code?, error? }
 */
export function webhookActions(deps: WebhookActionsDeps) {
  return {
    /**
     * One synchronous attempt of a test payload to the key's URL, with the same signing, SSRF guard, attempt
     * log and last-delivery status as real deliveries. The key must be fresh (its URL and secret as they are now).
     */
    async sendTest(key: ApiKeyRecord): Promise<WebhookTestResult> {
      const url = key.webhook_url;
      if (!url) throw new TypeError('sendTest needs a key with a webhook URL');
      const id = newDeliveryId();
      const now = deps.clock();
      const { payload, body } = buildTestPayload(key, id, now);
      await deps.deliveries.insert({
        id,
        keyId: key.id,
        userId: key.user_id,
        event: payload.event,
        requestId: payload.request_id,
        url,
        payload: body,
        now,
        // Leased to this call: the worker leaves it alone while the synchronous attempt runs.
        lease: { until: now + deps.timeoutMs + 15_000, by: 'test-send' },
      });
      const row = await deps.deliveries.byId(id);
      if (!row) throw new Error(`test delivery ${id} vanished`);
      // `direct`: its own connections, never queued behind the worker's attempts to the same receiver.
      const outcome = await deps.worker.attempt(row, { retries: false, freshKey: true, direct: true });
      return outcome.ok
        ? { success: true, delivered_to: url }
        : { success: false, delivered_to: url, status_code: outcome.statusCode, error: outcome.error };
    },

    /** A new attempt now: same bytes, same delivery id, to the key's current URL. undefined when not the key's. */
    async redeliver(key: ApiKeyRecord, deliveryId: string): Promise<DeliveryRow | undefined> {
      const row = await deps.deliveries.redeliver(key.id, deliveryId, deps.clock(), key.webhook_url ?? undefined);
      if (row) deps.worker.wake();
      return row;
    },
  };
}

export type WebhookActions = ReturnType<typeof webhookActions>;
