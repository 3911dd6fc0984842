import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { UsagePoint, UsageReport } from '@svc/protocol';
import { LATENCY_BOUNDS_MS, LATENCY_COLUMNS, latencyQuantile } from '../storage/usage-latency.js';
import type { UsageRow } from '../storage/usage-store.js';

/** Above the last bucket's bound a percentile is reported as this (the dashboard shows `> 30 s`). */
const OVER_MAX_MS = LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]! + 1;

interface Tally {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  errors_4xx: number;
  errors_5xx: number;
  grounding_checked: number;
  ungrounded: number;
  latency: number[];
}

const emptyTally = (): Tally => ({ requests: 0, input_tokens: 0, output_tokens: 0, errors_4xx: 0, errors_5xx: 0, grounding_checked: 0, ungrounded: 0, latency: LATENCY_COLUMNS.map(() => 0) });

function addRow(tally: Tally, row: UsageRow | Tally): void {
  tally.requests += Number(row.requests);
  tally.input_tokens += Number(row.input_tokens);
  tally.output_tokens += Number(row.output_tokens);
  tally.errors_4xx += Number(row.errors_4xx);
  tally.errors_5xx += Number(row.errors_5xx);
  tally.grounding_checked += Number(row.grounding_checked);
  tally.ungrounded += Number(row.ungrounded);
  const latency = 'latency' in row ? row.latency : LATENCY_COLUMNS.map((column) => Number(row[column]));
  latency.forEach((n, i) => (tally.latency[i] = (tally.latency[i] ?? 0) + n));
}

function percentile(histogram: number[], q: number): number | null {
  const value = latencyQuantile(histogram, q);
  return value === Infinity ? OVER_MAX_MS : value;
}

function point(day: string, t: Tally): UsagePoint {
  return {
    day,
    requests: t.requests,
    input_tokens: t.input_tokens,
    output_tokens: t.output_tokens,
    total_tokens: t.input_tokens + t.output_tokens,
    errors_4xx: t.errors_4xx,
    errors_5xx: t.errors_5xx,
    latency_p50_ms: percentile(t.latency, 0.5),
    latency_p95_ms: percentile(t.latency, 0.95),
    grounding_checked: t.grounding_checked,
    ungrounded: t.ungrounded,
    ungrounded_share: t.grounding_checked > 0 ? t.ungrounded / t.grounding_checked : null,
  };
}

/**
 * The Usage view's data: per day and over the whole window, per key and in total.
 *
 * @example
 * res.json(usageView(await store.usage.byDay(userId, days[0]), keys, days));
 */
export function usageView(rows: UsageRow[], keys: ApiKeyRecord[], days: string[]): UsageReport {
  const index = new Map(days.map((day, i) => [day, i]));
  const total = days.map(emptyTally);
  const byKey = new Map<string, Tally[]>();
  for (const row of rows) {
    const i = index.get(row.day);
    if (i === undefined) continue;
    const series = byKey.get(row.key_id) ?? days.map(emptyTally);
    byKey.set(row.key_id, series);
    addRow(series[i]!, row);
    addRow(total[i]!, row);
  }
  const summarise = (series: Tally[]) => {
    const all = emptyTally();
    for (const t of series) addRow(all, t);
    return { series: series.map((t, i) => point(days[i]!, t)), summary: point(`${days[0]}..${days.at(-1)}`, all) };
  };
  const totals = summarise(total);
  return {
    days,
    total: totals.series,
    total_summary: totals.summary,
    keys: keys.map((k) => {
      const { series, summary } = summarise(byKey.get(k.id) ?? days.map(emptyTally));
      return { key_id: k.id, name: k.name, prefix: k.prefix, revoked: k.revoked_at !== null, series, summary };
    }),
  };
}
