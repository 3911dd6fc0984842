import type { Logger } from 'pino';
import type { AttemptNext, AttemptResult, ClaimedDelivery, SendableDelivery } from '../storage/outbox-store.js';
import { isTestRequestId } from '../audit/audit-payload.js';
import type { AttemptLog } from './attempt-log.js';
import { nextStep, type RetryPolicy } from './retry-policy.js';
import type { AttemptOutcome, Sender } from './sender.js';
import type { SigningSecrets } from './signing-secrets.js';

/** What an attempt needs of its delivery once sent (not the payload). */
type SentDelivery = Pick<ClaimedDelivery, 'id' | 'key_id' | 'request_id' | 'created_at' | 'attempts' | 'leased_by'>;

export interface AttemptOptions {
  /** false: a failure is final. Default true; a test delivery's attempts never retry, whatever this says. */
  retries?: boolean;
  /** Connections of its own, never queued behind the worker's attempts to the same receiver (a test send). */
  direct?: boolean;
}

export interface AttemptsDeps {
  sender: Sender;
  secrets: SigningSecrets;
  log: AttemptLog;
  policy: RetryPolicy;
  logger: Logger;
  clock: () => number;
  /** Told about every recorded attempt (metrics); `createdAt` is when the request completed. */
  onAttempt?: (attempt: { outcome: 'success' | 'failure' | 'refused'; createdAt: number; finishedAt: number }) => void;
}

function unprepared(err: unknown): AttemptOutcome {
  const error = `could not prepare the attempt: ${(err as Error).message}`;
  return { ok: false, kind: 'unprepared', code: 'SVC_WEBHOOK_UNPREPARED', statusCode: null, durationMs: 0, error, responseBody: null };
}

/**
 * One attempt of a claimed delivery: sign and send, decide what the delivery becomes (`nextStep`), write it
 * to the attempt log, log a line and tell the metrics. Resolves once recorded; rejects when the record
 * failed (the row keeps its lease and is tried again once it lapses).
 *
 * @example
 * const { outcome, next } = await attempts.run(row);
 */
export class DeliveryAttempts {
  constructor(private readonly deps: AttemptsDeps) {}

  /**
   * Only the send holds the row, payload included; what follows (the record waits for its batch) holds the
   * few fields it needs. An async function keeps its arguments until it returns, and a payload kept across
   * that wait outlives young-generation collections and is promoted to the old space.
   */
  run(row: SendableDelivery, options: AttemptOptions = {}): Promise<{ outcome: AttemptOutcome; next: AttemptNext }> {
    const attemptedAt = this.deps.clock();
    const sent = this.send(row, options.direct ?? false);
    const delivery: SentDelivery = { id: row.id, key_id: row.key_id, request_id: row.request_id, created_at: row.created_at, attempts: row.attempts, leased_by: row.leased_by };
    // A test delivery gets one attempt per send or redelivery: its receiver is being set up, and a retry hours
    // later (after "Retrying" in the dashboard) only confuses whoever pressed the button.
    const retries = (options.retries ?? true) && !isTestRequestId(row.request_id);
    return this.settle(delivery, attemptedAt, sent, retries);
  }

  private send(row: SendableDelivery, direct: boolean): Promise<AttemptOutcome> {
    const now = this.deps.clock();
    let secret: string | null;
    let previousSecret: string | null = null;
    try {
      secret = this.deps.secrets.open(row.signing_secret_enc);
      // Postgres returns a bigint subquery as a string.
      if (Number(row.previous_signing_secret_expires_at ?? 0) > now) previousSecret = this.deps.secrets.open(row.previous_signing_secret_enc ?? null);
    } catch (err) {
      return Promise.resolve(unprepared(err));
    }
    const timestamp = Math.floor(now / 1000);
    const delivery = { url: row.url, body: row.payload, event: row.event, deliveryId: row.id, secret, previousSecret, timestamp };
    return this.deps.sender.send(delivery, direct ? { direct } : undefined).catch(unprepared);
  }

  private async settle(delivery: SentDelivery, attemptedAt: number, sent: Promise<AttemptOutcome>, retries: boolean): Promise<{ outcome: AttemptOutcome; next: AttemptNext }> {
    const { logger, log, policy, onAttempt } = this.deps;
    const outcome = await sent;
    const attempt = delivery.attempts + 1;
    const next = nextStep(policy, outcome, attempt, attemptedAt, retries);
    const result: AttemptResult = {
      attemptedAt,
      statusCode: outcome.statusCode,
      durationMs: outcome.durationMs,
      outcome: outcome.ok ? 'success' : 'failure',
      error: outcome.error,
      responseBody: outcome.responseBody,
      requestHeaders: outcome.requestHeaders ? JSON.stringify(outcome.requestHeaders) : null,
    };
    await log.record(delivery.key_id, { deliveryId: delivery.id, result, next, leasedBy: delivery.leased_by }, { test: isTestRequestId(delivery.request_id) });
    const refused = !outcome.ok && outcome.kind === 'refused';
    const label = outcome.ok ? 'success' : refused ? 'refused' : 'failure';
    const fields = {
      delivery_id: delivery.id,
      request_id: delivery.request_id,
      attempt,
      status_code: outcome.statusCode,
      duration_ms: outcome.durationMs,
      outcome: label,
      error: outcome.error ?? undefined,
      next: next.status === 'pending' ? new Date(next.nextAttemptAt).toISOString() : next.status,
    };
    if (outcome.ok) logger.info(fields, 'webhook delivered');
    else logger.warn(fields, refused ? 'webhook refused by the SSRF guard' : 'webhook attempt failed');
    onAttempt?.({ outcome: label, createdAt: delivery.created_at, finishedAt: attemptedAt + outcome.durationMs });
    return { outcome, next };
  }
}
