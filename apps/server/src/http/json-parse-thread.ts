import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { JsonBodyProblem } from './json-parse.js';

/**
 * Parses large request bodies on one worker thread: decoding and parsing 800 KB of retrieved documents is
 * 5–15 ms of one step on the main thread, in which every other stream waits; the parsed value comes back by
 * structured clone, which copies a long string whole (a memcpy) instead of scanning it character by character.
 * Started on first use; does not keep the process alive.
 */
export class JsonParseThread {
  private worker: Worker | undefined;
  private next = 0;
  private readonly pending = new Map<number, { resolve(r: { value: unknown } | { problem: JsonBodyProblem }): void; reject(e: Error): void }>();

  private constructor(private readonly script: URL) {}

  /** The thread beside the build (`dist/json-parse-worker.js`), or undefined where there is none (tests from source). */
  static beside(moduleUrl: string): JsonParseThread | undefined {
    const script = new URL('./json-parse-worker.js', moduleUrl);
    return existsSync(fileURLToPath(script)) ? new JsonParseThread(script) : undefined;
  }

  /** `parseBodyBytes(bytes)` on the thread. `bytes` is handed over (transferred): unusable afterwards. */
  parse(bytes: Uint8Array): Promise<{ value: unknown } | { problem: JsonBodyProblem }> {
    const worker = this.start();
    const id = this.next++;
    // A view on part of a larger (pooled) buffer is copied out first: transferring it would take the rest too.
    const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer ? bytes : Uint8Array.prototype.slice.call(bytes);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, bytes: own }, [own.buffer as ArrayBuffer]);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.script);
    worker.unref();
    worker.on('message', (m: { id: number; value?: unknown; problem?: JsonBodyProblem; error?: string }) => {
      const waiting = this.pending.get(m.id);
      if (!waiting) return;
      this.pending.delete(m.id);
      if (m.error !== undefined) waiting.reject(new Error(m.error));
      else waiting.resolve(m.problem !== undefined ? { problem: m.problem } : { value: m.value });
    });
    // A thread that dies takes its pending parses with it; the next parse starts a new one.
    const fail = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const [, waiting] of this.pending) waiting.reject(err);
      this.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`JSON parse worker exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }
}
