import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/** What Node's HTTP parser refuses before there is a request: the status, the error code and the message. */
function answerFor(code: string | undefined): [status: number, message: string] {
  if (code === 'HPE_HEADER_OVERFLOW') return [431, "The request's headers are larger than the server reads."];
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'The request was not received in time.'];
  return [400, `The request is not valid HTTP/1.1 (${code ?? 'unreadable'}).`];
}

/** How long the answer may take to leave before the connection is cut anyway (a peer that does not read). */
const FLUSH_MS = 1_000;

/**
 * The server's 'clientError' listener: a request Node's parser refuses (headers over 16 KiB, a malformed
 * request line, Content-Length with Transfer-Encoding, a timeout) is answered in the OpenAI error shape, as
 * every other error is, rather than with Node's bare status line. A connection that is gone, or has a response
 * under way (a pipelined one), is closed as Node would.
 */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { _headerSent?: boolean } })._httpMessage;
  if (error.code === 'ECONNRESET' || !socket.writable || inFlight?._headerSent) {
    socket.destroy();
    return;
  }
  const [status, message] = answerFor(error.code);
  answerOnSocket(socket, status, message);
}

/**
 * The server's 'checkExpectation' listener: an `Expect` other than `100-continue` is a 417 in the OpenAI error shape
 * (Node's own answer has an empty body).
 */
export function answerUnmetExpectation(req: IncomingMessage): void {
  answerOnSocket(req.socket, 417, `The Expect header '${String(req.headers.expect)}' is not supported; only '100-continue' is.`);
}

/** The server's 'connect' listener: CONNECT (a proxy tunnel) is a 400 in the OpenAI error shape, not a silent close. */
export function answerConnect(_req: IncomingMessage, socket: Duplex): void {
  answerOnSocket(socket, 400, 'CONNECT is not supported: svc is not a proxy.');
}

/** An error answer written on the connection itself, which then closes: there is no request to answer it through. */
function answerOnSocket(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: 'invalid_request' } });
  // The server keeps connections half-open: `end` alone sends our FIN and leaves the peer's side, with the
  // request it never finished, open for good. Node's own answer destroys the socket; so does this one, once
  // the answer is out (or after FLUSH_MS).
  const cut = setTimeout(() => socket.destroy(), FLUSH_MS).unref();
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => {
      clearTimeout(cut);
      socket.destroy();
    },
  );
}
