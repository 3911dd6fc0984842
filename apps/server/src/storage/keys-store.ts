import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Updateable } from 'kysely';
import type { ApiKeysTable, Database } from './schema.js';
import type { SqliteStatements } from './sqlite-statements.js';

export type ApiKeyRecord = ApiKeysTable;

export type ApiKeyPatch = Partial<
  Pick<
    ApiKeysTable,
    | 'name'
    | 'rate_limit_rpm'
    | 'webhook_url'
    | 'signing_secret_enc'
    | 'signing_secret_last4'
    | 'previous_signing_secret_enc'
    | 'previous_signing_secret_last4'
    | 'previous_signing_secret_expires_at'
    | 'signing_secret_overlap_seconds'
  >
>;

export interface DeliveryStatusUpdate {
  at: number;
  outcome: 'success' | 'failure';
  statusCode: number | null;
  error: string | null;
  /** The attempt was a test send's. */
  test: boolean;
}

/** A success clears it; a failure keeps the first failure's time (parameters: outcome, attempted at). */
const FAILING_SINCE = `case when ? = 'success' then null else coalesce(last_delivery_failing_since, ?) end`;

export class KeysStore {
  constructor(
    private readonly db: Kysely<Database>,
    /** SQLite: the worker's per-tick status write runs as one prepared statement. */
    private readonly fast?: SqliteStatements,
  ) {}

  async create(input: {
    userId: string;
    name: string;
    prefix: string;
    keyHash: string;
    now: number;
    rateLimitRpm?: number | null;
    webhookUrl?: string | null;
    signingSecretEnc?: string | null;
    signingSecretLast4?: string | null;
    signingSecretOverlapSeconds?: number | null;
  }): Promise<ApiKeyRecord> {
    const key: ApiKeyRecord = {
      id: `key_${randomUUID().replaceAll('-', '')}`,
      user_id: input.userId,
      name: input.name,
      prefix: input.prefix,
      key_hash: input.keyHash,
      created_at: input.now,
      updated_at: input.now,
      last_used_at: null,
      revoked_at: null,
      rate_limit_rpm: input.rateLimitRpm ?? null,
      webhook_url: input.webhookUrl ?? null,
      signing_secret_enc: input.signingSecretEnc ?? null,
      signing_secret_last4: input.signingSecretLast4 ?? null,
      previous_signing_secret_enc: null,
      previous_signing_secret_last4: null,
      previous_signing_secret_expires_at: null,
      signing_secret_overlap_seconds: input.signingSecretOverlapSeconds ?? null,
      last_delivery_at: null,
      last_delivery_outcome: null,
      last_delivery_status_code: null,
      last_delivery_error: null,
      last_delivery_failing_since: null,
      last_delivery_test: null,
    };
    await this.db.insertInto('api_keys').values(key).execute();
    return key;
  }

  /** Looks a key up by the SHA-256 of the presented token: the token itself is never stored or compared. */
  async byHash(keyHash: string): Promise<ApiKeyRecord | undefined> {
    return this.db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst();
  }

  async byId(id: string): Promise<ApiKeyRecord | undefined> {
    return this.db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The sealed signing secret of the newest active key that has one: what a start checks its secret key against. */
  async newestSealedSecret(): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select('signing_secret_enc')
      .where('signing_secret_enc', 'is not', null)
      .where('revoked_at', 'is', null)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.signing_secret_enc ?? undefined;
  }

  /** Every key's sealed signing secrets (current and rotated-out), for `secrets rotate`. */
  async sealedSecrets(): Promise<Array<Pick<ApiKeyRecord, 'id' | 'signing_secret_enc' | 'previous_signing_secret_enc'>>> {
    return this.db
      .selectFrom('api_keys')
      .select(['id', 'signing_secret_enc', 'previous_signing_secret_enc'])
      .where((eb) => eb.or([eb('signing_secret_enc', 'is not', null), eb('previous_signing_secret_enc', 'is not', null)]))
      .orderBy('id')
      .execute();
  }

  /**
   * Replaces one sealed secret of a key by the same secret sealed anew, only while it is still `from`: a secret
   * set meanwhile (the dashboard, another instance) is newer and stays. True when replaced.
   */
  async resealSecret(id: string, column: 'signing_secret_enc' | 'previous_signing_secret_enc', from: string, to: string): Promise<boolean> {
    const result = await this.db.updateTable('api_keys').set({ [column]: to }).where('id', '=', id).where(column, '=', from).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Keys of one user (or every key when userId is undefined), newest first. */
  async list(userId?: string): Promise<ApiKeyRecord[]> {
    let query = this.db.selectFrom('api_keys').selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc');
    if (userId !== undefined) query = query.where('user_id', '=', userId);
    return query.execute();
  }

  /** How many keys `userId` holds that are not revoked (the SVC_MAX_KEYS_PER_USER count). */
  async countActive(userId: string): Promise<number> {
    const row = await this.db
      .selectFrom('api_keys')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async update(id: string, patch: ApiKeyPatch, now: number): Promise<ApiKeyRecord | undefined> {
    const values: Updateable<ApiKeysTable> = { ...patch, updated_at: now };
    await this.db.updateTable('api_keys').set(values).where('id', '=', id).execute();
    return this.byId(id);
  }

  async revoke(id: string, now: number): Promise<boolean> {
    const result = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: now, updated_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async touchLastUsed(id: string, at: number): Promise<void> {
    await this.db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
  }

  async setLastDelivery(id: string, update: DeliveryStatusUpdate): Promise<void> {
    if (this.fast?.usable) {
      this.fast
        .get(`update api_keys set last_delivery_at = ?, last_delivery_outcome = ?, last_delivery_status_code = ?, last_delivery_error = ?,
          last_delivery_test = ?, last_delivery_failing_since = ${FAILING_SINCE} where id = ?`)
        .run(update.at, update.outcome, update.statusCode, update.error, update.test ? 1 : 0, update.outcome, update.at, id);
      return;
    }
    await this.db
      .updateTable('api_keys')
      .set({
        last_delivery_at: update.at,
        last_delivery_outcome: update.outcome,
        last_delivery_status_code: update.statusCode,
        last_delivery_error: update.error,
        last_delivery_test: update.test ? 1 : 0,
        last_delivery_failing_since: update.outcome === 'success' ? null : sql<number>`coalesce(last_delivery_failing_since, ${update.at})`,
      })
      .where('id', '=', id)
      .execute();
  }
}
