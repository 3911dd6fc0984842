import type { TLSSocket } from 'node:tls';
import { buildConnector, Pool, type Dispatcher } from '../http/undici-dispatchers.js';
import { H2_STREAMS_PER_CONNECTION, H2Upstream } from './h2-upstream.js';

export { H2_STREAMS_PER_CONNECTION };

/**
 * SVC_UPSTREAM_HTTP2: `auto` (the default) speaks HTTP/2 to an https upstream that offers it by ALPN; `off`
 * always HTTP/1.1.
 */
export type UpstreamHttp2 = 'auto' | 'off';

export interface UpstreamPoolOptions {
  /** Requests in flight the pool must never queue below; null = unbounded. */
  connections: number | null;
  http2: UpstreamHttp2;
  connectTimeoutMs: number;
  /** PEM certificates to trust instead of Node's default ones. */
  ca?: string;
}

/** Whether calls to `origin` may share HTTP/2 connections (an https origin and `auto`; the handshake decides). */
export function mayMultiplex(origin: string, http2: UpstreamHttp2): boolean {
  return http2 !== 'off' && origin.startsWith('https:');
}

/**
 * The keep-alive pool svc sends upstream calls through. HTTP/1.1 connections carry one request at a time, up
 * to `connections` of them. With `http2: 'auto'` and an https origin, the TLS handshake also offers h2 and
 * requests go over HTTP/2 (h2-upstream.ts: up to H2_STREAMS_PER_CONNECTION streams a connection, a graceful
 * GOAWAY lets the streams in flight finish) while the origin agrees to h2; an origin whose handshake picks
 * HTTP/1.1 gets the HTTP/1.1 pool from then on.
 *
 * @example
 * const pool = createUpstreamPool('https://api.openai.com', { connections: 4096, http2: 'auto', connectTimeoutMs: 10_000 });
 */
export function createUpstreamPool(origin: string, options: UpstreamPoolOptions): Dispatcher {
  const connectOptions = { timeout: options.connectTimeoutMs, ...(options.ca ? { ca: options.ca } : {}) };
  const h1Options = { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, pipelining: 1, connections: options.connections };
  if (!mayMultiplex(origin, options.http2)) return new Pool(origin, { ...h1Options, connect: connectOptions });
  // The handshake that picked http/1.1 becomes the HTTP/1.1 pool's first connection, not a wasted one.
  const tls = buildConnector(connectOptions);
  let spare: TLSSocket | null = null;
  const connect: buildConnector.connector = (connectOpts, callback) => {
    const socket = spare;
    spare = null;
    // Asynchronously, as a connection comes: undici's client does not expect its callback within the call.
    if (socket && !socket.destroyed) process.nextTick(callback, null, socket);
    else tls(connectOpts, callback);
  };
  const h1 = new Pool(origin, { ...h1Options, connect });
  return new H2Upstream(origin, { connections: options.connections, connectTimeoutMs: options.connectTimeoutMs, ca: options.ca, h1, spare: (socket) => void (spare = socket) });
}
