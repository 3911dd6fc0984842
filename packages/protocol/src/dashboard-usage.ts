import { z } from 'zod';

const count = () => z.int().min(0);

/** One day (or a whole window) of usage, as `GET /dashboard/api/usage` answers it. */
export const UsagePointSchema = z.object({
  day: z.string(),
  requests: count(),
  input_tokens: count(),
  output_tokens: count(),
  total_tokens: count(),
  errors_4xx: count(),
  errors_5xx: count(),
  /** Upper bounds of the latency buckets (100, 250, 500 ms …) holding the 50th and 95th percentile; null without requests; above 30000 means slower than 30 s. */
  latency_p50_ms: z.int().nullable(),
  latency_p95_ms: z.int().nullable(),
  grounding_checked: count(),
  ungrounded: count(),
  /** ungrounded / grounding_checked, null when no answer was checked. */
  ungrounded_share: z.number().min(0).max(1).nullable(),
});
export type UsagePoint = z.infer<typeof UsagePointSchema>;

/** The dashboard's usage view: per day, in total and per key, with a summary of the window. */
export const UsageReportSchema = z.object({
  days: z.array(z.string()),
  total: z.array(UsagePointSchema),
  total_summary: UsagePointSchema,
  keys: z.array(
    z.object({
      key_id: z.string(),
      name: z.string(),
      prefix: z.string(),
      revoked: z.boolean(),
      series: z.array(UsagePointSchema),
      summary: UsagePointSchema,
    }),
  ),
});
export type UsageReport = z.infer<typeof UsageReportSchema>;
