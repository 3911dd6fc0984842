import { type Kysely, sql } from 'kysely';
import type { Database, UsageDailyTable } from './schema.js';
import { LATENCY_COLUMNS } from './usage-latency.js';

export type UsageRow = UsageDailyTable;

export interface UsageIncrement {
  keyId: string;
  userId: string;
  day: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  /** Optional so older callers and tests that count only requests and tokens still fit. */
  errors4xx?: number;
  errors5xx?: number;
  groundingChecked?: number;
  ungrounded?: number;
  /** Requests per latency bucket, in LATENCY_COLUMNS order. */
  latency?: number[];
}

/** The stored counters of one increment, column by column. */
function counters(inc: UsageIncrement): Omit<UsageDailyTable, 'key_id' | 'user_id' | 'day'> {
  const latency = Object.fromEntries(LATENCY_COLUMNS.map((column, i) => [column, inc.latency?.[i] ?? 0])) as Record<(typeof LATENCY_COLUMNS)[number], number>;
  return {
    requests: inc.requests,
    input_tokens: inc.inputTokens,
    output_tokens: inc.outputTokens,
    errors_4xx: inc.errors4xx ?? 0,
    errors_5xx: inc.errors5xx ?? 0,
    grounding_checked: inc.groundingChecked ?? 0,
    ungrounded: inc.ungrounded ?? 0,
    ...latency,
  };
}

/** Code-unit order, the same in every process (not the locale's). */
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

const COUNTER_COLUMNS = ['requests', 'input_tokens', 'output_tokens', 'errors_4xx', 'errors_5xx', 'grounding_checked', 'ungrounded', ...LATENCY_COLUMNS] as const;

export class UsageStore {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Adds counts to the per-key, per-day rows (one upsert per row), in the order of (key, day): every process and
   * instance flushes its counters at once, and two transactions upserting the same rows in different orders
   * deadlock on Postgres (each flush of the pair failed after `deadlock_timeout` and was tried again).
   */
  async add(increments: UsageIncrement[]): Promise<void> {
    if (increments.length === 0) return;
    const sumOnConflict = Object.fromEntries(COUNTER_COLUMNS.map((column) => [column, sql`usage_daily.${sql.ref(column)} + excluded.${sql.ref(column)}`]));
    const ordered = [...increments].sort((a, b) => compare(a.keyId, b.keyId) || compare(a.day, b.day));
    await this.db.transaction().execute(async (trx) => {
      for (const inc of ordered) {
        await trx
          .insertInto('usage_daily')
          .values({ key_id: inc.keyId, user_id: inc.userId, day: inc.day, ...counters(inc) })
          .onConflict((oc) => oc.columns(['key_id', 'day']).doUpdateSet(sumOnConflict))
          .execute();
      }
    });
  }

  /** Rows of one user since `fromDay` (inclusive, YYYY-MM-DD), optionally for one key, oldest first, a day's keys by id. */
  async byDay(userId: string, fromDay: string, keyId?: string): Promise<UsageRow[]> {
    let query = this.db
      .selectFrom('usage_daily')
      .selectAll()
      .where('user_id', '=', userId)
      .where('day', '>=', fromDay)
      // Keys in one order within a day: Postgres returns rows in whatever order its heap holds them (a rolled-back
      // insert leaves holes that later rows fill).
      .orderBy('day', 'asc')
      .orderBy('key_id', 'asc');
    if (keyId !== undefined) query = query.where('key_id', '=', keyId);
    return query.execute();
  }
}
