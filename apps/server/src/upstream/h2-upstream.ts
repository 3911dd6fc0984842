import { connect as connectHttp2, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { isIP } from 'node:net';
import { connect as connectTls, type TLSSocket } from 'node:tls';
import { Dispatcher, errors, type Pool } from '../http/undici-dispatchers.js';

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = constants;

/**
 * Streams one HTTP/2 connection carries at most. RFC 9113 §6.5.2 recommends servers allow at least 100; a
 * stream past the server's own limit would wait inside the session, unseen, so svc stays at that floor (or the
 * server's lower one) and opens another connection instead.
 */
export const H2_STREAMS_PER_CONNECTION = 100;

/** How often a stream the upstream refused unprocessed (REFUSED_STREAM, or past a GOAWAY's last stream) is sent again. */
const REFUSED_RETRIES = 3;

/**
 * Receive windows (undici's HTTP/2 defaults): HTTP/2's own 64 KB would let a session carry 64 KB per round
 * trip across all its streams, a long non-streamed answer from a distant upstream a round trip per 64 KB.
 */
const STREAM_WINDOW = 256 * 1024;
const SESSION_WINDOW = 512 * 1024;

/** An idle session is closed after this long, as undici's pool closes an idle keep-alive connection. */
const IDLE_SESSION_MS = 30_000;

/**
 * The request handler undici's `request()` gives a dispatcher (its legacy hooks, which undici 7's own clients
 * call too).
 */
interface RequestHandler {
  onConnect?(abort: (reason?: Error) => void): void;
  onHeaders?(statusCode: number, rawHeaders: string[], resume: () => void, statusText: string): boolean | void;
  onData?(chunk: Buffer): boolean | void;
  onComplete?(trailers: string[]): void;
  onError?(error: Error): void;
}

export interface H2UpstreamOptions {
  /** Streams in flight the dispatcher must carry; null = unbounded. Sessions: ⌈connections / 100⌉ at most. */
  connections: number | null;
  connectTimeoutMs: number;
  /** PEM certificates to trust instead of Node's default ones. */
  ca?: string;
  /** Where requests go once a handshake with the origin picks http/1.1. */
  h1: Pool;
  /** Takes the connection whose handshake picked http/1.1, for `h1` to use first. */
  spare?: (socket: TLSSocket) => void;
}

/**
 * svc's dispatcher for an https upstream with SVC_UPSTREAM_HTTP2=auto: HTTP/2 over node:http2 while the
 * origin's TLS handshake picks h2, undici's HTTP/1.1 pool (`h1`) once one picks http/1.1.
 *
 * Not undici's HTTP/2 client: undici 7 fails every stream on a session when the server sends GOAWAY, even a
 * graceful one (code 0: "no new streams, finish what you have"; nginx sends it after keepalive_requests, every
 * server on a graceful restart), which would cut up to 100 answers mid-stream at once. Here a GOAWAY only stops
 * new streams on that session; those in flight finish, and the next requests open a new session. A stream the
 * server did not process (REFUSED_STREAM, or numbered past the GOAWAY's last stream: RFC 9113 §8.7 calls those
 * safe to retry) is sent again on another session, up to REFUSED_RETRIES times; nothing else is ever re-sent
 * (a replay would be a second paid LLM call).
 *
 * Each session carries up to H2_STREAMS_PER_CONNECTION streams, and there are at most ⌈connections / 100⌉
 * sessions: a request beyond them all waits here for a stream to end (svc's in-flight limit keeps that from
 * happening). While the first handshake is under way, requests wait for its answer here rather than opening a
 * connection each.
 *
 * @example
 * const dispatcher = new H2Upstream('https://api.openai.com', { connections: 4096, connectTimeoutMs: 10_000, h1: new Pool(origin) });
 * const { statusCode, body } = await dispatcher.request({ origin, path: '/v1/chat/completions', method: 'POST', body, headers });
 */
export class H2Upstream extends Dispatcher {
  private protocol: 'unknown' | 'h2' | 'http/1.1' = 'unknown';
  private state: 'open' | 'closing' | 'destroyed' = 'open';
  private probe: TLSSocket | null = null;
  /** Requests that came while the first handshake was under way. */
  private parked: Array<[Dispatcher.DispatchOptions, RequestHandler]> = [];
  /** Started calls no session has room for yet. */
  private readonly queued: H2Call[] = [];
  private readonly sessions = new Set<H2Session>();
  private readonly maxSessions: number;
  private readonly url: URL;
  readonly origin: string;
  private closed: Promise<void> | null = null;

  constructor(
    origin: string,
    private readonly options: H2UpstreamOptions,
  ) {
    super();
    this.url = new URL(origin);
    this.origin = this.url.origin;
    this.maxSessions = options.connections === null ? Infinity : Math.max(1, Math.ceil(options.connections / H2_STREAMS_PER_CONNECTION));
  }

  override dispatch(options: Dispatcher.DispatchOptions, dispatchHandler: Dispatcher.DispatchHandler): boolean {
    const handler = dispatchHandler as RequestHandler;
    if (this.state !== 'open') {
      const error = this.state === 'closing' ? new errors.ClientClosedError() : new errors.ClientDestroyedError();
      queueMicrotask(() => handler.onError?.(error));
      return true;
    }
    if (this.protocol === 'http/1.1') return this.options.h1.dispatch(options, dispatchHandler);
    if (this.protocol === 'h2') {
      this.startCall(options, handler);
      return true;
    }
    const entry: [Dispatcher.DispatchOptions, RequestHandler] = [options, handler];
    this.parked.push(entry);
    // Abortable while it waits for the first handshake (up to the connect timeout): its caller's signal and timers
    // end it at once. The pool it then goes to gives it an abort of its own.
    handler.onConnect?.((reason) => {
      const i = this.parked.indexOf(entry);
      if (i < 0) return;
      this.parked.splice(i, 1);
      handler.onError?.(reason ?? new errors.RequestAbortedError());
    });
    if (this.probe === null) this.startProbe();
    return true;
  }

  /** A new call over HTTP/2; a request it cannot send (a body or header it cannot take) fails through its handler. */
  private startCall(options: Dispatcher.DispatchOptions, handler: RequestHandler): void {
    let call: H2Call;
    try {
      call = new H2Call(this, options, handler);
    } catch (error) {
      handler.onError?.(error as Error);
      return;
    }
    this.start(call);
  }

  override close(): Promise<void> {
    if (this.closed) return this.closed;
    if (this.state === 'open') this.state = 'closing';
    this.failWaiting(new errors.ClientClosedError());
    const sessions = [...this.sessions].map((s) => s.close());
    this.closed = Promise.all([this.options.h1.close(), ...sessions]).then(() => undefined);
    return this.closed;
  }

  override destroy(): Promise<void> {
    this.state = 'destroyed';
    const error = new errors.ClientDestroyedError();
    this.failWaiting(error);
    const sessions = [...this.sessions].map((s) => s.destroy(error));
    return Promise.all([this.options.h1.destroy(), ...sessions]).then(() => undefined);
  }

  /** A call a session could not take (gone, refused it unprocessed): another one, or the queue. */
  start(call: H2Call): void {
    if (this.state !== 'open') {
      call.fail(this.state === 'closing' ? new errors.ClientClosedError() : new errors.ClientDestroyedError());
      return;
    }
    const session = this.sessionWithRoom();
    if (session) session.add(call);
    else this.queued.push(call);
  }

  /** A session can take more: the calls waiting for room, in order. */
  roomFreed(): void {
    while (this.queued.length > 0) {
      const session = this.sessionWithRoom();
      if (!session) return;
      session.add(this.queued.shift()!);
    }
  }

  sessionEnded(session: H2Session): void {
    this.sessions.delete(session);
    this.roomFreed();
  }

  /** A call aborted before any session took it. */
  unqueue(call: H2Call): void {
    const i = this.queued.indexOf(call);
    if (i >= 0) this.queued.splice(i, 1);
  }

  /**
   * A session that can take one more call, opened if need be. Sessions draining after a GOAWAY do not count
   * toward the maximum: their streams may last minutes, and new calls must not wait for them.
   */
  private sessionWithRoom(): H2Session | null {
    let live = 0;
    for (const session of this.sessions) {
      if (session.hasRoom()) return session;
      if (!session.isDraining) live += 1;
    }
    if (live >= this.maxSessions) return null;
    const session = new H2Session(this, this.openSocket());
    this.sessions.add(session);
    return session;
  }

  /** A TLS connection to the origin offering h2 and http/1.1, with the connect timeout until its handshake ends. */
  openSocket(): TLSSocket {
    const { hostname, port } = this.url;
    const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    const socket = connectTls({
      host,
      port: Number(port || 443),
      ALPNProtocols: ['h2', 'http/1.1'],
      ...(isIP(host) ? {} : { servername: host }),
      ...(this.options.ca ? { ca: this.options.ca } : {}),
    });
    // As undici's connector sets them: frames go out as written, and a dead peer is found.
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    socket.setTimeout(this.options.connectTimeoutMs, () => socket.destroy(new errors.ConnectTimeoutError()));
    socket.once('secureConnect', () => socket.setTimeout(0));
    return socket;
  }

  /** The first handshake: its ALPN answer decides the protocol for the dispatcher's lifetime. */
  private startProbe(): void {
    const socket = this.openSocket();
    this.probe = socket;
    const failed = (error: Error): void => {
      this.probe = null;
      socket.destroy();
      // Every request that waited shares the handshake's error at once; the next request tries again.
      for (const [, handler] of this.takeParked()) handler.onError?.(error);
    };
    socket.once('error', failed);
    socket.once('close', () => {
      if (this.probe === socket) failed(new errors.SocketError('The connection closed during the TLS handshake.'));
    });
    socket.once('secureConnect', () => {
      socket.off('error', failed);
      this.probe = null;
      if (socket.alpnProtocol === 'h2' && this.state === 'open') {
        this.protocol = 'h2';
        const session = new H2Session(this, socket);
        this.sessions.add(session);
        for (const [options, handler] of this.takeParked()) this.startCall(options, handler);
        return;
      }
      if (this.state !== 'open') {
        socket.destroy();
        return;
      }
      this.protocol = 'http/1.1';
      if (this.options.spare) {
        // Until undici's pool takes it (and listens itself), an error on it must not be an uncaught one.
        socket.on('error', () => {});
        this.options.spare(socket);
      } else socket.destroy();
      for (const [options, handler] of this.takeParked()) this.options.h1.dispatch(options, handler as Dispatcher.DispatchHandler);
    });
  }

  private failWaiting(error: Error): void {
    this.probe?.destroy();
    this.probe = null;
    for (const [, handler] of this.takeParked()) handler.onError?.(error);
    for (const call of this.queued.splice(0)) call.fail(error);
  }

  private takeParked(): Array<[Dispatcher.DispatchOptions, RequestHandler]> {
    const parked = this.parked;
    this.parked = [];
    return parked;
  }
}

/**
 * One HTTP/2 connection: its calls, those waiting for the handshake included. After a GOAWAY (or when it
 * failed) it takes no new call; its streams in flight go on, and it leaves the dispatcher once closed.
 */
class H2Session {
  private readonly session: ClientHttp2Session;
  private ready = false;
  private draining = false;
  /** Calls on this session: waiting for the handshake or with a stream open. */
  private count = 0;
  private limit = H2_STREAMS_PER_CONNECTION;
  private readonly waiting: H2Call[] = [];
  private idleTimer: NodeJS.Timeout | null = null;
  private readonly closedPromise: Promise<void>;
  private error: Error | null = null;
  /** The last stream the server said it processed, once it sent GOAWAY. */
  goawayLastStream: number | null = null;

  constructor(
    private readonly owner: H2Upstream,
    private readonly socket: TLSSocket,
  ) {
    this.session = connectHttp2(owner.origin, { createConnection: () => socket, settings: { enablePush: false, initialWindowSize: STREAM_WINDOW } });
    const session = this.session;
    this.closedPromise = new Promise<void>((resolve) => session.once('close', resolve));
    // A session error closes the session; each stream on it fails with its own error.
    session.on('error', (error: Error) => void (this.error ??= error));
    session.on('remoteSettings', (settings) => {
      this.limit = Math.max(1, Math.min(H2_STREAMS_PER_CONNECTION, settings.maxConcurrentStreams ?? H2_STREAMS_PER_CONNECTION));
    });
    session.once('connect', () => {
      // Node still emits 'connect' for a session destroyed while it connected (the dispatcher closed meanwhile).
      if (session.destroyed || session.closed) return;
      if (socket.alpnProtocol !== 'h2') {
        // The first handshake picked h2 and this one did not (a balancer over mixed servers): no h2 here. Its
        // calls fail with this error when the session closes.
        session.destroy(new errors.SocketError(`The upstream picked ${String(socket.alpnProtocol)} on a new connection after h2.`));
        return;
      }
      this.ready = true;
      session.setLocalWindowSize(SESSION_WINDOW);
      for (const call of this.waiting.splice(0)) call.open(this, this.session);
      this.owner.roomFreed();
    });
    session.once('goaway', (_code: number, lastStreamID: number) => {
      this.goawayLastStream = lastStreamID;
      this.drain();
    });
    session.once('close', () => {
      this.draining = true;
      if (this.idleTimer) clearTimeout(this.idleTimer);
      // Calls still waiting here never got a stream: the connection failed (or the dispatcher closed) first.
      const error = this.error ?? new errors.SocketError('The upstream connection closed before the request was sent.');
      for (const call of this.waiting.splice(0)) call.fail(error);
      this.owner.sessionEnded(this);
    });
    session.unref();
  }

  get isDraining(): boolean {
    return this.draining;
  }

  hasRoom(): boolean {
    return !this.draining && this.count < this.limit;
  }

  add(call: H2Call): void {
    this.count += 1;
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
    this.session.ref();
    if (this.ready) call.open(this, this.session);
    else {
      this.waiting.push(call);
      call.waitOn(this);
    }
  }

  /** A call aborted while it waited for the handshake. */
  forget(call: H2Call): void {
    const i = this.waiting.indexOf(call);
    if (i >= 0) {
      this.waiting.splice(i, 1);
      this.released();
    }
  }

  /** A call's stream ended (or it never got one). */
  released(): void {
    this.count -= 1;
    if (this.count === 0) {
      this.session.unref();
      if (this.draining) {
        this.end();
        return;
      }
      this.idleTimer = setTimeout(() => void this.close(), IDLE_SESSION_MS);
      this.idleTimer.unref();
    }
    if (!this.draining) this.owner.roomFreed();
  }

  /** No new stream from now on: GOAWAY, or the stream we opened found the session unusable. */
  drain(): void {
    if (this.draining) return;
    this.draining = true;
    // Node closes a session itself after a graceful GOAWAY (streams in flight go on) and destroys it after any other.
    this.owner.roomFreed();
  }

  close(): Promise<void> {
    this.draining = true;
    if (this.count === 0) this.end();
    // After this turn: streams opened in it have their HEADERS written before our GOAWAY, which would refuse them.
    else setImmediate(() => void (this.session.closed || this.session.close()));
    return this.closedPromise;
  }

  /**
   * No stream left: the connection goes now. Not node's graceful close, which ends the socket and then waits for
   * the peer to close its side: a server that keeps a stream it refused open never does, and the session would
   * stay (and keep `close()` waiting) for good.
   */
  private end(): void {
    if (!this.session.destroyed) this.session.destroy();
    // Node may have destroyed the session already (after a GOAWAY) and still wait for the peer's side of the socket.
    this.socket.destroy();
  }

  destroy(error: Error): Promise<void> {
    this.draining = true;
    if (!this.session.destroyed) this.session.destroy(error);
    this.socket.destroy();
    return this.closedPromise;
  }

}

/**
 * One request over HTTP/2. The body is read from the request options once, and kept only until the response
 * starts, for a stream the server refused unprocessed.
 */
class H2Call {
  private readonly headers: OutgoingHttpHeaders;
  private body: Buffer | null;
  private stream: ClientHttp2Stream | null = null;
  private session: H2Session | null = null;
  private waitingOn: H2Session | null = null;
  private responded = false;
  private done = false;
  private retries = 0;
  private streamError: Error | null = null;

  constructor(
    private readonly owner: H2Upstream,
    options: Dispatcher.DispatchOptions,
    private readonly handler: RequestHandler,
  ) {
    this.headers = requestHeaders(options);
    this.body = requestBody(options.body);
    handler.onConnect?.(this.abort);
  }

  /** The caller (its signal, or the response body destroyed early) gives up. */
  private readonly abort = (reason?: Error): void => {
    if (this.done) return;
    const error = reason ?? new errors.RequestAbortedError();
    if (this.stream) {
      this.stream.close(NGHTTP2_CANCEL);
    } else if (this.waitingOn) {
      this.waitingOn.forget(this);
      this.waitingOn = null;
    } else this.owner.unqueue(this);
    this.fail(error);
  };

  waitOn(session: H2Session): void {
    this.waitingOn = session;
  }

  open(session: H2Session, http2: ClientHttp2Session): void {
    this.waitingOn = null;
    if (this.done) {
      session.released();
      return;
    }
    this.session = session;
    let stream: ClientHttp2Stream;
    try {
      stream = http2.request(this.headers, { endStream: this.body === null });
    } catch (error) {
      this.session = null;
      session.released();
      const code = (error as { code?: unknown }).code;
      if (code === 'ERR_HTTP2_GOAWAY_SESSION' || code === 'ERR_HTTP2_INVALID_SESSION' || code === 'ERR_HTTP2_OUT_OF_STREAMS') {
        // The session took a GOAWAY or closed between the check and the request: nothing was sent.
        session.drain();
        this.refused(error as Error);
      } else this.fail(error as Error); // a header it cannot send: the same on any session
      return;
    }
    this.stream = stream;
    stream.on('response', this.onResponse);
    stream.on('end', this.onEnd);
    stream.on('error', this.onStreamError);
    stream.on('close', this.onClose);
    if (this.body !== null) stream.end(this.body);
  }

  /** Nothing of this call reached the server's application: sent again elsewhere, a few times at most. */
  refused(error: Error): void {
    if (this.done) return;
    if (this.retries >= REFUSED_RETRIES) {
      this.fail(error);
      return;
    }
    this.retries += 1;
    this.owner.start(this);
  }

  fail(error: Error): void {
    if (this.done) return;
    this.done = true;
    this.body = null;
    this.handler.onError?.(error);
  }

  private readonly onResponse = (headers: IncomingHttpHeaders): void => {
    if (this.done) return;
    this.responded = true;
    this.body = null;
    const stream = this.stream!;
    const raw: string[] = [];
    for (const name in headers) {
      if (name.charCodeAt(0) === 58 /* ':' */) continue;
      const value = headers[name];
      if (Array.isArray(value)) for (const v of value) raw.push(name, v);
      else if (value !== undefined) raw.push(name, String(value));
    }
    const more = this.handler.onHeaders?.(Number(headers[':status']), raw, this.resume, '');
    // Read from now on: node emits 'response' a tick after the HEADERS frame, and DATA that came in the same
    // read would otherwise reach the handler before its headers.
    stream.on('data', this.onData);
    if (more === false) stream.pause();
  };

  private readonly resume = (): void => {
    this.stream?.resume();
  };

  private readonly onData = (chunk: Buffer): void => {
    if (this.done) return;
    if (this.handler.onData?.(chunk) === false) this.stream!.pause();
  };

  private readonly onEnd = (): void => {
    if (this.done || !this.responded) return;
    this.done = true;
    this.handler.onComplete?.([]);
  };

  private readonly onStreamError = (error: Error): void => {
    this.streamError = error;
  };

  private readonly onClose = (): void => {
    const stream = this.stream!;
    this.stream = null;
    const session = this.session!;
    this.session = null;
    session.released();
    if (this.done) return;
    if (!this.responded && unprocessed(stream, session)) {
      this.refused(this.streamError ?? new errors.SocketError('The upstream refused the stream.'));
      return;
    }
    this.fail(this.streamError ?? new errors.SocketError(`The upstream closed the stream (HTTP/2 code ${stream.rstCode ?? 'none'}).`));
  };
}

/**
 * Whether the server did not process `stream` (RFC 9113 §8.7), so it may be sent again: numbered past the last
 * stream of a GOAWAY the session got, or, without one, reset by the server with REFUSED_STREAM. After a GOAWAY
 * node gives every stream the GOAWAY's code, so there the stream's number decides, not its code.
 */
function unprocessed(stream: ClientHttp2Stream, session: H2Session): boolean {
  const last = session.goawayLastStream;
  if (last !== null) return stream.id !== undefined && stream.id > last;
  return stream.rstCode === NGHTTP2_REFUSED_STREAM;
}

/** The request's headers for HTTP/2: pseudo-headers first, no connection-specific ones (RFC 9113 §8.2.2). */
function requestHeaders(options: Dispatcher.DispatchOptions): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ':method': options.method, ':path': options.path };
  const add = (name: string, value: unknown): void => {
    const key = name.toLowerCase();
    if (key === 'connection' || key === 'keep-alive' || key === 'transfer-encoding' || key === 'upgrade' || key === 'host' || key === 'proxy-connection') return;
    out[key] = value as string;
  };
  const { headers } = options;
  if (Array.isArray(headers)) for (let i = 0; i + 1 < headers.length; i += 2) add(String(headers[i]), headers[i + 1]);
  else if (headers) for (const [name, value] of Object.entries(headers as Record<string, unknown>)) if (value !== undefined) add(name, value);
  return out;
}

/** The body as one Buffer: svc sends strings, Buffers and the one-shot iterable of sent-once.ts. */
function requestBody(body: Dispatcher.DispatchOptions['body']): Buffer | null {
  if (body === undefined || body === null) return null;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (typeof (body as Iterable<unknown>)[Symbol.iterator] === 'function') {
    const parts: Buffer[] = [];
    for (const part of body as Iterable<string | Uint8Array>) parts.push(Buffer.from(part as string));
    return Buffer.concat(parts);
  }
  throw new TypeError('The HTTP/2 upstream sends string, Buffer or iterable bodies only.');
}
