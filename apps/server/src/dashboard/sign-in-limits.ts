import { isIP } from 'node:net';
import { RateLimiterCluster, RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { ApiError } from '../http/errors.js';
import { ipv6Groups } from '../ip-address.js';
import { redisLimiter } from '../rate-limit/rate-limiter.js';

/**
 * The address a sign-in is counted against: an IPv4 address as it is (an IPv4-mapped IPv6 one as its IPv4
 * address), an IPv6 address as its /64. One subscriber, host or cloud VM is routinely given a whole /64, so
 * counting single IPv6 addresses would give an attacker 2^64 fresh budgets.
 *
 * @example
 * clientBucket('2001:db8:1:2::7')   // '2001:db8:1:2::/64'
 * clientBucket('::ffff:203.0.113.7') // '203.0.113.7'
 */
export function clientBucket(ip: string): string {
  const address = ip.replace(/%.*$/, '');
  if (isIP(address) !== 6) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  return `${ipv6Groups(address).slice(0, 4).map((group) => group.toString(16)).join(':')}::/64`;
}

/** Where a limit's counters live: this process's memory, the primary of a multi-process server, or Redis. */
export type SignInCounters = (options: { keyPrefix: string; points: number; duration: number }) => RateLimiterAbstract;

const memoryCounters: SignInCounters = (options) => new RateLimiterMemory(options);

/**
 * The counters every process and instance shares, as the API keys' limits are shared: through Redis when it is
 * configured (this process's memory while it is unreachable), else in the primary of a multi-process server
 * (`RateLimiterClusterMaster` runs there), else this process's memory. Counted per process, a server with
 * `--processes 4` gave every address and account four times its attempts.
 *
 * @example
 * new SignInLimits(5, signInCounters({ redis, clusterWorker: cluster.isWorker }));
 */
export function signInCounters(options: { redis?: Redis; clusterWorker: boolean }): SignInCounters {
  const { redis } = options;
  if (redis) {
    return (limit) => redisLimiter(limit, redis);
  }
  if (options.clusterWorker) return (limit) => new RateLimiterCluster({ ...limit, timeoutMs: 5_000 });
  return memoryCounters;
}

/** The failed sign-ins one account may take, from every address together, in ACCOUNT_WINDOW_SECONDS. */
export const ACCOUNT_FAILURES = 20;
export const ACCOUNT_WINDOW_SECONDS = 600;

/**
 * The sign-in limits, each counted before the password is checked (a burst sent at once gets no more checks
 * than the limit): `perMinute` failures per address and email, six times that per address, and
 * ACCOUNT_FAILURES per email in 10 minutes from all addresses together — so that an attacker with many
 * addresses (a botnet, an IPv6 range behind a trusted proxy) cannot try passwords against one account without
 * end. A success gives its attempts back.
 *
 * @example
 * const limits = new SignInLimits(5);
 * await limits.consume(req.ip, email); // throws 429 rate_limit_exceeded when over a limit
 * … check the password …
 * await limits.succeeded(req.ip, email);
 */
export class SignInLimits {
  private readonly perPair: RateLimiterAbstract;
  private readonly perAddress: RateLimiterAbstract;
  private readonly perAccount: RateLimiterAbstract;

  constructor(perMinute: number, counters: SignInCounters = memoryCounters) {
    this.perPair = counters({ keyPrefix: 'svc:signin:pair', points: perMinute, duration: 60 });
    this.perAddress = counters({ keyPrefix: 'svc:signin:address', points: perMinute * 6, duration: 60 });
    this.perAccount = counters({ keyPrefix: 'svc:signin:account', points: ACCOUNT_FAILURES, duration: ACCOUNT_WINDOW_SECONDS });
  }

  /** Counts one attempt of `email` from `ip`; throws 429 (with `retry-after`) when a limit is reached. */
  async consume(ip: string, email: string): Promise<void> {
    const address = clientBucket(ip);
    for (const [limiter, key] of this.keys(address, email)) {
      const limited = await consumeOrLimited(limiter, key);
      if (limited) throw tooManyAttempts(limited);
    }
  }

  /** The right password: the pair's count starts over, the address and the account get one attempt back. */
  async succeeded(ip: string, email: string): Promise<void> {
    const address = clientBucket(ip);
    await Promise.all([this.perPair.delete(`${address}|${email}`), this.perAddress.reward(address, 1), this.perAccount.reward(email, 1)]);
  }

  private keys(address: string, email: string): Array<[RateLimiterAbstract, string]> {
    return [
      [this.perPair, `${address}|${email}`],
      [this.perAddress, address],
      [this.perAccount, email],
    ];
  }
}

/** Takes one point; the limiter's state when there was none left, else undefined. */
async function consumeOrLimited(limiter: RateLimiterAbstract, key: string): Promise<RateLimiterRes | undefined> {
  try {
    await limiter.consume(key, 1);
    return undefined;
  } catch (err) {
    if (err instanceof RateLimiterRes) return err;
    throw err;
  }
}

function tooManyAttempts(limited: RateLimiterRes): ApiError {
  const seconds = Math.max(1, Math.ceil(limited.msBeforeNext / 1000));
  return new ApiError('rate_limit_exceeded', `Too many failed sign-in attempts. Try again in ${seconds} seconds.`, {
    headers: { 'retry-after': String(seconds) },
  });
}
