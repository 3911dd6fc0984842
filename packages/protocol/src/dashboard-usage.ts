/** One day (or a whole window) of usage, as `GET /dashboard/api/usage` answers it. */
export interface UsagePoint {
  day: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  errors_4xx: number;
  errors_5xx: number;
  /** Upper bounds of the latency buckets (100, 250, 500 ms …) holding the 50th and 95th percentile; null without requests; above 30000 means slower than 30 s. */
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
  grounding_checked: number;
  ungrounded: number;
  /** ungrounded / grounding_checked, null when no answer was checked. */
  ungrounded_share: number | null;
}

/** The dashboard's usage view: per day, in total and per key, with a summary of the window. */
export interface UsageReport {
  days: string[];
  total: UsagePoint[];
  total_summary: UsagePoint;
  keys: Array<{ key_id: string; name: string; prefix: string; revoked: boolean; series: UsagePoint[]; summary: UsagePoint }>;
}
