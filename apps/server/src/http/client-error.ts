import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** What Node's HTTP parser refuses before there is a request: the status, the error code and the message. */
function answerFor(code: string | undefined): [status: number, code: string, message: string] {
  if (code === 'HPE_HEADER_OVERFLOW') return [431, 'request_too_large', "The request's headers are larger than 16 KiB."];
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'request_timeout', 'The request was not received in time (headers within 30 s, the whole request within 120 s).'];
  return [400, 'invalid_request', `The request is not valid HTTP/1.1 (${code ?? 'unreadable'}).`];
}

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
  const [status, code, message] = answerFor(error.code);
  const body = JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code } });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
