// The load generator: autocannon, with latencies kept at full precision (autocannon's own histogram
// rounds to whole milliseconds, too coarse for sub-millisecond added latency).
import autocannon from 'autocannon';
import { round } from './procs.mjs';

/**
 * Runs autocannon against `url` (POST `body` with `headers`) and resolves with req/s, exact latency
 * percentiles (ms), error counts and the raw autocannon result.
 * `overallRate` switches to a fixed request rate; `amount` sends that many requests instead of running for
 * `durationS` (req/s is then over `durationS` if given, else not meaningful); `keepLatencies` adds every
 * latency (ms, sorted) to the result, for merging measurements. `timeoutS`: a request's time before autocannon
 * gives up on it and sends it again.
 */
export function load({ url, body, headers = {}, connections, durationS, overallRate, amount, keepLatencies = false, timeoutS = 30 }) {
  const latencies = [];
  let non2xx = 0;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
        connections,
        ...(amount ? { amount } : { duration: durationS }),
        ...(overallRate ? { overallRate } : {}),
        timeout: timeoutS,
      },
      (err, result) => {
        if (err) return reject(err);
        latencies.sort((a, b) => a - b);
        resolve({
          requests: latencies.length,
          rps: round(latencies.length / durationS, 0),
          ...latencySummary(latencies),
          non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          throughputMBps: round(result.throughput.average / 1e6, 2),
          ...(keepLatencies ? { latencies } : {}),
        });
      },
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode < 200 || statusCode > 299) non2xx += 1;
      latencies.push(responseTime);
    });
  });
}

/** p50, p90, p99, max and mean (ms, 3 decimals) of `sorted` latencies; null figures when there are none. */
export function latencySummary(sorted) {
  const n = sorted.length;
  const pct = (p) => (n ? round(sorted[Math.min(n - 1, Math.floor((p / 100) * n))], 3) : null);
  return { p50: pct(50), p90: pct(90), p99: pct(99), max: n ? round(sorted[n - 1], 3) : null, mean: n ? round(sorted.reduce((a, b) => a + b, 0) / n, 3) : null };
}

/**
 * A few requests outside the measurement, to check the target answers 2xx with the expected shape. `timeoutMs`:
 * a server under valgrind answers its first request in tens of seconds on a loaded host.
 */
export async function probe({ url, body, headers = {} }, timeoutMs = 10_000) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body, signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  return { status: res.status, text };
}
