import { createServer, type Server } from 'node:http';
import { answerClientError, answerConnect, answerUnmetExpectation } from './http/client-error.js';
import { holdContinue } from './http/expect-continue.js';
import { trackSilentConnections } from './http/silent-connections.js';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Config } from './config.js';
import { createRequestListener } from './app.js';
import { openStore, warnOnCheckpointFallback, type Store } from './storage/store.js';
import { createLogger, storageFaultsOf } from './logging/logger.js';
import { createOfflineModel } from './upstream/offline-model.js';
import { loadTokenizer } from './tokens/tokenizer.js';
import { createOpenAICompatibleUpstream } from './upstream/openai-compatible.js';
import type { Upstream } from './upstream/upstream.js';
import { createRateLimiter } from './rate-limit/rate-limiter.js';
import { ClusterRateLimiter, type Ipc } from './rate-limit/cluster-rate-limiter.js';
import { KeyCache } from './auth/key-cache.js';
import { createJudgeGrounder, createOfflineGrounder } from './chat/grounder.js';
import { UsageSink, combineSinks } from './chat/usage-sink.js';
import { checkSecretKey, logPreviousKeyNote, SecretBox } from './crypto/secret-box.js';
import { resolveSecretKey } from './crypto/embedded-key.js';
import { createWebhooks } from './webhooks/index.js';
import { Retention } from './storage/retention.js';
import { freeSpace, shrinkAfterPurge } from './storage/sqlite-free-pages.js';
import { bootstrapFirstRun, type FirstRunCredentials } from './auth/first-run.js';
import { createDashboardRouter } from './dashboard/index.js';
import { signInCounters } from './dashboard/sign-in-limits.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import { instrumentGrounder, instrumentUpstream } from './metrics/instrument.js';
import { operationsRouter } from './metrics/operations-router.js';
import { InFlightLimit } from './http/in-flight.js';
import { BackgroundResponses } from './responses/background.js';
import { warnIfFilesShort } from './http/open-files.js';
import { restDeadline, SETTLE_MS, stepsBy } from './stop-steps.js';

export interface RunningServer {
  /** `http://host:port` actually bound (port 0 resolved). */
  url: string;
  server: Server;
  store: Store;
  logger: Logger;
  firstRun: FirstRunCredentials | undefined;
  /** A Postgres database with no user yet: it gets no first-run user, so `start` says how to make one. */
  noUsers: boolean;
  /** `leased_by` of this process's webhook claims (a cluster primary releases them when the process dies). */
  webhookWorkerId: string;
  /** The background responses this process runs. */
  background: BackgroundResponses;
  /** Graceful: stop accepting, finish in-flight requests, stop the delivery worker, flush, close. */
  close(): Promise<void>;
  /**
   * Settles only when the server stopped on its own because it cannot go on safely (its SQLite file was
   * deleted or replaced): with the reason, after `close()` finished. The caller should exit non-zero.
   */
  failed: Promise<Error>;
}

export interface StartOptions {
  logger?: Logger;
  /** Replaces the upstream chosen from config (tests). */
  upstream?: Upstream;
  clock?: () => number;
  /**
   * How long this server vouches for a background response it runs (default BACKGROUND_LEASE_MS); it looks for
   * other instances' lapsed ones every quarter of it. Tests that kill a runner shorten it, so its run is found
   * nobody's in seconds.
   */
  backgroundLeaseMs?: number;
  /**
   * This process is a worker of a multi-process server (`cluster/primary.ts`): the primary migrated the
   * database, did the first-run setup and released stale webhook leases, and holds the rate-limit counters
   * (without Redis) and the metrics of every worker.
   */
  clusterWorker?: ClusterWorkerLink;
}

/** What a cluster worker's server asks of its primary. */
export interface ClusterWorkerLink {
  /** The Prometheus exposition of every worker's metrics together. */
  scrapeMetrics(): Promise<string>;
  /** Lets the primary collect this process's registry for `scrapeMetrics`. */
  exposeMetrics(registry: Registry): void;
}

/**
 * Opens storage, wires every part and listens.
 *
 * @example
 * const running = await startServer(loadConfig(process.env));
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const { clusterWorker } = options;
  const logger = options.logger ?? createLogger(config.logLevel, undefined, { multiProcess: clusterWorker !== undefined });
  const clock = options.clock ?? Date.now;
  // The server lock, before the webhook worker releases the leases it finds as a previous run's. A cluster's primary
  // holds it for its workers.
  const store = await openStore(config.databaseUrl, { migrate: !clusterWorker, poolSize: config.databasePoolSize, serverLock: !clusterWorker });
  // A start that fails from here on (the port taken, a key that does not open the stored secrets) gives back what it
  // opened, last first: the store above all, whose server lock would refuse the next start in this process.
  const opened: Array<() => unknown> = [() => store.close()];
  try {
    return await wire(config, options, { store, logger, clock, opened });
  } catch (err) {
    for (const release of opened.reverse()) {
      try {
        await release();
      } catch {
        // The start's own error is the one to report.
      }
    }
    throw err;
  }
}

/** What `startServer` has opened before wiring the rest; `opened` collects how to release each part it adds. */
interface Opened {
  store: Store;
  logger: Logger;
  clock: () => number;
  opened: Array<() => unknown>;
}

async function wire(config: Config, options: StartOptions, { store, logger, clock, opened }: Opened): Promise<RunningServer> {
  const { clusterWorker } = options;
  const secretBox = new SecretBox(resolveSecretKey(config.secretKey, store.handle.dataDir), config.previousSecretKeys);
  // A changed or lost key is said at start, not as every signed delivery failing afterwards.
  await checkSecretKey(secretBox, store.keys);
  // A cluster's primary says it once for every worker.
  if (!clusterWorker) await logPreviousKeyNote(secretBox, store.keys, logger);
  // A database outage is logged once, with counts, until this finds it back (see StorageFaultLog).
  storageFaultsOf(logger)?.watch(() => store.unready());
  opened.push(() => storageFaultsOf(logger)?.close());
  // One registry per server: tests run several in one process.
  const { sqlite } = store.handle;
  const metrics = createMetrics({
    backlog: () => store.deliveries.backlog(clock()),
    unready: () => store.unready(),
    freeSpace: sqlite && (() => freeSpace(sqlite)),
  });
  clusterWorker?.exposeMetrics(metrics.registry);
  const inFlight = new InFlightLimit(config.maxInFlight, { onReject: () => metrics.inFlightRejected() });
  metrics.inFlight(inFlight);
  const baseUpstream =
    options.upstream ??
    (config.upstream.baseUrl
      ? createOpenAICompatibleUpstream({
          baseUrl: config.upstream.baseUrl,
          apiKey: config.upstream.apiKey,
          timeoutMs: config.upstream.timeoutMs,
          // SVC_MAX_IN_FLIGHT bounds the requests; the pool must not queue below it.
          connections: config.maxInFlight,
          http2: config.upstream.http2,
        })
      : createOfflineModel());
  const upstream = instrumentUpstream(baseUpstream, metrics);
  opened.push(() => upstream.close());
  // ioredis is loaded only when configured: without Redis its modules would be memory spent for nothing.
  const shared = config.redisUrl ? await connectRedis(config.redisUrl, logger, metrics) : undefined;
  const redis = shared?.redis;
  if (shared) {
    opened.push(() => {
      shared.stopWatching();
      shared.redis.disconnect();
    });
  }
  if (redis) await waitForRedis(redis, logger);
  const keyCache = new KeyCache(store.keys, clock);
  const usage = new UsageSink(store.usage, logger);
  opened.push(() => usage.close());
  const webhooks = createWebhooks({
    config,
    store,
    logger,
    clock,
    secretBox,
    keyCache,
    onAttempt: (attempt) => metrics.webhookAttempt(attempt.outcome, attempt.finishedAt - attempt.createdAt),
    ...(clusterWorker ? { releaseLeasesOnStart: false } : {}),
  });
  const audit = combineSinks(usage, webhooks.audit);
  // Owned under the webhook worker's id: a cluster primary ends a dead process's background responses by it.
  const background = new BackgroundResponses({
    store: store.responses,
    // The audit of one it ends because nobody runs it: in the outbox, and counted in the usage view, as any request's.
    audit,
    keys: store.keys,
    deliveries: store.deliveries,
    owner: webhooks.worker.id,
    clock,
    logger,
    // Embedded SQLite with one server process: what was running when it stopped is nobody's now.
    exclusive: store.handle.dialect === 'sqlite' && !clusterWorker,
    ...(options.backgroundLeaseMs !== undefined && { leaseMs: options.backgroundLeaseMs }),
  });
  const threshold = config.groundingThreshold;
  const offline = createOfflineGrounder({ threshold });
  const grounder =
    config.groundingJudge === 'upstream'
      ? createJudgeGrounder({ upstream, model: config.upstream.model, offline, threshold, timeoutMs: Math.min(15_000, Math.ceil(config.upstream.timeoutMs / 4)), logger })
      : offline;
  const listener = createRequestListener({
    config,
    store,
    upstream,
    logger,
    clock,
    // A worker of a multi-process server without Redis counts in its primary, so a key's limit holds across the processes.
    rateLimiter: clusterWorker && !redis ? new ClusterRateLimiter(process as Ipc) : createRateLimiter({ redis }),
    keyCache,
    audit,
    metrics,
    inFlight,
    background,
    grounder: instrumentGrounder(grounder, metrics),
    webhooksRouter: webhooks.router,
    publicRouter: operationsRouter({ metrics, metricsToken: config.metricsToken, scrape: clusterWorker?.scrapeMetrics }),
    dashboardRouter: createDashboardRouter({
      config,
      store,
      logger,
      clock,
      secretBox,
      keyCache,
      webhooks: webhooks.actions,
      signInCounters: signInCounters({ redis, clusterWorker: clusterWorker !== undefined }),
    }),
  });

  // Node checks the header and request timeouts below every connectionsCheckingInterval (30 s by default, so a
  // 30 s header timeout fired after up to 60 s); every 5 s it fires within 5 s of its time.
  // A request without Host is answered by the listener, in the error shape.
  const server = createServer({ connectionsCheckingInterval: 5_000, requireHostHeader: false }, listener);
  server.on('clientError', answerClientError);
  server.on('checkExpectation', answerUnmetExpectation);
  server.on('checkContinue', holdContinue(listener));
  server.on('connect', answerConnect);
  const silent = trackSilentConnections(server);
  server.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', (err) => reject(listenError(err, config)));
  });
  opened.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  // Slowloris guards: headers within 30 s, the whole request (headers and body) within 120 s. Both apply
  // only while the request is being received; long streamed responses are bounded by the upstream timeout.
  server.headersTimeout = 30_000;
  server.requestTimeout = 120_000;
  server.keepAliveTimeout = config.keepAliveTimeoutMs;
  // Node keeps a request's first 1000 header lines (maxHeadersCount 2000 counts names and values) and drops the
  // rest without a word, while its parser still reads the body by a dropped Content-Length: the body was taken for
  // none, the key for missing, and a header a proxy adds after the client's (X-Forwarded-For) could be lost. The
  // 16 KiB header limit alone bounds them (431 past it).
  server.maxHeadersCount = 0;
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;

  const firstRun = store.handle.dialect === 'sqlite' && !clusterWorker ? await bootstrapFirstRun(store, clock) : undefined;
  const noUsers = store.handle.dialect === 'postgres' && !clusterWorker && (await store.users.count()) === 0;
  webhooks.start();
  background.start();
  const retention = new Retention({
    stores: { 'webhook deliveries': store.deliveries, responses: store.responses },
    expiring: { 'dashboard sessions': store.sessions },
    retentionDays: config.webhooks.retentionDays,
    clock,
    logger,
    afterPurge: store.handle.sqlite && shrinkAfterPurge(store.handle.sqlite, logger),
  });
  retention.start();
  logger.info({ url, database: store.handle.dialect, upstream: config.upstream.baseUrl ? 'remote' : 'offline' }, 'svc listening');
  // A multi-process server's primary says it once for all its workers (they share its limit and settings).
  if (!clusterWorker) warnIfFilesShort(config, logger);
  // The offline model tokenizes every answer. Its tokenizer (about half a second of CPU) is built from here on, after
  // the server listens, in short turns between which requests run; a request that comes before it is ready waits
  // for the rest of it (`loadTokenizer` hands every caller the one build).
  if (!options.upstream && !config.upstream.baseUrl) {
    loadTokenizer().catch((err: unknown) => logger.error({ err }, 'the offline model\'s tokenizer could not be loaded: its answers fail until a restart'));
  }

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      const closeStart = Date.now();
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      // close() drops the connections idle now; a keep-alive connection whose request finishes later would
      // otherwise hold the exit for keepAliveTimeout, and one that never sent a byte for a minute and more. Sweep
      // until the last one is gone.
      const sweepOnce = () => {
        server.closeIdleConnections();
        silent.close();
      };
      sweepOnce();
      const sweep = setInterval(sweepOnce, 50);
      // Background responses run on without a connection: given the same time as the open requests, then cut, each
      // stored `failed` saying the server stopped, and audited.
      const backgroundStopped = background.stop(config.shutdownTimeoutMs);
      // A stream longer than the supervisor's grace would be cut by its SIGKILL with no audit: before that, the
      // requests still open are cut here (each client sees its connection end, as when it leaves) and recorded.
      const deadline = setTimeout(() => {
        logger.warn({ open_requests: inFlight.requests, shutdown_timeout_ms: config.shutdownTimeoutMs }, 'stopping: cutting the requests still open after SVC_SHUTDOWN_TIMEOUT_MS; each is audited as cut (499)');
        server.closeAllConnections();
      }, config.shutdownTimeoutMs);
      await stopped;
      clearTimeout(deadline);
      clearInterval(sweep);
      // The requests are done or cut, and so are the background runs (cut SVC_SHUTDOWN_TIMEOUT_MS after the start):
      // what is recorded after them (their ends and audits, the last webhook attempts, the usage counters, the
      // database's close) gets SVC_SHUTDOWN_TIMEOUT_MS more, together, and never less than the SETTLE_MS the audits of
      // the cut requests are given. Each is a write, and a database that does not answer would otherwise hold the exit
      // for as long as it does not.
      const cutAt = background.size > 0 ? closeStart + config.shutdownTimeoutMs : 0;
      await stepsBy(
        [
          { name: 'background responses', run: () => backgroundStopped, left: () => ({ unfinished_background_responses: background.size }) },
          // Their audits are recorded before the store closes.
          { name: 'audits of the requests cut', run: () => inFlight.settled(), atMostMs: SETTLE_MS },
          { name: 'retention purge', run: () => retention.stop() },
          { name: 'webhook attempts', run: () => webhooks.stop() },
          { name: 'usage counters', run: () => usage.close(), left: () => ({ uncounted_requests: usage.unwrittenRequests }) },
          { name: 'upstream connections', run: () => upstream.close() },
          {
            name: 'database close',
            run: () => {
              shared?.stopWatching();
              redis?.disconnect();
              storageFaultsOf(logger)?.close();
              return store.close();
            },
          },
        ],
        restDeadline(Math.max(Date.now(), cutAt), config.shutdownTimeoutMs),
        logger,
      );
    })());

  warnOnCheckpointFallback(store, logger);
  const failed = new Promise<Error>((resolve) => {
    store.handle.onFileLost((problem) => {
      logger.fatal({ err: problem }, `stopping: ${problem.message}. Restore the file from a backup before starting again.`);
      void close().finally(() => resolve(problem));
    });
  });
  return { url, server, store, logger, firstRun, noUsers, webhookWorkerId: webhooks.worker.id, background, close, failed };
}

/**
 * Node's `listen EADDRINUSE: address already in use 127.0.0.1:8080` names neither the setting nor what to do; the
 * other codes a bind gives are said the same way.
 */
function listenError(err: NodeJS.ErrnoException, config: Config): Error {
  const where = `${config.host}:${config.port} (SVC_HOST:SVC_PORT)`;
  const why: Record<string, string> = {
    EADDRINUSE: 'the port is already in use by another program (another svc?): stop it, or set SVC_PORT to a free port',
    EACCES: 'permission denied: ports below 1024 need privileges; set SVC_PORT to 1024 or above',
    EADDRNOTAVAIL: 'no network interface of this machine has that address: set SVC_HOST to one it has, 0.0.0.0 for all',
    ENOTFOUND: 'no such host name: set SVC_HOST to an address of this machine, 0.0.0.0 for all',
  };
  const reason = (err.code && why[err.code]) ?? err.message;
  return new Error(`cannot listen on ${where}: ${reason}`, { cause: err });
}

/** Opens the shared rate-limit store's connection and watches it (see redis-watchdog.ts). */
async function connectRedis(url: string, logger: Logger, metrics: Metrics): Promise<{ redis: Redis; stopWatching(): void }> {
  const [{ Redis }, { redisOptions, watchRedis }] = await Promise.all([import('ioredis'), import('./rate-limit/redis-watchdog.js')]);
  const redis = new Redis(url, redisOptions);
  return { redis, stopWatching: watchRedis(redis, logger, metrics) };
}

/** Shared limits should hold from the first request; an unreachable Redis only delays start by a few seconds. */
async function waitForRedis(redis: Redis, logger: Logger, timeoutMs = 5000): Promise<void> {
  if (redis.status === 'ready') return;
  const ready = new Promise<boolean>((resolve) => redis.once('ready', () => resolve(true)));
  const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs).unref());
  if (!(await Promise.race([ready, timeout]))) {
    logger.warn('redis not reachable at start; rate limits are per instance until it is');
  }
}
