// Request bodies parsed on a thread of their own (see `JsonParseThread` in json-parse-thread.ts).
import { parentPort } from 'node:worker_threads';
import { parseBodyBytes } from './json-parse.js';

parentPort?.on('message', (message: { id: number; bytes: Uint8Array }) => {
  let reply;
  try {
    reply = { id: message.id, ...parseBodyBytes(message.bytes) };
  } catch (err) {
    reply = { id: message.id, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(reply);
});
