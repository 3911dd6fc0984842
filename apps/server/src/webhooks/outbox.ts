import { AUDIT_EVENT } from '@svc/protocol';
import { buildAuditPayload } from '../audit/audit-payload.js';
import type { AuditSink, CompletedRequest } from '../audit/audit-sink.js';
import { writeAgainIfConnectionLost } from '../storage/storage-fault.js';
import { newDeliveryId, newDeliveryRow, type Lease, type NewDelivery, type OutboxStore, type SendableDelivery, type SequencedDelivery } from '../storage/outbox-store.js';

/** Tries of a delivery's insert whose connections were lost under it (see `OutboxSink.insert`). */
const INSERT_TRIES = 5;

interface Waiting {
  delivery: SequencedDelivery;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The part of the delivery worker the outbox hands new rows to (`DeliveryWorker`): it lends the outbox a
 * lease for as many rows as it can start now, and takes the committed rows over.
 */
export interface OutboxWorker {
  reserve(count: number): { take: number; lease: Lease };
  adopt(rows: SendableDelivery[]): void;
  unreserve(count: number): void;
  wake(): void;
}

/**
 * The worker of a process that sends no deliveries (a multi-process server's primary): it takes no new row over,
 * and the server processes' workers claim them.
 */
export const NO_WORKER: OutboxWorker = {
  reserve: () => ({ take: 0, lease: { until: 0, by: '' } }),
  adopt: () => undefined,
  unreserve: () => undefined,
  wake: () => undefined,
};

/**
 * The webhook half of the audit trail: for a key with a webhook URL, builds the payload and writes it to
 * the outbox, numbered with the key's next `sequence` inside the insert's transaction. `record` resolves once
 * the row is committed (the chat response's last byte goes out after that). Records arriving in the same
 * tick share one insert; as many as the worker has free slots for are inserted already leased to it and
 * handed over once the responses are out (no claim query), the rest are left for it to claim (it is woken).
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
    const delivery: SequencedDelivery = {
      id: request.deliveryId ?? newDeliveryId(),
      ...(request.deliveryId !== undefined && { once: true }),
      keyId: request.key.id,
      userId: request.key.user_id,
      event: AUDIT_EVENT,
      requestId: request.requestId,
      url,
      serialise: (sequence) => buildAuditPayload(request, sequence).body,
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

  /**
   * The insert, sent again (a few times) when the connection it went out on was lost (Postgres ended it: an operator's
   * `pg_terminate_backend`, a failover, a proxy's reset) — one try of a healthy database, where the request used
   * to be answered 503 and a client that had left (499) lost its delivery. When the commit had landed before the
   * connection went, the rows are there (undefined: their numbers are not known here).
   */
  private insert(deliveries: SequencedDelivery[]): Promise<NewDelivery[] | undefined> {
    return writeAgainIfConnectionLost(
      INSERT_TRIES,
      () => this.deliveries.insertSequenced(deliveries),
      // A delivery recorded once may have been there before this insert: it tells nothing of this one's commit.
      async () => (await this.deliveries.stateOf((deliveries.find((d) => !d.once) ?? deliveries[0]!).id)) !== undefined,
    );
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    const { take, lease } = this.worker.reserve(batch.length);
    for (let i = 0; i < take; i++) batch[i]!.delivery.lease = lease;
    let inserted: NewDelivery[] | undefined;
    try {
      inserted = await this.insert(batch.map((w) => w.delivery));
    } catch (err) {
      this.worker.unreserve(take);
      for (const w of batch) w.reject(err);
      return;
    }
    for (const w of batch) w.resolve();
    if (inserted === undefined) {
      // Committed, but the rows' numbers were lost with the connection: the worker claims them once their lease
      // lapses, rather than being handed rows it cannot rebuild.
      this.worker.unreserve(take);
      setImmediate(() => this.worker.wake());
      return;
    }
    // The responses waiting on these rows are written in this tick's microtasks; the attempts (signing,
    // the webhook request's write) start after them, in the next check phase — never ahead of a response.
    // The leased rows, less any left out as recorded already (`once`): their slots are given back.
    const adopted = take > 0 ? inserted.filter((d) => d.lease !== undefined).map(newDeliveryRow) : [];
    if (adopted.length < take) this.worker.unreserve(take - adopted.length);
    setImmediate(() => {
      if (adopted.length > 0) this.worker.adopt(adopted);
      if (take < batch.length) this.worker.wake();
    });
  }
}
