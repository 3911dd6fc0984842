import type { AuditSink, CompletedRequest } from '../chat/audit.js';
import { newDeliveryId, type DeliveriesStore, type NewDelivery } from '../storage/deliveries-store.js';
import { buildAuditPayload } from './payload.js';

interface Waiting {
  delivery: NewDelivery;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The webhook half of the audit trail: for a key with a webhook URL, builds the payload and writes it to
 * the outbox. `record` resolves once the row is committed (the chat response's last byte goes out after
 * that); then the worker is woken to send it at once. Records arriving in the same tick share one insert.
 *
 * @example
 * const sink = new OutboxSink(store.deliveries, () => worker.wake());
 */
export class OutboxSink implements AuditSink {
  private queue: Waiting[] = [];

  constructor(
    private readonly deliveries: DeliveriesStore,
    private readonly onRecorded: () => void,
  ) {}

  record(request: CompletedRequest): Promise<void> {
    const url = request.key.webhook_url;
    if (!url) return Promise.resolve();
    const { payload, body } = buildAuditPayload(request);
    const delivery: NewDelivery = {
      id: newDeliveryId(),
      keyId: request.key.id,
      userId: request.key.user_id,
      event: payload.event,
      requestId: payload.request_id,
      url,
      payload: body,
      now: request.finishedAt,
    };
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ delivery, resolve, reject });
      if (this.queue.length === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    try {
      await this.deliveries.insertMany(batch.map((w) => w.delivery));
    } catch (err) {
      for (const w of batch) w.reject(err);
      return;
    }
    for (const w of batch) w.resolve();
    this.onRecorded();
  }
}
