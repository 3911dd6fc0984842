import type { Kysely } from 'kysely';
import type { Database, SessionsTable } from './schema.js';

export type SessionRecord = SessionsTable;

/**
 * Dashboard sessions. Rows are keyed by the SHA-256 of the cookie token, so a copy of the database does not
 * hold anything a browser could present.
 *
 * @example
 * await store.sessions.create({ tokenHash, userId, csrfToken, now, expiresAt: now + 7 * 86_400_000 });
 */
export class SessionsStore {
  constructor(private readonly db: Kysely<Database>) {}

  async create(input: { tokenHash: string; userId: string; csrfToken: string; now: number; expiresAt: number }): Promise<SessionRecord> {
    const row: SessionRecord = {
      token_hash: input.tokenHash,
      user_id: input.userId,
      csrf_token: input.csrfToken,
      created_at: input.now,
      expires_at: input.expiresAt,
    };
    await this.db.insertInto('sessions').values(row).execute();
    return row;
  }

  /** The live session with this token hash, or undefined when unknown or expired. */
  async byHash(tokenHash: string, now: number): Promise<SessionRecord | undefined> {
    return this.db
      .selectFrom('sessions')
      .selectAll()
      .where('token_hash', '=', tokenHash)
      .where('expires_at', '>', now)
      .executeTakeFirst();
  }

  async delete(tokenHash: string): Promise<void> {
    await this.db.deleteFrom('sessions').where('token_hash', '=', tokenHash).execute();
  }

  /** Ends every session of a user (their password was reset); returns how many were live or expired. */
  async deleteForUser(userId: string): Promise<number> {
    const result = await this.db.deleteFrom('sessions').where('user_id', '=', userId).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Removes expired sessions; returns how many. */
  async purgeExpired(now: number): Promise<number> {
    const result = await this.db.deleteFrom('sessions').where('expires_at', '<=', now).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
