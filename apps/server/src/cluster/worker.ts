import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Config } from '../config.js';
import { startServer, type ClusterWorkerLink } from '../server.js';
import { stopRequested as stopAsked } from './early.js';
import { isSvcMessage, type PrimaryMessage, type WorkerMessage } from './messages.js';

/** How long a `/metrics` request waits for the primary's aggregation (prom-client gives up on workers after 5 s). */
const METRICS_TIMEOUT_MS = 10_000;

/**
 * One worker of a multi-process server (forked by `startPrimary`): the full server — HTTP API, dashboard,
 * webhook delivery worker — on the port the primary shares. Resolves once the primary asked it to stop (or
 * went away) and it has finished its in-flight requests and webhook attempts.
 *
 * @example
 * if (cluster.isWorker) await runClusterWorker(config);
 */
export async function runClusterWorker(config: Config): Promise<void> {
  // SIGINT, SIGTERM and SIGHUP are ignored and a stop asked while starting is kept from the first moment (early.ts).
  const link = linkToPrimary();
  const running = await startServer(config, { clusterWorker: link });
  send({ svc: 'ready', url: running.url, webhookWorkerId: running.webhookWorkerId });
  // A lost database file stops this process on its own (logged fatal); it exits non-zero, like a crash.
  await Promise.race([
    link.stopRequested,
    running.failed.then((err) => {
      throw err;
    }),
  ]);
  await running.close();
}

function send(message: WorkerMessage): void {
  // Sent or not (the primary may be gone): a failure is no 'error' event to crash on.
  if (process.connected) process.send!(message, undefined, {}, () => {});
}

function linkToPrimary(): ClusterWorkerLink & { stopRequested: Promise<void> } {
  const pending = new Map<number, { resolve: (text: string) => void; reject: (err: Error) => void; timer: NodeJS.Timeout }>();
  let nextId = 0;
  let requestStop!: () => void;
  const stopRequested = Promise.race([stopAsked, new Promise<void>((resolve) => (requestStop = resolve))]);
  process.on('message', (message: unknown) => {
    if (!isSvcMessage<PrimaryMessage>(message) || message.svc !== 'metrics') return;
    const waiting = pending.get(message.id);
    if (!waiting) return;
    pending.delete(message.id);
    clearTimeout(waiting.timer);
    if ('text' in message) waiting.resolve(message.text);
    else waiting.reject(new Error(`could not collect the metrics of every process: ${message.error}`));
  });
  // The primary is gone (killed): nobody restarts us nor holds the rate limits any more. Node's cluster code,
  // whose 'disconnect' listener runs first, exits the worker at once (requests in flight are cut, as they are
  // when a supervisor kills the whole group); should it not, this stops like on a stop.
  process.once('disconnect', () => requestStop());
  return {
    stopRequested,
    exposeMetrics(registry: Registry) {
      AggregatorRegistry.setRegistries([registry]);
      // Constructing one is how prom-client starts answering the primary's requests for this process's metrics.
      new AggregatorRegistry();
    },
    scrapeMetrics() {
      return new Promise<string>((resolve, reject) => {
        if (!process.connected) return reject(new Error('the primary process is gone'));
        const id = nextId++;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error('the primary did not answer with the metrics in time'));
        }, METRICS_TIMEOUT_MS);
        pending.set(id, { resolve, reject, timer });
        send({ svc: 'metrics', id });
      });
    },
  };
}
