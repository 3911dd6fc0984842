import type { TLSSocket } from 'node:tls';
import { Client, Dispatcher, Pool } from '../http/undici-dispatchers.js';

/**
 * SVC_UPSTREAM_HTTP2: `auto` speaks HTTP/2 to an https upstream that offers it by ALPN; `off` always HTTP/1.1.
 *
 * `off` is the default although HTTP/2 measured cheaper (bench/README.md): undici 7.30 fails every request in
 * flight on a connection when the server sends GOAWAY, even a graceful one (code 0, "finish what you have"),
 * so an upstream that rotates connections after some number of requests (nginx's keepalive_requests) or
 * restarts gracefully would cut up to H2_STREAMS_PER_CONNECTION answers mid-stream at once. Over HTTP/1.1 such
 * a server only closes idle connections.
 */
export type UpstreamHttp2 = 'auto' | 'off';

/**
 * Streams one HTTP/2 connection carries at most. RFC 9113 §6.5.2 recommends servers allow at least 100; a
 * stream past the server's own limit would wait inside the session, unseen, so svc stays at that floor and
 * opens another connection instead.
 */
export const H2_STREAMS_PER_CONNECTION = 100;

export interface UpstreamPoolOptions {
  /** Requests in flight the pool must never queue below; null = unbounded. */
  connections: number | null;
  http2: UpstreamHttp2;
  connectTimeoutMs: number;
  /** PEM certificates to trust instead of Node's default ones. */
  ca?: string;
}

export interface UpstreamPool {
  pool: Dispatcher;
  /**
   * Whether requests may share a connection: passed as undici's `idempotent` request option, which is what
   * lets it put a POST on an HTTP/2 connection that already carries one (it is false for POST by default).
   * It also lets undici re-send a request written on a session the server ended with GOAWAY; svc never replays
   * an upstream call (a replay would be a second paid LLM call): the request body can be read once only
   * (sent-once.ts), so such a replay fails instead.
   */
  multiplex: boolean;
}

type Connector = (options: object, callback: (error: Error | null, socket: TLSSocket | null) => void) => void;

/**
 * The keep-alive pool svc sends upstream calls through. HTTP/1.1 connections carry one request at a time, up
 * to `connections` of them. With `http2: 'auto'` and an https origin, the TLS handshake also offers h2 and
 * requests go through an HTTP/2 pool while the origin agrees to h2: each connection carries up to
 * H2_STREAMS_PER_CONNECTION streams (undici counts them as "pipelining" and gives an h2 connection one
 * stream otherwise), and there are at most connections / H2_STREAMS_PER_CONNECTION of them, so a burst of
 * requests during a handshake waits for it rather than opening a connection each (undici counts a
 * connecting client as busy, whatever its width). An origin whose handshake picks HTTP/1.1 gets the
 * HTTP/1.1 pool from then on; the requests that came while the first handshake was under way wait for it.
 *
 * @example
 * const { pool, multiplex } = createUpstreamPool('https://api.openai.com', { connections: 4096, http2: 'auto', connectTimeoutMs: 10_000 });
 */
/** Whether calls to `origin` may share HTTP/2 connections (an https origin and `auto`; the handshake decides). */
export function mayMultiplex(origin: string, http2: UpstreamHttp2): boolean {
  return http2 !== 'off' && origin.startsWith('https:');
}

export function createUpstreamPool(origin: string, options: UpstreamPoolOptions): UpstreamPool {
  const common = { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000 };
  const connect = { timeout: options.connectTimeoutMs, ...(options.ca ? { ca: options.ca } : {}) };
  const h1 = new Pool(origin, { ...common, pipelining: 1, connections: options.connections, connect });
  if (!mayMultiplex(origin, options.http2)) return { pool: h1, multiplex: false };
  return { pool: new NegotiatingPool(origin, h1, options.connections, connect, common), multiplex: true };
}

/**
 * Sends through an HTTP/2 pool until a handshake with the origin picks HTTP/1.1, then through `h1`. While the
 * first handshake is under way, further requests wait for its answer here.
 */
class NegotiatingPool extends Dispatcher {
  private protocol: 'unknown' | 'h2' | 'http/1.1' = 'unknown';
  private probing = false;
  private waiting: Array<[Dispatcher.DispatchOptions, Dispatcher.DispatchHandler]> = [];
  private readonly h2: Pool;

  constructor(
    origin: string,
    private readonly h1: Pool,
    connections: number | null,
    connect: object,
    common: object,
  ) {
    super();
    const self = this;
    this.h2 = new Pool(origin, {
      ...common,
      connections: connections === null ? null : Math.ceil(connections / H2_STREAMS_PER_CONNECTION),
      allowH2: true,
      maxConcurrentStreams: H2_STREAMS_PER_CONNECTION,
      connect,
      factory(factoryOrigin: string | URL, clientOptions: object): Dispatcher {
        const connectTls = (clientOptions as { connect: Connector }).connect;
        const client: Client = new Client(factoryOrigin, {
          ...(clientOptions as Client.Options),
          pipelining: self.protocol === 'h2' ? H2_STREAMS_PER_CONNECTION : 1,
          connect(connectOptions, callback) {
            connectTls(connectOptions, (error, socket) => {
              if (error || !socket) {
                // Queued on this client before undici hears of the failure, the waiting requests fail with it
                // as one (undici fails a client's whole queue when its connection fails).
                self.handshakeFailed(client);
                (callback as Parameters<Connector>[1])(error, socket);
                return;
              }
              // Widened before undici takes the socket: it then tells the pool this connection has room, and
              // the requests sent on below fill it before any other connection opens.
              const h2 = socket.alpnProtocol === 'h2';
              client.pipelining = h2 ? H2_STREAMS_PER_CONNECTION : 1;
              (callback as Parameters<Connector>[1])(error, socket);
              self.negotiated(h2 ? 'h2' : 'http/1.1');
            });
          },
        });
        return client;
      },
    } as Pool.Options);
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (this.protocol === 'unknown') {
      if (this.probing) {
        this.waiting.push([options, handler]);
        return true;
      }
      this.probing = true;
    }
    return (this.protocol === 'http/1.1' ? this.h1 : this.h2).dispatch(options, handler);
  }

  /** A handshake picked `protocol`: the waiting requests go to its pool. */
  private negotiated(protocol: 'h2' | 'http/1.1'): void {
    this.protocol = protocol;
    this.probing = false;
    const target = protocol === 'http/1.1' ? this.h1 : this.h2;
    for (const [options, handler] of this.takeWaiting()) target.dispatch(options, handler);
  }

  /**
   * A handshake failed: the waiting requests join the queue of `client`, whose connection failed, so they
   * share its error at once and abort and timers reach them inside undici. Sent on one probe at a time instead,
   * the k-th would fail only after k connect timeouts. The next request probes again.
   */
  private handshakeFailed(client: Client): void {
    this.probing = false;
    for (const [options, handler] of this.takeWaiting()) client.dispatch(options, handler);
  }

  private takeWaiting(): Array<[Dispatcher.DispatchOptions, Dispatcher.DispatchHandler]> {
    const waiting = this.waiting;
    this.waiting = [];
    return waiting;
  }

  // A parked request sent to a pool already closing or destroyed fails at once with undici's own error
  // (ClientClosedError, ClientDestroyedError), as it would have had it reached the pool before.
  override close(): Promise<void> {
    const closed = Promise.all([this.h1.close(), this.h2.close()]).then(() => undefined);
    for (const [options, handler] of this.takeWaiting()) this.h2.dispatch(options, handler);
    return closed;
  }

  override destroy(): Promise<void> {
    const destroyed = Promise.all([this.h1.destroy(), this.h2.destroy()]).then(() => undefined);
    for (const [options, handler] of this.takeWaiting()) this.h2.dispatch(options, handler);
    return destroyed;
  }
}
