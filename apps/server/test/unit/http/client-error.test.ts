import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { answerClientError } from '../../../src/http/client-error.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

describe('answerClientError', () => {
  it('a request that times out half-sent gets a 408 in the OpenAI shape, and its connection is closed although the client keeps it open', async () => {
    let aborted = false;
    server = createServer({ connectionsCheckingInterval: 50, headersTimeout: 200, requestTimeout: 300 }, (req) => {
      req.on('aborted', () => (aborted = true));
    });
    server.on('clientError', answerClientError);
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    let answer = '';
    socket.setEncoding('utf8').on('data', (d: string) => (answer += d));
    // allowHalfOpen: the client's side stays open; the server closing its own is seen as 'end'.
    const closed = new Promise<void>((resolve) => socket.on('end', () => resolve()));
    socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789');
    // The client never ends its side: the server must close the connection itself.
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(answer.split('\r\n\r\n')[1]!)).toEqual({ error: { message: 'The request was not received in time.', type: 'invalid_request_error', param: null, code: 'invalid_request' } });
    expect(aborted).toBe(true);
    expect(await new Promise((resolve) => server!.getConnections((_e, n) => resolve(n)))).toBe(0);
    socket.destroy();
  });
});
