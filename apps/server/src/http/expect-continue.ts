import type { IncomingMessage, ServerResponse } from 'node:http';

/** Requests whose client waits for `100 Continue` before it sends the body, with the response to send it on. */
const waiting = new WeakMap<IncomingMessage, ServerResponse>();

/**
 * The server's 'checkContinue' listener. Node's default sends `100 Continue` as soon as the headers arrive; then a
 * client (curl past 1 MiB, .NET) uploads its whole body just to be told 401, 413 or 429. Here the 100 is sent only
 * when a route starts reading the body (`continueBody`); an answer before that goes out without it, and Node
 * closes the connection after it, so the body is never sent.
 *
 * @example
 * server.on('checkContinue', holdContinue(listener));
 */
export function holdContinue(listener: (req: IncomingMessage, res: ServerResponse) => void) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    waiting.set(req, res);
    listener(req, res);
  };
}

/**
 * Lets the body come: sends the `100 Continue` its client waits for, if it waits for one. Every body reader
 * calls it once the request is accepted, before reading.
 *
 * @example
 * continueBody(req);
 * req.on('data', onData);
 */
export function continueBody(req: IncomingMessage): void {
  const res = waiting.get(req);
  if (res === undefined) return;
  waiting.delete(req);
  if (!res.headersSent && !res.destroyed) res.writeContinue();
}
