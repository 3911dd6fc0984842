// The grounding check for large inputs, on a thread of its own (see `GroundingThread` in grounding-thread.ts).
import { parentPort } from 'node:worker_threads';
import { checkGrounding, SourceIndexCache } from '@svc/grounding';
import type { GroundingRequestMessage } from './grounding-thread.js';

const sourceIndexCache = new SourceIndexCache();

parentPort?.on('message', (message: GroundingRequestMessage) => {
  try {
    const options = message.threshold === undefined ? { sourceIndexCache } : { sourceIndexCache, threshold: message.threshold };
    parentPort!.postMessage({ id: message.id, result: checkGrounding(message.input, options) });
  } catch (err) {
    parentPort!.postMessage({ id: message.id, error: err instanceof Error ? err.message : String(err) });
  }
});
