import * as node from '../src/index.js';
import * as web from '../src/web.js';
import vectors from './vectors.json' with { type: 'json' };

/** Both builds behind one async shape, so every behaviour test runs against each. */
export const builds = [
  { name: 'node', ...node },
  { name: 'web', ...web },
] as const;

export interface Vector {
  name: string;
  body_base64: string;
  secret: string;
  signature: string;
}

export const VECTORS: readonly Vector[] = vectors;
export const bodyOf = (v: Vector): Buffer => Buffer.from(v.body_base64, 'base64');

export const samplePayload = {
  event: 'llm.request.completed',
  request_id: 'chatcmpl-1',
  timestamp: '2026-01-02T03:04:05.678Z',
  user_id: '7f1c0f5e-8a43-4c55-9a0e-3f2f1a1b2c3d',
  model: 'svc01',
  input_tokens: 3,
  output_tokens: 4,
  total_tokens: 7,
  latency_ms: 12,
  status_code: 200,
  streaming: false,
  prompt: 'user: hi',
  response_text: 'hello',
  grounded: true,
  hallucination_score: 0,
} as const;

/**
 * A dedupe store whose first claim of an id answers only when `finishClaim()` is called (a store still claiming
 * while svc hangs up); every later claim answers at once. A release emits `released` on `events`.
 */
export function slowFirstClaimStore(events: { emit(name: string): boolean }) {
  let finish: (() => void) | undefined;
  const seen = new Set<string>();
  const store = {
    setIfAbsent: (id: string) => {
      const first = !seen.has(id) && !!seen.add(id);
      if (finish) return first;
      return new Promise<boolean>((resolve) => (finish = () => resolve(first)));
    },
    delete: (id: string) => void (seen.delete(id) && events.emit('released')),
  };
  return { store, seen, finishClaim: () => finish!() };
}
