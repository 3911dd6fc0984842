import cluster, { type Worker } from 'node:cluster';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import { RateLimiterClusterMaster } from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import { createLogger } from '../logging/logger.js';
import { warnIfFilesShort } from '../http/open-files.js';
import { openStore, warnOnCheckpointFallback } from '../storage/store.js';
import { resolveSecretKey } from '../crypto/embedded-key.js';
import { logPreviousKeyNote, SecretBox } from '../crypto/secret-box.js';
import { bootstrapFirstRun, type FirstRunCredentials } from '../auth/first-run.js';
import { answerClusterRateLimits } from '../rate-limit/cluster-rate-limiter.js';
import { DEAD_PROCESS, endOrphans, PREVIOUS_RUN, type OrphanDeps } from '../responses/background.js';
import { NO_WORKER, OutboxSink } from '../webhooks/outbox.js';
import { combineSinks, UsageSink } from '../chat/usage-sink.js';
import { restDeadline, stepsBy } from '../stop-steps.js';
import { isSvcMessage, type PrimaryMessage, type WorkerMessage } from './messages.js';

/** The signals an operator stops svc with (also sent to the whole process group). */
const STOP_SIGNALS = new Set(['SIGTERM', 'SIGINT', 'SIGHUP']);

/** A worker that lived this long counts as started well: its next crash restarts it after MIN_BACKOFF_MS again. */
const STABLE_MS = 10_000;
const MIN_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 15_000;

export interface RunningPrimary {
  /** `http://host:port` the workers share (port 0 resolved: every worker gets the primary's one port). */
  url: string;
  processes: number;
  firstRun: FirstRunCredentials | undefined;
  /** A Postgres database with no user yet (see `RunningServer.noUsers`). */
  noUsers: boolean;
  /**
   * Graceful: every worker finishes its in-flight requests and webhook attempts; resolves once all have
   * exited, rejects when one of them did not exit 0.
   */
  close(): Promise<void>;
  /**
   * Resolves when the database file was deleted or replaced under the running server (SQLite): the primary then
   * stops replacing workers (each would refuse to start) and closes; the command exits non-zero.
   */
  failed: Promise<Error>;
}

interface Slot {
  worker: Worker | undefined;
  /** `leased_by` of the worker's webhook claims, once it is ready. */
  webhookWorkerId: string | undefined;
  startedAt: number;
  /** Crashes in a row, each within STABLE_MS of its start: the backoff doubles with each. */
  crashes: number;
  restartTimer: NodeJS.Timeout | undefined;
}

/**
 * The primary of a multi-process server (SVC_PROCESSES > 1, node:cluster). It does the one-time work once —
 * migrations, the embedded secret key, the first-run user and key, releasing webhook leases a previous run
 * left — then forks `config.processes` workers (`runClusterWorker`) that serve the one port, holds their
 * rate-limit counters (without Redis) and answers their `/metrics` with everyone's. A worker that dies is
 * replaced, after a backoff that grows while it keeps crashing at start; its webhook leases are released at
 * once, so the replacement sends what it had in flight. The primary serves no requests itself.
 *
 * @example
 * const primary = await startPrimary(config, { stopSignal }); … await primary?.close();
 *
 * Resolves with undefined when `stopSignal` (the operator's SIGTERM, SIGINT or SIGHUP) came before every worker
 * listened: the workers were stopped then, cleanly.
 */
export async function startPrimary(config: Config, options: { logger?: Logger; stopSignal?: Promise<unknown> } = {}): Promise<RunningPrimary | undefined> {
  const logger = options.logger ?? createLogger(config.logLevel, undefined, { multiProcess: true });
  // The server lock, before the leases below are taken for a previous run's: another server on this file would still
  // be sending them.
  const store = await openStore(config.databaseUrl, { poolSize: config.databasePoolSize, serverLock: true });
  let firstRun: FirstRunCredentials | undefined;
  let noUsers = false;
  // The background responses it ends (of a previous run, of a dead process) are audited through the outbox, sent by
  // the server processes' workers, and counted in the Usage view, as the requests they were.
  const usage = new UsageSink(store.usage, logger);
  const orphanDeps: OrphanDeps = {
    responses: store.responses,
    audit: combineSinks(usage, new OutboxSink(store.deliveries, NO_WORKER)),
    keys: store.keys,
    deliveries: store.deliveries,
    clock: Date.now,
    logger,
  };
  /**
   * What is under way for dead processes — their webhook leases released, their background responses ended: the close
   * waits for it, within the last part of the stop (see `close`), before its last count and the store's close.
   */
  const cleanups = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    const tracked: Promise<unknown> = work.finally(() => cleanups.delete(tracked));
    cleanups.add(tracked);
  };
  try {
    // Said here once for every worker (each checks the key itself).
    await logPreviousKeyNote(new SecretBox(resolveSecretKey(config.secretKey, store.handle.dataDir), config.previousSecretKeys), store.keys, logger);
    if (store.handle.dialect === 'sqlite') {
      firstRun = await bootstrapFirstRun(store, Date.now);
      // No server process is running yet: whatever is leased was left by a previous run.
      const released = await store.deliveries.releaseLeases(Date.now());
      if (released > 0) logger.info({ released }, 'resuming webhook deliveries left in flight by the previous run');
      // Likewise the background responses that were running: none will finish.
      await endOrphans(orphanDeps, { otherThan: '' }, PREVIOUS_RUN);
    } else {
      noUsers = (await store.users.count()) === 0;
    }
  } catch (err) {
    await usage.close();
    await store.close();
    throw err;
  }

  warnIfFilesShort(config, logger);
  warnOnCheckpointFallback(store, logger);

  // Without Redis the primary holds the workers' rate-limit counters; with it, the workers share Redis.
  const answerRateLimits = config.redisUrl ? undefined : answerClusterRateLimits();
  // The dashboard's sign-in limits likewise (`signInCounters`): a handful of messages per sign-in.
  if (!config.redisUrl) new RateLimiterClusterMaster();
  const aggregator = new AggregatorRegistry();
  const onMessage = (worker: Worker, message: unknown) => {
    if (!isSvcMessage<WorkerMessage>(message)) return;
    const reply = (answer: PrimaryMessage) => {
      if (worker.isConnected()) worker.send(answer);
    };
    if (message.svc === 'rate-limit') {
      answerRateLimits?.(message).then(reply, (err: unknown) => logger.error({ err }, 'could not answer a rate-limit check'));
      return;
    }
    if (message.svc !== 'metrics') return;
    aggregator.clusterMetrics().then(
      (text) => reply({ svc: 'metrics', id: message.id, text }),
      (err: unknown) => reply({ svc: 'metrics', id: message.id, error: (err as Error).message }),
    );
  };
  cluster.on('message', onMessage);

  const slots: Slot[] = Array.from({ length: config.processes }, () => ({
    worker: undefined,
    webhookWorkerId: undefined,
    startedAt: 0,
    crashes: 0,
    restartTimer: undefined,
  }));
  let started = false;
  let stopping = false;
  // The operator's SIGTERM/SIGINT/SIGHUP: sent to the whole process group (Ctrl-C, systemd, `docker stop` of an
  // init, the terminal closing), it also reaches a worker too early in its start to ignore it yet. Such a worker
  // was stopped, not crashed.
  let signalled = false;
  const stopWanted = options.stopSignal?.then(() => void (signalled = true));
  const stoppedBySignal = (end: string) => signalled && STOP_SIGNALS.has(end);

  // The database file deleted or replaced under the running server: stop every process, replace none.
  let lost: ((problem: Error) => void) | undefined;
  const failed = new Promise<Error>((resolve) => (lost = resolve));
  let lostOnce = false;
  const databaseLost = (found: Error | string) => {
    if (lostOnce) return;
    lostOnce = true;
    const problem = typeof found === 'string' ? new Error(found) : found;
    logger.fatal({ err: problem }, `stopping every process: ${problem.message}. Restore the file from a backup before starting again.`);
    stopping = true;
    void close()
      .catch(() => {})
      .finally(() => lost!(problem));
  };

  /** Resolves once the worker can keep a stop message (a stop sent before that is lost). */
  const hearing = new WeakMap<Worker, Promise<void>>();

  /** Forks the worker of `slot`; resolves with its URL once it listens, rejects when it exits before. */
  const fork = (slot: Slot): Promise<string> => {
    const worker = cluster.fork();
    Object.assign(slot, { worker, webhookWorkerId: undefined, startedAt: Date.now() });
    // A message to a worker that just died fails with EPIPE: no 'error' event left unhandled to crash on.
    worker.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ERR_IPC_CHANNEL_CLOSED') logger.error({ err, worker_pid: worker.process.pid }, 'server process channel error');
    });
    hearing.set(worker, new Promise((heard) => worker.on('message', (message: unknown) => isSvcMessage<WorkerMessage>(message) && message.svc === 'early' && heard())));
    return new Promise((resolve, reject) => {
      worker.on('message', (message: unknown) => {
        if (!isSvcMessage<WorkerMessage>(message) || message.svc !== 'ready') return;
        slot.webhookWorkerId = message.webhookWorkerId;
        resolve(message.url);
      });
      worker.once('exit', (code, signal) => {
        reject(new Error(`a server process exited (${signal ?? `code ${code}`}) before listening; its error is above`));
        if (slot.worker === worker) slot.worker = undefined;
        if (started && !stopping) replace(slot, worker, code, signal);
      });
    });
  };

  const replace = (slot: Slot, dead: Worker, code: number | null, signal: string | null) => {
    // A worker that stopped because the database file is gone is not replaced: every replacement would refuse.
    const problem = store.handle.fileProblem();
    if (problem) {
      databaseLost(problem);
      return;
    }
    if (Date.now() - slot.startedAt >= STABLE_MS) slot.crashes = 0;
    const backoffMs = Math.min(MAX_BACKOFF_MS, MIN_BACKOFF_MS * 2 ** slot.crashes);
    slot.crashes += 1;
    const leasedBy = slot.webhookWorkerId;
    logger.error({ worker_pid: dead.process.pid, code, signal, restart_in_ms: backoffMs }, 'server process died; starting a replacement');
    const released = leasedBy
      ? store.deliveries.releaseLeases(Date.now(), leasedBy).then(
          (count) => {
            if (count > 0) logger.info({ released: count, leased_by: leasedBy }, 'released the webhook deliveries the dead process had in flight');
          },
          (err: unknown) => logger.error({ err }, 'could not release the dead process’s webhook leases; they are retried when they lapse'),
        )
      : Promise.resolve();
    // Its background responses will not finish: ended now rather than when their leases lapse.
    track(released);
    if (leasedBy) {
      track(endOrphans(orphanDeps, { owner: leasedBy }, DEAD_PROCESS).catch((err: unknown) => logger.error({ err }, 'could not end the dead process’s background responses; they end when their leases lapse')));
    }
    // The release comes first: the replacement claims what is due as it starts.
    void released.then(() => {
      if (stopping) return;
      slot.restartTimer = setTimeout(() => {
        slot.restartTimer = undefined;
        if (!stopping) fork(slot).catch(() => {}); // A failed start is another exit: replaced again, later.
      }, backoffMs);
    });
  };

  /** Resolves with how the worker ended: undefined for a clean exit 0, else its code or signal. */
  const stopWorker = (worker: Worker) =>
    new Promise<string | undefined>((resolve) => {
      if (worker.isDead()) return resolve(undefined);
      worker.once('exit', (code, signal) => resolve(code === 0 ? undefined : (signal ?? `code ${code}`)));
      if (!worker.isConnected()) return worker.kill('SIGTERM');
      void hearing.get(worker)!.then(() => {
        if (worker.isConnected()) worker.send({ svc: 'stop' } satisfies PrimaryMessage, undefined, {}, () => {});
      });
    });

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      const stopAt = Date.now();
      stopping = true;
      for (const slot of slots) clearTimeout(slot.restartTimer);
      const ends = await Promise.all(slots.map((slot) => (slot.worker ? stopWorker(slot.worker) : undefined)));
      cluster.off('message', onMessage);
      // This process's own last part, after its workers: they drained for up to SVC_SHUTDOWN_TIMEOUT_MS (a stream held
      // to its end) and then recorded and closed what they had. Its bound counts from when they stopped: counted from
      // the stop's start, it was spent by then, and these steps of milliseconds were left undone. When the workers took
      // longer than the drain's bound, it counts from that bound: the whole stop still ends within twice
      // SVC_SHUTDOWN_TIMEOUT_MS (or it plus 10 s, when longer), as one process's does.
      // A database that answers slowly or not at all would hold each of these (and the exit) as long as it does not;
      // what is left is taken up by others: leases lapse, and the next start or another instance ends the responses.
      await stepsBy(
        [
          {
            name: 'dead processes’ cleanup',
            run: () => Promise.allSettled([...cleanups]),
            left: () => ({ unfinished_cleanups: cleanups.size, cleanups_left_to: 'their leases lapse (webhook deliveries, background responses) and they are taken up then' }),
          },
          { name: 'usage counters', run: () => usage.close(), left: () => ({ uncounted_requests: usage.unwrittenRequests }) },
          { name: 'database close', run: () => store.close() },
        ],
        restDeadline(Math.min(Date.now(), stopAt + config.shutdownTimeoutMs), config.shutdownTimeoutMs),
        logger,
      );
      // A signal sent to the whole group reaches this process as it reaches the workers, but a worker's death may be
      // seen first: before calling one killed by a stop signal unclean, this process's own handler gets a moment.
      if (!signalled && stopWanted && ends.some((end) => end !== undefined && STOP_SIGNALS.has(end))) {
        await Promise.race([stopWanted, delay(1000, undefined, { ref: false })]);
      }
      const unclean = ends.filter((end) => end !== undefined && !stoppedBySignal(end));
      if (unclean.length > 0) throw new Error(`server processes did not stop cleanly (${unclean.join(', ')})`);
    })());

  let urls: string[] | undefined;
  try {
    const listening = Promise.all(slots.map(fork));
    listening.catch(() => {}); // Once the stop won the race, a worker's failed start is the close's to report.
    urls = await Promise.race([listening, stopWanted ?? new Promise<never>(() => {})]);
  } catch (err) {
    await close();
    // Checked after the close: a worker the group's signal killed may be seen dead before the primary's own
    // handler ran.
    if (signalled) return undefined;
    throw err;
  }
  if (!urls) {
    // Workers still starting keep the stop the primary sends and stop as soon as they have started.
    await close();
    return undefined;
  }
  started = true;
  store.handle.onFileLost(databaseLost);
  return { url: urls[0]!, processes: config.processes, firstRun, noUsers, close, failed };
}
