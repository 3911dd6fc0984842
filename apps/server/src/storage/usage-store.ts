import { type Kysely, sql } from 'kysely';
import type { Database, UsageDailyTable } from './schema.js';

export type UsageRow = UsageDailyTable;

export interface UsageIncrement {
  keyId: string;
  userId: string;
  day: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
}

export class UsageStore {
  constructor(private readonly db: Kysely<Database>) {}

  /** Adds counts to the per-key, per-day rows (one upsert per row). */
  async add(increments: UsageIncrement[]): Promise<void> {
    if (increments.length === 0) return;
    await this.db.transaction().execute(async (trx) => {
      for (const inc of increments) {
        await trx
          .insertInto('usage_daily')
          .values({
            key_id: inc.keyId,
            user_id: inc.userId,
            day: inc.day,
            requests: inc.requests,
            input_tokens: inc.inputTokens,
            output_tokens: inc.outputTokens,
          })
          .onConflict((oc) =>
            oc.columns(['key_id', 'day']).doUpdateSet({
              requests: sql`usage_daily.requests + excluded.requests`,
              input_tokens: sql`usage_daily.input_tokens + excluded.input_tokens`,
              output_tokens: sql`usage_daily.output_tokens + excluded.output_tokens`,
            }),
          )
          .execute();
      }
    });
  }

  /** Rows of one user since `fromDay` (inclusive, YYYY-MM-DD), optionally for one key, oldest first. */
  async byDay(userId: string, fromDay: string, keyId?: string): Promise<UsageRow[]> {
    let query = this.db
      .selectFrom('usage_daily')
      .selectAll()
      .where('user_id', '=', userId)
      .where('day', '>=', fromDay)
      .orderBy('day', 'asc');
    if (keyId !== undefined) query = query.where('key_id', '=', keyId);
    return query.execute();
  }
}
