import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * SSE frames to a response, coalesced: frames written in the same tick (one upstream read usually carries
 * many) go out in one socket write on the next tick, not a write each — on loopback or a VM a write costs
 * more than building the frames. The headers go out on that tick too, even with no frame yet. After
 * `hold()` frames wait for `end()`, which sends them with the end of the response in a single write. When
 * the socket's buffer is full, the next `write` waits for 'drain' (or close), so a slow reader holds at
 * most one tick's frames in memory. A stream silent for `keepAliveMs` (a reasoning model thinking before its
 * first token) gets a `: keep-alive` comment, which SSE readers skip and which keeps proxies that cut idle
 * connections (nginx's 60 s `proxy_read_timeout`, load balancers) from cutting it. A timer every half of that
 * looks whether anything went out since it last looked: a write only sets a flag (no timer touched per frame,
 * the relay's hot path), and the silence before a comment is between `keepAliveMs / 2` and `keepAliveMs`.
 * A reader that takes nothing for `stallMs` while frames wait is cut off (the response destroyed, which
 * ends the wait as a close does): a client that never reads would otherwise hold the stream forever.
 *
 * @example
 * const sse = new SseWriter(res, { keepAliveMs: 15_000 });
 * await sse.write(JSON.stringify(chunk)); // a promise only when the reader is behind
 * sse.hold(); sse.write('[DONE]'); sse.end();
 */
export class SseWriter {
  private pending = '';
  private scheduled = false;
  private held = false;
  private drained: Promise<void> | null = null;
  /** Every `keepAliveMs / 2`: a comment when nothing went out since the last time (`sent`). */
  private readonly keepAlive: NodeJS.Timeout | undefined;
  private sent = false;
  private readonly flush = (): void => {
    this.scheduled = false;
    if (this.held) return;
    const { res } = this;
    if (res.destroyed || res.writableEnded) {
      this.pending = '';
      return;
    }
    if (this.pending === '') {
      // Not `headersSent`: that is true from `writeHead` on, before the header block has gone anywhere, and
      // the client would see no response until the first token.
      if ((res as ServerResponse & SentState)._headerSent !== true) res.flushHeaders();
      return;
    }
    const out = this.pending;
    this.pending = '';
    this.sent = true;
    const socket = ownSocket(res);
    if (socket) {
      if (!socket.write(`${Buffer.byteLength(out).toString(16)}\r\n${out}\r\n`)) this.behind(socket);
    } else if (!res.write(out)) this.behind(res);
  };

  private readonly stallMs: number;

  constructor(
    private readonly res: ServerResponse,
    options: { keepAliveMs?: number; stallMs?: number } = {},
  ) {
    const { keepAliveMs = 0, stallMs = 0 } = options;
    this.stallMs = stallMs;
    if (keepAliveMs > 0) this.keepAlive = setInterval(this.sendKeepAlive, Math.max(1, Math.floor(keepAliveMs / 2)));
    this.schedule();
  }

  /** Queues `data: …` for this tick's write; returns a promise only when the reader is behind. */
  write(data: string): Promise<void> | undefined {
    return this.writeEvents(`data: ${data}\n\n`);
  }

  /** Queues text already in SSE form (`event:` and `data:` lines), as `write` does. */
  writeEvents(text: string): Promise<void> | undefined {
    if (this.drained) {
      const drained = this.drained;
      this.drained = null;
      return drained.then(() => this.writeEvents(text));
    }
    this.pending += text;
    this.schedule();
    return undefined;
  }

  /** From now on frames are sent by `end()` only (the last few frames of a response, moments apart). */
  hold(): void {
    this.held = true;
  }

  end(): void {
    clearInterval(this.keepAlive);
    const { res } = this;
    const out = this.pending;
    this.pending = '';
    if (res.writableEnded) return;
    if (out === '' || res.destroyed) res.end();
    else res.end(out);
  }

  /** Nothing went out since the last look: a comment goes, unless the reader is behind anyway or the stream is over. */
  private readonly sendKeepAlive = (): void => {
    const { res } = this;
    if (res.destroyed || res.writableEnded) {
      clearInterval(this.keepAlive);
      return;
    }
    if (this.sent || this.held || this.drained) {
      this.sent = false;
      return;
    }
    this.writeEvents(': keep-alive\n\n');
  };

  /** The reader is behind: the next write waits for it, and a reader that takes nothing for `stallMs` is cut off. */
  private behind(target: ServerResponse | Socket): void {
    this.drained = waitForDrain(target, this.stallMs, this.res);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    process.nextTick(this.flush);
  }
}

/** What node's HTTP/1.1 response keeps about what it sent (internal; read only, and only when present). */
interface SentState {
  _headerSent?: unknown;
  outputData?: unknown;
}

/**
 * The socket a streamed response's frames may be written to directly, as HTTP/1.1 chunks, or null when they
 * must go through `res.write`. A model-paced stream writes about once per upstream frame, and `res.write`
 * costs each write a cork, a tick, four buffered writes and a `writev` of four pieces, where one chunk built
 * here is one `write`. Direct only once node has sent the header block and holds nothing unsent
 * (`outputData` empty), the response is chunked and not corked, and the socket is this response's and
 * writable: the bytes then go out in the order node would send them, and `res.end()` adds the last chunk as
 * usual. Anything else (the first write, HTTP/1.0, a pipelined response still queued behind another, a client
 * that half-closed) takes `res.write`, which handles it as node always has.
 */
function ownSocket(res: ServerResponse): Socket | null {
  const socket = res.socket as (Socket & { _httpMessage?: unknown }) | null;
  const sent = res as ServerResponse & SentState;
  if (!socket || !socket.writable || socket._httpMessage !== res || !res.chunkedEncoding || res.writableCorked !== 0) return null;
  if (sent._headerSent !== true || !Array.isArray(sent.outputData) || sent.outputData.length > 0) return null;
  return socket;
}

/**
 * Resolves when `target` can take more, or is gone. Both listeners (and the timer) go once either fires. A
 * reader that takes nothing for `stallMs` (0: no limit) is cut off: `res` (the response `target` carries)
 * is destroyed, which closes `target` and so ends the wait.
 */
export function waitForDrain(target: ServerResponse | Socket, stallMs = 0, res: ServerResponse | Socket = target): Promise<void> {
  return new Promise<void>((resolve) => {
    const stall = stallMs > 0 ? setTimeout(() => res.destroy(), stallMs) : undefined;
    const done = (): void => {
      clearTimeout(stall);
      target.off('drain', done);
      target.off('close', done);
      resolve();
    };
    target.on('drain', done);
    target.on('close', done);
  });
}
