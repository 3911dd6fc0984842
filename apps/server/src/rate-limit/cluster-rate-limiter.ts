import { createRateLimiter, type RateLimitDecision, type RateLimiter } from './rate-limiter.js';

/** A worker's rate-limit checks of one event-loop turn: one request of each `[key id, limit per minute]`, in order. */
export interface RateLimitChecks {
  svc: 'rate-limit';
  id: number;
  checks: Array<[keyId: string, limitPerMinute: number]>;
}

/** The primary's answer to `RateLimitChecks`, one decision per check, in order: allowed (1 or 0), requests remaining, ms until the window frees one. */
export interface RateLimitDecisions {
  svc: 'rate-limit';
  id: number;
  decisions: Array<[allowed: 0 | 1, remaining: number, resetMs: number]>;
}

/** How long a worker waits for the primary's answer before its requests fail (the primary is local and does little else). */
const CLUSTER_TIMEOUT_MS = 5000;

/** The IPC channel of a cluster worker (`process`), or a stand-in in tests. */
export interface Ipc {
  readonly connected: boolean;
  send(message: RateLimitChecks): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
}

interface PendingCheck {
  keyId: string;
  limit: number;
  resolve: (decision: RateLimitDecision) => void;
  reject: (err: Error) => void;
}

/**
 * A cluster worker's limits, counted in the primary: the checks of one event-loop turn go in one message
 * and come back in one answer, consumed there in order, so the limits stay exact across processes at one
 * IPC round trip per turn instead of one per request (rate-limiter-flexible's RateLimiterCluster sends one
 * per request, and the primary's CPU then grows with the request rate of all workers together).
 *
 * @example
 * const limiter = new ClusterRateLimiter(process as Ipc); await limiter.consume(key.id, 600);
 */
export class ClusterRateLimiter implements RateLimiter {
  private batch: PendingCheck[] = [];
  private nextId = 0;
  private readonly waiting = new Map<number, { checks: PendingCheck[]; timer: NodeJS.Timeout }>();

  constructor(
    private readonly ipc: Ipc,
    private readonly timeoutMs = CLUSTER_TIMEOUT_MS,
  ) {
    ipc.on('message', (message) => this.answered(message));
  }

  consume(keyId: string, limitPerMinute: number): Promise<RateLimitDecision> {
    return new Promise((resolve, reject) => {
      // setImmediate, not nextTick: the requests read in one poll phase are all checked by then.
      if (this.batch.length === 0) setImmediate(this.send);
      this.batch.push({ keyId, limit: limitPerMinute, resolve, reject });
    });
  }

  private readonly send = (): void => {
    const checks = this.batch;
    this.batch = [];
    if (!this.ipc.connected) return fail(checks, new Error('the primary process is gone; rate limits cannot be checked'));
    const id = this.nextId++;
    const timer = setTimeout(() => {
      this.waiting.delete(id);
      fail(checks, new Error(`the primary process did not answer a rate-limit check within ${this.timeoutMs} ms`));
    }, this.timeoutMs);
    this.waiting.set(id, { checks, timer });
    this.ipc.send({ svc: 'rate-limit', id, checks: checks.map((c): [string, number] => [c.keyId, c.limit]) });
  };

  private answered(message: unknown): void {
    if (!isDecisions(message)) return;
    const pending = this.waiting.get(message.id);
    if (!pending) return;
    this.waiting.delete(message.id);
    clearTimeout(pending.timer);
    pending.checks.forEach((check, i) => {
      const decision = message.decisions[i];
      if (!decision) return check.reject(new Error('the primary process answered a rate-limit check without a decision'));
      check.resolve({ allowed: decision[0] === 1, limit: check.limit, remaining: decision[1], resetMs: decision[2] });
    });
  }
}

/** The worker's channel also carries the primary's other messages and those of prom-client. */
function isDecisions(message: unknown): message is RateLimitDecisions {
  return typeof message === 'object' && message !== null && (message as { svc?: unknown }).svc === 'rate-limit';
}

function fail(checks: PendingCheck[], err: Error): void {
  for (const check of checks) check.reject(err);
}

/**
 * In the node:cluster primary: the counters of every worker's `ClusterRateLimiter` (in memory, one set for
 * all workers). Returns the answer to a worker's `RateLimitChecks`.
 *
 * @example
 * const answer = answerClusterRateLimits();
 * cluster.on('message', (worker, m) => { if (m.svc === 'rate-limit') void answer(m).then((a) => worker.send(a)); });
 */
export function answerClusterRateLimits(): (message: RateLimitChecks) => Promise<RateLimitDecisions> {
  const limiter = createRateLimiter();
  return async ({ id, checks }) => {
    // Each consume counts when it is called: in message order, as the worker sent them.
    const decisions = await Promise.all(checks.map(([keyId, limit]) => limiter.consume(keyId, limit)));
    return { svc: 'rate-limit', id, decisions: decisions.map((d): [0 | 1, number, number] => [d.allowed ? 1 : 0, d.remaining, d.resetMs]) };
  };
}
