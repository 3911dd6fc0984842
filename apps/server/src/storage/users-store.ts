import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database, UsersTable } from './schema.js';

export type UserRecord = UsersTable;

/** What an operator's listing shows of a user: never the password hash. */
export interface UserSummary {
  id: string;
  email: string;
  created_at: number;
  /** API keys not revoked. */
  active_keys: number;
}

export class UsersStore {
  constructor(private readonly db: Kysely<Database>) {}

  async create(input: { email: string; passwordHash: string; now: number }): Promise<UserRecord> {
    const user: UserRecord = {
      id: randomUUID(),
      email: input.email.trim().toLowerCase(),
      password_hash: input.passwordHash,
      created_at: input.now,
    };
    await this.db.insertInto('users').values(user).execute();
    return user;
  }

  async byEmail(email: string): Promise<UserRecord | undefined> {
    return this.db.selectFrom('users').selectAll().where('email', '=', email.trim().toLowerCase()).executeTakeFirst();
  }

  async byId(id: string): Promise<UserRecord | undefined> {
    return this.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async count(): Promise<number> {
    const row = await this.db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * Every user, oldest first, with their number of active keys. The hash is not selected, so no caller can
   * print it by accident.
   *
   * @example
   * for (const u of await store.users.list()) console.log(u.email, u.active_keys);
   */
  async list(): Promise<UserSummary[]> {
    const rows = await this.db
      .selectFrom('users')
      .leftJoin('api_keys', (join) => join.onRef('api_keys.user_id', '=', 'users.id').on('api_keys.revoked_at', 'is', null))
      .select((eb) => ['users.id', 'users.email', 'users.created_at', eb.fn.count<number | string>('api_keys.id').as('active_keys')])
      .groupBy(['users.id', 'users.email', 'users.created_at'])
      .orderBy('users.created_at')
      .orderBy('users.email')
      .execute();
    return rows.map((r) => ({ id: r.id, email: r.email, created_at: r.created_at, active_keys: Number(r.active_keys) }));
  }

  async setPassword(id: string, passwordHash: string): Promise<void> {
    await this.db.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', id).execute();
  }

  /**
   * Replaces the hash only while it is still `expected`; false when it changed meanwhile. For moving a hash to
   * stronger parameters at sign-in: a password reset made during that sign-in must not be overwritten by a hash
   * of the old password.
   */
  async replacePasswordHash(id: string, expected: string, next: string): Promise<boolean> {
    const result = await this.db.updateTable('users').set({ password_hash: next }).where('id', '=', id).where('password_hash', '=', expected).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}
