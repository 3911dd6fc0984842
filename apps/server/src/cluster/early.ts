import cluster from 'node:cluster';
import { outputGone } from '../logging/output-gone.js';

/**
 * What has to be in place before anything else of the command loads, for as long as loading takes (a second or
 * more on a busy host). Imported first by bin.ts.
 *
 * A stdout or stderr nobody reads any more (a closed pipe, a hung-up terminal: see outputGone) makes writes
 * fail; unhandled, that 'error' event would crash a serving process, or one in its graceful stop. The server
 * keeps going and its output is dropped (the logger does the same for its own lines).
 */
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (!outputGone(err)) throw err;
  });
}

let requestStop!: () => void;
/** Resolves once the primary asked this worker to stop, even while it was still starting. */
export const stopRequested = new Promise<void>((resolve) => (requestStop = resolve));

if (cluster.isWorker) {
  // Ctrl-C, a service manager's stop and a closed terminal's hangup reach every process of the group at once. The
  // primary answers them by stopping its workers and waiting for them; a worker that stopped on its own would race
  // that and look like a crash (or, while starting, like a failed start).
  const ignore = () => {};
  process.on('SIGINT', ignore);
  process.on('SIGTERM', ignore);
  process.on('SIGHUP', ignore);
  process.on('message', (message: unknown) => {
    if (typeof message === 'object' && message !== null && (message as { svc?: unknown }).svc === 'stop') requestStop();
  });
  // A message that could not reach the primary (it went away: EPIPE, channel closed) is dropped, not a crash;
  // prom-client sends without a callback, so its failures arrive here.
  process.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE' && err.code !== 'ERR_IPC_CHANNEL_CLOSED') throw err;
  });
  // The primary's /metrics asks every connected process for its metrics and fails after 5 s without an answer
  // from each: a process still starting (a replacement of a crashed one) answers with none until the server's
  // registry takes over (`exposeMetrics`), so a scrape during a restart does not fail. Imported here, in a worker
  // only: an admin command loads no serving stack.
  void import('prom-client')
    .then(({ AggregatorRegistry }) => {
      AggregatorRegistry.setRegistries([]);
      new AggregatorRegistry();
    })
    .catch(() => {}) // metrics of a starting process are no reason to fail its start
    .finally(() => {
      // A message that arrives before a listener exists is lost: the primary holds its stop until it hears this.
      process.send!({ svc: 'early' }, undefined, {}, () => {});
    });
}
