import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * The server's connections that have not sent a byte yet, closable at once. Node counts such a connection (a load
 * balancer's or a browser's preconnect, a client that opened one and went quiet) as a request being received, not as
 * idle: `closeIdleConnections()` leaves it, and a graceful stop (SIGTERM) waited a minute and more for it, though it
 * held no request.
 *
 * @example
 * const silent = trackSilentConnections(server);
 * server.close(); server.closeIdleConnections(); silent.close();
 */
export function trackSilentConnections(server: Server): { close(): void } {
  const sockets = new Set<Socket>();
  function forget(this: Socket): void {
    sockets.delete(this);
  }
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', forget);
  });
  return {
    close() {
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
    },
  };
}
