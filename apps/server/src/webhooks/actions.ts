import { REDELIVERY_MAX, type BulkRedeliverResult, type WebhookTestResult, type WebhookTestSample } from '@svc/protocol';
import { ApiError } from '../http/errors.js';
import { retryAfterHeaders } from '../http/retry-after.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import { newDeliveryId, newDeliveryRow, type DeliverySummaryRow, type NewDelivery, type OutboxStore, type RedeliveryFilter } from '../storage/outbox-store.js';
import { buildTestPayload } from '../audit/audit-payload.js';
import { TEST_SEND_LEASE } from '../storage/outbox-sql.js';
import type { DeliveryWorker } from './worker.js';

/** Test sends of one key in flight at once, over every process and instance (counted in the database). */
const TESTS_IN_FLIGHT = 4;

export interface WebhookActionsDeps {
  deliveries: OutboxStore;
  worker: DeliveryWorker;
  clock: () => number;
  timeoutMs: number;
}

/**
 * Send test and Redeliver, shared by `/v1/webhooks/*` and the dashboard so both behave identically.
 *
 * @example
 * const actions = webhookActions({ deliveries, worker, clock, timeoutMs });
 * const result = await actions.sendTest(key); // { success, delivered_to, status_code?, error?, response_body? }
 */
export function webhookActions(deps: WebhookActionsDeps) {
  /**
   * The test send itself: a delivery row leased to this call, one attempt on connections of its own. Each holds
   * a connection to the receiver for up to the timeout, so a script (or a held-down button, on any instance)
   * must not open hundreds to a receiver that does not answer: past TESTS_IN_FLIGHT of the key, a 429.
   */
  async function attemptTest(key: ApiKeyRecord, url: string, sample: WebhookTestSample): Promise<WebhookTestResult> {
    const id = newDeliveryId();
    const now = deps.clock();
    const { payload, body } = buildTestPayload(key, id, now, sample);
    const delivery: NewDelivery = {
      id,
      keyId: key.id,
      userId: key.user_id,
      event: payload.event,
      requestId: payload.request_id,
      url,
      payload: body,
      now,
      // Leased to this call: the worker leaves it alone while the synchronous attempt runs.
      lease: { until: now + deps.timeoutMs + 15_000, by: TEST_SEND_LEASE },
      signingSecretEnc: key.signing_secret_enc,
      previousSigningSecretEnc: key.previous_signing_secret_enc,
      previousSigningSecretExpiresAt: key.previous_signing_secret_expires_at,
    };
    const { inFlight, inserted } = await deps.deliveries.insertTestSend(delivery, TESTS_IN_FLIGHT);
    if (!inserted) {
      throw new ApiError(
        'rate_limit_exceeded',
        `${inFlight} test sends to this key's webhook URL are still waiting for its answer (at most ${Math.ceil(deps.timeoutMs / 1000)} s each); send the next once one has ended.`,
        { headers: retryAfterHeaders(deps.timeoutMs) },
      );
    }
    // `direct`: its own connections, never queued behind the worker's attempts to the same receiver.
    const outcome = await deps.worker.attempt(newDeliveryRow(delivery), { retries: false, direct: true });
    return outcome.ok
      ? { success: true, delivered_to: url }
      : { success: false, delivered_to: url, status_code: outcome.statusCode, error: outcome.error, response_body: outcome.responseBody };
  }

  return {
    /**
     * One synchronous attempt of a test payload to the key's URL, with the same signing, SSRF guard, attempt
     * log and last-delivery status as real deliveries. The key must be fresh (its URL and secret as they are now).
     */
    async sendTest(key: ApiKeyRecord, sample: WebhookTestSample = 'ok'): Promise<WebhookTestResult> {
      const url = key.webhook_url;
      if (!url) throw new TypeError('sendTest needs a key with a webhook URL');
      return attemptTest(key, url, sample);
    },

    /**
     * Redeliver for every delivery of the key matching `filter` (newest first, at most `REDELIVERY_MAX`);
     * with `dryRun` only counts them. A 400 when the key has no webhook URL.
     */
    async redeliverMatching(key: ApiKeyRecord, filter: Omit<RedeliveryFilter, 'limit'>, dryRun = false): Promise<BulkRedeliverResult> {
      if (!key.webhook_url && !dryRun) throw noUrlToRedeliver();
      const bounded = { ...filter, limit: REDELIVERY_MAX };
      if (dryRun) {
        return { object: 'webhook.redelivery', redelivered: 0, matched: await deps.deliveries.countMatching(key.id, bounded), limit: REDELIVERY_MAX };
      }
      // Each batch selects and updates in one statement, so what matched is what was redelivered, each row once.
      const redelivered = await deps.deliveries.redeliverMatching(key.id, bounded, deps.clock(), key.webhook_url ?? undefined);
      if (redelivered > 0) deps.worker.wake();
      return { object: 'webhook.redelivery', redelivered, matched: redelivered, limit: REDELIVERY_MAX };
    },

    /**
     * A new attempt now: same bytes, same delivery id, to the key's current URL (a cancelled delivery resumes).
     * undefined when not the key's; a 400 when the key has no webhook URL (there is nowhere to send it).
     */
    async redeliver(key: ApiKeyRecord, deliveryId: string): Promise<DeliverySummaryRow | undefined> {
      if (!key.webhook_url) {
        // Another key's delivery stays a 404 whatever this key's settings.
        if (!(await deps.deliveries.get(key.id, deliveryId))) return undefined;
        throw noUrlToRedeliver();
      }
      const row = await deps.deliveries.redeliver(key.id, deliveryId, deps.clock(), key.webhook_url ?? undefined);
      if (row) deps.worker.wake();
      return row;
    },

    /**
     * Stops a pending delivery (status `cancelled`, reason in `last_error`). undefined when the key has no such
     * delivery; a 400 when it is not pending. An attempt already in flight finishes and is logged.
     */
    async cancel(key: ApiKeyRecord, deliveryId: string): Promise<DeliverySummaryRow | undefined> {
      const row = await deps.deliveries.cancel(key.id, deliveryId, deps.clock(), 'cancelled by request');
      if (row) return row;
      const found = await deps.deliveries.get(key.id, deliveryId);
      if (!found) return undefined;
      throw new ApiError('invalid_request', `Delivery ${deliveryId} is ${found.delivery.status}; only pending deliveries can be cancelled.`);
    },

    /**
     * Applies a change of the key's webhook URL to its pending deliveries: cleared → they are cancelled (with
     * the reason); changed → their next attempts go to the new URL.
     */
    async urlChanged(key: ApiKeyRecord, url: string | null): Promise<void> {
      await applyUrlChange(deps.deliveries, key, url, deps.clock());
      // Its waiting deliveries now go to another receiver, which may have room where the old one had none.
      if (url !== null && url !== key.webhook_url) deps.worker.wake();
    },
  };
}

/**
 * A key's webhook URL changed from `key.webhook_url` to `url`: its pending deliveries are cancelled (URL
 * removed, with the reason) or sent to the new URL from their next attempt. The dashboard's Save and
 * `svc-server keys update` both call it.
 */
export async function applyUrlChange(deliveries: OutboxStore, key: ApiKeyRecord, url: string | null, now: number): Promise<void> {
  if (url === key.webhook_url) return;
  if (url === null) await deliveries.cancelPending(key.id, now, "cancelled: the key's webhook URL was removed");
  else await deliveries.retargetPending(key.id, url, now);
}

function noUrlToRedeliver(): ApiError {
  return new ApiError('invalid_request', 'This API key has no webhook URL, so there is nowhere to redeliver to. Set a webhook URL for the key first.');
}

export type WebhookActions = ReturnType<typeof webhookActions>;
