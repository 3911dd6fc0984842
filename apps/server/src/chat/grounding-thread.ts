import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { boundedInput, type GroundingInput, type GroundingResult } from '@svc/grounding';

/** What the thread is sent: one check (`grounding-worker.ts`). */
export interface GroundingRequestMessage {
  id: number;
  input: GroundingInput;
  threshold: number | undefined;
}

/**
 * Runs grounding checks of large inputs on one worker thread, so a request with 100 KB of sources does not hold
 * the event loop while it is checked: other requests go on meanwhile. Chat-sized checks stay inline, where they cost less than the message passing.
 * The thread is started on first use and does not keep the process alive.
 */
export class GroundingThread {
  private worker: Worker | undefined;
  private next = 0;
  private readonly pending = new Map<number, { resolve(r: GroundingResult): void; reject(e: Error): void }>();

  private constructor(private readonly script: URL) {}

  /** The thread beside the build (`dist/grounding-worker.js`), or undefined where there is none (tests from source). */
  static beside(moduleUrl: string): GroundingThread | undefined {
    const script = new URL('./grounding-worker.js', moduleUrl);
    return existsSync(fileURLToPath(script)) ? new GroundingThread(script) : undefined;
  }

  /** The check of `input` on the thread: `checkGrounding(input, { threshold })`. */
  check(input: GroundingInput, threshold?: number): Promise<GroundingResult> {
    const worker = this.start();
    const id = this.next++;
    // Only what the check reads is copied to the thread (a 9 MiB message is 128 KB of it).
    const bounded = boundedInput(input);
    return new Promise((resolve, reject) => {
      this.pending.set(id, {
        resolve: (result) => resolve(bounded.truncated && result.checked ? { ...result, truncated: true } : result),
        reject,
      });
      worker.postMessage({ id, input: bounded.input, threshold } satisfies GroundingRequestMessage);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.script);
    worker.unref();
    worker.on('message', (m: { id: number; result?: GroundingResult; error?: string }) => {
      const waiting = this.pending.get(m.id);
      if (!waiting) return;
      this.pending.delete(m.id);
      if (m.result) waiting.resolve(m.result);
      else waiting.reject(new Error(m.error ?? 'grounding worker failed'));
    });
    // A thread that dies takes its pending checks with it; the next check starts a new one.
    const fail = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const [, waiting] of this.pending) waiting.reject(err);
      this.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`grounding worker exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }
}
