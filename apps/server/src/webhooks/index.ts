import type { Router } from 'express';
import type { AuditSink } from '../audit/audit-sink.js';
import type { ServiceDeps } from '../service-deps.js';
import { webhookActions, type WebhookActions } from './actions.js';
import { OutboxSink } from './outbox.js';
import { webhooksRouter } from './routes.js';
import { createSender } from './sender.js';
import { DeliveryWorker, type WorkerOptions } from './worker.js';

export { validateWebhookUrl } from './url-guard.js';
export { applyUrlChange } from './actions.js';

export interface WebhooksDeps extends ServiceDeps {
  /** Attempts in flight at most (default SVC_WEBHOOK_CONCURRENCY). */
  concurrency?: number;
  /** Told about every recorded delivery attempt (metrics). */
  onAttempt?: WorkerOptions['onAttempt'];
  /**
   * Release every lease at start (default: on embedded SQLite, where this process is the only server). False
   * in the workers of a multi-process server: their siblings' leases are live; the primary released the
   * stale ones once, before forking them.
   */
  releaseLeasesOnStart?: boolean;
}

export interface Webhooks {
  /** Writes a delivery to the outbox for every completed request on a key with a webhook URL. */
  audit: AuditSink;
  /** `/v1/webhooks`: test endpoint and deliveries API (mount behind bearer auth). */
  router: Router;
  worker: DeliveryWorker;
  /** Send test and Redeliver, shared with the dashboard. */
  actions: WebhookActions;
  /** Starts the delivery worker (sends what is pending, including rows left by a previous run). */
  start(): void;
  /** Stops claiming, lets attempts in flight finish or time out; pending rows stay for the next start. */
  stop(): Promise<void>;
}

/**
 * Audit webhooks (design §5): a durable outbox in the database, a delivery worker, and the API routes.
 *
 * @example
 * const webhooks = createWebhooks({ config, store, logger, clock, secretBox, keyCache });
 * const listener = createRequestListener({ …, audit: webhooks.audit, webhooksRouter: webhooks.router });
 * webhooks.start(); … await webhooks.stop();
 */
export function createWebhooks(deps: WebhooksDeps): Webhooks {
  const { config, store, logger, clock, secretBox } = deps;
  const perReceiver = config.webhooks.receiverConcurrency;
  const webhooksLogger = logger.child({ component: 'webhooks' });
  const sender = createSender({ timeoutMs: config.webhooks.timeoutMs, allowPrivate: config.webhooks.allowPrivate, connections: perReceiver });
  const worker = new DeliveryWorker({
    deliveries: store.deliveries,
    keys: store.keys,
    sender,
    secretBox,
    logger: webhooksLogger,
    clock,
    timeoutMs: config.webhooks.timeoutMs,
    retryScheduleMs: config.webhooks.retryScheduleMs,
    concurrency: deps.concurrency ?? config.webhooks.concurrency,
    perReceiver,
    onAttempt: deps.onAttempt,
    // Embedded SQLite with one server process: what it had leased when it died is nobody's now.
    releaseLeasesOnStart: deps.releaseLeasesOnStart ?? store.handle.dialect === 'sqlite',
  });
  const audit = new OutboxSink(store.deliveries, worker);
  const actions = webhookActions({ deliveries: store.deliveries, worker, clock, timeoutMs: config.webhooks.timeoutMs });
  const router = webhooksRouter({ deliveries: store.deliveries, keys: store.keys, actions });
  return {
    audit,
    router,
    worker,
    actions,
    start() {
      worker.start();
    },
    async stop() {
      await worker.stop();
      await sender.close();
    },
  };
}
