// The rate limits of a multi-process server without Redis: workers' checks go to the primary in one message
// per event-loop turn and are counted there in order. Here the IPC channels are in-process stand-ins wired
// to the primary's real answerer; test/multi-process.test.ts runs the real processes.
import { describe, expect, it } from 'vitest';
import type { WorkerMessage } from '../../../src/cluster/messages.js';
import { answerClusterRateLimits, ClusterRateLimiter, type Ipc } from '../../../src/rate-limit/cluster-rate-limiter.js';

type Answer = ReturnType<typeof answerClusterRateLimits>;

/** A worker's channel to a primary that answers with `answer` (or never, without one). */
function channel(answer?: Answer) {
  const listeners: Array<(message: unknown) => void> = [];
  const sent: WorkerMessage[] = [];
  const ipc: Ipc & { connected: boolean } = {
    connected: true,
    send(message) {
      sent.push(message);
      if (answer && message.svc === 'rate-limit') void answer(message).then((reply) => listeners.forEach((l) => l(reply)));
    },
    on(_event, listener) {
      listeners.push(listener);
    },
  };
  return { ipc, sent };
}

describe('ClusterRateLimiter', () => {
  it('sends the checks of one turn in one message and gets exact decisions, in order', async () => {
    const { ipc, sent } = channel(answerClusterRateLimits());
    const limiter = new ClusterRateLimiter(ipc);
    const decisions = await Promise.all(Array.from({ length: 5 }, () => limiter.consume('key_a', 3)));
    expect(sent).toHaveLength(1);
    expect(decisions.map((d) => [d.allowed, d.remaining, d.limit])).toEqual([
      [true, 2, 3],
      [true, 1, 3],
      [true, 0, 3],
      [false, 0, 3],
      [false, 0, 3],
    ]);
    expect(decisions[3]!.resetMs).toBeGreaterThan(59_000);
    expect(decisions[3]!.resetMs).toBeLessThanOrEqual(60_000);
    // A later turn is a message of its own; other keys have their own counts.
    const [again, other] = await Promise.all([limiter.consume('key_a', 3), limiter.consume('key_b', 3)]);
    expect(sent).toHaveLength(2);
    expect(again!.allowed).toBe(false);
    expect(other).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('holds one limit across the workers of one primary', async () => {
    const answer = answerClusterRateLimits();
    const a = new ClusterRateLimiter(channel(answer).ipc);
    const b = new ClusterRateLimiter(channel(answer).ipc);
    const decisions = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).consume('key_shared', 25)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(25);
  });

  it('fails the checks when the primary does not answer in time or is gone', async () => {
    const silent = channel();
    const limiter = new ClusterRateLimiter(silent.ipc, 50);
    await expect(limiter.consume('key_a', 10)).rejects.toThrow(/did not answer a rate-limit check within 50 ms/);
    silent.ipc.connected = false;
    await expect(limiter.consume('key_a', 10)).rejects.toThrow(/primary process is gone/);
  });
});
