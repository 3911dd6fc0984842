import { buildAuditPayload } from '../audit/audit-payload.js';
import type { AuditSink, CompletedRequest } from '../audit/audit-sink.js';
import { newDeliveryId, newDeliveryRow, type ClaimedDelivery, type Lease, type NewDelivery, type OutboxStore } from '../storage/outbox-store.js';

interface Waiting {
  delivery: NewDelivery;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The part of the delivery worker the outbox hands new rows to (`DeliveryWorker`): it lends the outbox a
 * lease for as many rows as it can start now, and takes the committed rows over.
 */
export interface OutboxWorker {
  reserve(count: number): { take: number; lease: Lease };
  adopt(rows: ClaimedDelivery[]): void;
  unreserve(count: number): void;
  wake(): void;
}

/**
 * The webhook half of the audit trail: for a key with a webhook URL, builds the payload and writes it to
 * the outbox. `record` resolves once the row is committed (the chat response's last byte goes out after
 * that). Records arriving in the same tick share one insert; as many as the worker has free slots for are
 * inserted already leased to it and handed over once the responses are out (no claim query), the rest are
 * left for it to claim (it is woken).
 *
 * @example
 * const sink = new OutboxSink(store.deliveries, worker);
 */
export class OutboxSink implements AuditSink {
  private queue: Waiting[] = [];

  constructor(
    private readonly deliveries: OutboxStore,
    private readonly worker: OutboxWorker,
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
      signingSecretEnc: request.key.signing_secret_enc,
      previousSigningSecretEnc: request.key.previous_signing_secret_enc,
      previousSigningSecretExpiresAt: request.key.previous_signing_secret_expires_at,
    };
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ delivery, resolve, reject });
      if (this.queue.length === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    const { take, lease } = this.worker.reserve(batch.length);
    for (let i = 0; i < take; i++) batch[i]!.delivery.lease = lease;
    try {
      await this.deliveries.insertMany(batch.map((w) => w.delivery));
    } catch (err) {
      this.worker.unreserve(take);
      for (const w of batch) w.reject(err);
      return;
    }
    for (const w of batch) w.resolve();
    // The responses waiting on these rows are written in this tick's microtasks; the attempts (signing,
    // the webhook request's write) start after them, in the next check phase — never ahead of a response.
    const adopted = take > 0 ? batch.slice(0, take).map((w) => newDeliveryRow(w.delivery)) : [];
    setImmediate(() => {
      if (adopted.length > 0) this.worker.adopt(adopted);
      if (take < batch.length) this.worker.wake();
    });
  }
}
