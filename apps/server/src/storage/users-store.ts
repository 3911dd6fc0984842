import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database, UsersTable } from './schema.js';

export type UserRecord = UsersTable;

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

  async setPassword(id: string, passwordHash: string): Promise<void> {
    await this.db.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', id).execute();
  }
}
