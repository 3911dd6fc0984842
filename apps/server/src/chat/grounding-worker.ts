// The grounding check for large inputs, on a thread of its own (see `GroundingThread` in grounding-thread.ts).
import { parentPort } from 'node:worker_threads';
import { checkGrounding, SourceIndexCache, type GroundingInput } from '@svc/grounding';

const sourceIndexCache = new SourceIndexCache();

parentPort?.on('message', (message: { id: number; input: GroundingInput }) => {
  try {
    parentPort!.postMessage({ id: message.id, result: checkGrounding(message.input, { sourceIndexCache }) });
  } catch (err) {
    parentPort!.postMessage({ id: message.id, error: err instanceof Error ? err.message : String(err) });
  }
});
