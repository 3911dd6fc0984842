import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * The thread's code (CommonJS: an `eval` worker), kept here rather than in a file of its own so that it runs
 * the same from the build and from the sources. It opens its own connection to the database file and, at each
 * message, copies what the WAL holds into it (`wal_checkpoint(PASSIVE)`: it never waits for the writer, and
 * the writer never waits for it), then answers.
 */
const THREAD_CODE = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.driver);
const db = new SQLite(workerData.file, { fileMustExist: true });
db.pragma('mmap_size = 0');
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage('done');
  } catch (error) {
    parentPort.postMessage(String(error && error.message || error));
  }
});
`;

/**
 * WAL checkpoints on a thread of their own. A checkpoint copies the pages written since the last one into the
 * database file and waits for two fsyncs: on the event loop that held every request for as long (12–20 ms each
 * second under load on our test host, about 50 ms after a request that stored megabytes). From another
 * connection the copy runs beside the writer: WAL mode lets one checkpointer and the writer work at once.
 *
 * At most one checkpoint runs at a time; a request while one runs is dropped (the next tick asks again).
 *
 * @example
 * const thread = new CheckpointThread('/var/lib/svc/svc.db');
 * new WalCheckpointer(sqlite, { intervalMs: 1000, changes: 1500, checkpoint: () => thread.request() });
 */
export class CheckpointThread {
  private readonly worker: Worker;
  private running = false;
  private closed = false;
  /** Checkpoints finished, and the last error a checkpoint reported (a full disk), for tests and logs. */
  completed = 0;
  lastError: string | undefined;

  constructor(file: string) {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(THREAD_CODE, { eval: true, workerData: { file, driver } });
    this.worker.unref();
    this.worker.on('message', (answer: string) => {
      this.running = false;
      this.completed += 1;
      this.lastError = answer === 'done' ? undefined : answer;
    });
    // A thread that failed (its connection could not open) leaves checkpoints to SQLite's autocheckpoint.
    this.worker.on('error', (error) => {
      this.closed = true;
      this.lastError = error.message;
    });
  }

  /** Asks for a checkpoint; false when one is still running (or the thread is gone). */
  request(): boolean {
    if (this.running || this.closed) return false;
    this.running = true;
    this.worker.postMessage('checkpoint');
    return true;
  }

  /** Closes the thread's connection and ends it (after a checkpoint it is running). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.postMessage('close');
    const timer = setTimeout(() => void this.worker.terminate(), 5000);
    await exited;
    clearTimeout(timer);
  }
}
