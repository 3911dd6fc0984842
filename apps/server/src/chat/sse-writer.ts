import type { ServerResponse } from 'node:http';

/**
 * SSE frames to a response, coalesced: frames written in the same tick (one upstream read usually carries
 * many) go out in one socket write on the next tick, not a write each — on loopback or a VM a write costs
 * more than building the frames. The headers go out on that tick too, even with no frame yet. After
 * `hold()` frames wait for `end()`, which sends them with the end of the response in a single write. When
 * the socket's buffer is full, the next `write` waits for 'drain' (or close), so a slow reader holds at
 * most one tick's frames in memory.
 *
 * @example
 * const sse = new SseWriter(res);
 * await sse.write(JSON.stringify(chunk)); // a promise only when the reader is behind
 * sse.hold(); sse.write('[DONE]'); sse.end();
 */
export class SseWriter {
  private pending = '';
  private scheduled = false;
  private held = false;
  private drained: Promise<void> | null = null;
  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.held) return;
    const { res } = this;
    if (res.destroyed || res.writableEnded) {
      this.pending = '';
      return;
    }
    if (this.pending === '') {
      if (!res.headersSent) res.flushHeaders();
      return;
    }
    const out = this.pending;
    this.pending = '';
    if (!res.write(out)) this.drained = waitForDrain(res);
  };

  constructor(private readonly res: ServerResponse) {
    this.schedule();
  }

  /** Queues `data: …` for this tick's write; returns a promise only when the reader is behind. */
  write(data: string): Promise<void> | undefined {
    if (this.drained) {
      const drained = this.drained;
      this.drained = null;
      return drained.then(() => this.write(data));
    }
    this.pending += `data: ${data}\n\n`;
    this.schedule();
    return undefined;
  }

  /** From now on frames are sent by `end()` only (the last few frames of a response, moments apart). */
  hold(): void {
    this.held = true;
  }

  end(): void {
    const { res } = this;
    const out = this.pending;
    this.pending = '';
    if (res.writableEnded) return;
    if (out === '' || res.destroyed) res.end();
    else res.end(out);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(this.flush);
  }
}

/** Resolves when `res` can take more, or is gone. Both listeners go once either fires. */
function waitForDrain(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
