import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach } from 'vitest';

/**
 * HTTP servers on 127.0.0.1 standing where svc-cli expects svc (another API, a proxy's page, a broken server),
 * each closed, its connections cut, after the test that started it. Returns how to start one: with a handler of its
 * own (`serve`), or answering every request with one `status`, `contentType` and `body` (`answering`); each resolves
 * with the server's base URL. `unused` gives one where nothing listens.
 *
 * @example
 * const servers = useLocalServers();
 * const base = await servers.answering(502, 'text/html', '<title>502 Bad Gateway</title>');
 */
export function useLocalServers() {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(
      servers.splice(0).map((server) => {
        server.closeAllConnections();
        return new Promise<void>((resolve) => server.close(() => resolve()));
      }),
    );
  });

  async function serve(handler: RequestListener): Promise<string> {
    const server = createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  return {
    serve,
    /** A base URL where nothing listens: a port just given back by a server that listened there. */
    async unused(): Promise<string> {
      const server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      const { port } = server.address() as AddressInfo;
      await new Promise<void>((resolve) => server.close(() => resolve()));
      return `http://127.0.0.1:${port}`;
    },
    answering: (status: number, contentType: string, body: string) =>
      serve((req, res) => {
        req.resume();
        res.writeHead(status, { 'content-type': contentType }).end(body);
      }),
  };
}
