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
let db;
try {
  db = new SQLite(workerData.file, { fileMustExist: true });
  db.pragma('mmap_size = 0');
} catch (error) {
  // SQLite's own error class reaches the parent as its code alone; a plain Error keeps the message.
  throw new Error('checkpoint thread: cannot open ' + workerData.file + ': ' + ((error && error.message) || error));
}
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
 * The thread starts at the first request (an admin command that opens the database never starts it). At most
 * one checkpoint runs at a time; a request while one runs is refused (the next tick asks again). A thread that
 * failed (its connection could not open, it died) is `failed`: the caller checkpoints on its own connection.
 *
 * @example
 * const thread = new CheckpointThread('/var/lib/svc/svc.db');
 * new WalCheckpointer(sqlite, { intervalMs: 1000, changes: 1500, checkpoint: () => thread.request() });
 */
export class CheckpointThread {
  private worker: Worker | undefined;
  private exited: Promise<void> | undefined;
  private running = false;
  private closed = false;
  /** The thread failed or ended other than by `close()`: no request will start a checkpoint again. */
  failed = false;
  /** Checkpoints finished, and the last error one reported (a full disk) or the thread's own, for tests and logs. */
  completed = 0;
  lastError: string | undefined;

  constructor(private readonly file: string) {}

  /** Asks for a checkpoint; false when one is still running, or the thread is closed or failed. */
  request(): boolean {
    if (this.running || this.closed || this.failed) return false;
    this.running = true;
    this.start().postMessage('checkpoint');
    return true;
  }

  /** Closes the thread's connection and ends it (after a checkpoint it is running). */
  async close(): Promise<void> {
    if (this.closed) return this.exited;
    this.closed = true;
    if (!this.worker || !this.exited) return;
    const worker = this.worker;
    worker.postMessage('close');
    const timer = setTimeout(() => void worker.terminate(), 5000);
    await this.exited;
    clearTimeout(timer);
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(THREAD_CODE, { eval: true, workerData: { file: this.file, driver } });
    worker.unref();
    worker.on('message', (answer: string) => {
      this.running = false;
      this.completed += 1;
      this.lastError = answer === 'done' ? undefined : answer;
    });
    worker.on('error', (error: unknown) => {
      this.lastError = error instanceof Error ? error.message : String(error);
    });
    this.exited = new Promise<void>((resolve) =>
      worker.once('exit', () => {
        if (!this.closed) this.failed = true;
        this.running = false;
        resolve();
      }),
    );
    this.worker = worker;
    return worker;
  }
}
