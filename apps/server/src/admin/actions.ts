// What each svc-server command does (commands.ts says what they are). commands.ts loads this module when a command
// runs: `--help`, `--version` and a mistyped command load none of it (the configuration's schemas, the database,
// the protocol's schemas).
import cluster from 'node:cluster';
import { loadConfig, ConfigError, riskySettings, unknownSettings, type Config } from '../config.js';
import { openStore, type Store } from '../storage/store.js';
import { generateApiKey, hashApiKey } from '../auth/api-keys.js';
import { rotatedOut } from '../auth/secret-rotation.js';
import { KeyQuota, keyRateLimit } from '../auth/key-limits.js';
import { ApiError } from '../http/errors.js';
import { hashPassword } from '../auth/passwords.js';
import { resetPassword } from '../auth/password-reset.js';
import { checkSecretKey, previousKeyNote, SecretBox, SecretKeyMismatchError } from '../crypto/secret-box.js';
import { previousSecretView } from '../dashboard/views.js';
import { EMBEDDED_KEY_FILE, resolveSecretKey } from '../crypto/embedded-key.js';
// Only what the commands use (not the webhooks module's index, not the HTTP server, which `start` imports
// when it runs).
import { applyUrlChange } from '../webhooks/actions.js';
import { validateWebhookUrl } from '../webhooks/url-guard.js';
import type { FirstRunCredentials } from '../auth/first-run.js';
import type { ApiKeyPatch, ApiKeyRecord } from '../storage/keys-store.js';
import { CommandError } from './command-error.js';
import { passwordOption, signingSecretOption } from './password-option.js';
import type { CommandIO } from './commands.js';
import { SERVER_VERSION } from '../version.js';

/** The configuration from `io.env` and `overrides`; `starting`: the server's start, which also warns of risky settings. */
export function commandConfig(io: CommandIO, overrides: Record<string, string | undefined> = {}, starting = false): Config {
  // Said once, by the process the operator started (not again by each worker of --processes).
  if (!cluster.isWorker) for (const note of unknownSettings(io.env)) io.stderr(`warning: ${note}`);
  try {
    const loaded = loadConfig({ ...io.env, ...overrides });
    // Said by the server's start only: the admin commands do not serve webhooks.
    if (starting && !cluster.isWorker) for (const note of riskySettings(loaded, io.env)) io.stderr(`warning: ${note}`);
    return loaded;
  } catch (err) {
    if (err instanceof ConfigError) throw new CommandError(err.message);
    throw err;
  }
}

function printFirstRun(io: CommandIO, url: string, firstRun: FirstRunCredentials): void {
  io.stdout('');
  io.stdout('First start: created a local user and an API key. They are shown only this once.');
  io.stdout(`  API key:    ${firstRun.apiKey}`);
  io.stdout(`  Dashboard:  ${url}/dashboard  (email ${firstRun.email}, password ${firstRun.password})`);
  io.stdout(`  Try it:     curl ${url}/v1/chat/completions -H "Authorization: Bearer ${firstRun.apiKey}" -d '{"model":"svc01","messages":[{"role":"user","content":"Hello"}]}'`);
  io.stdout('');
}

function printNoUsers(io: CommandIO): void {
  io.stderr('No user yet on this database: make one with svc-server users create --email E --password-stdin, then svc-server keys create --email E (same environment); a new Postgres database gets no first-run user.');
}

async function withStore<T>(config: Config, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(config.databaseUrl);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** `--rate-limit-rpm`, within SVC_MAX_KEY_RATE_LIMIT_RPM (null: the server's default). */
function rateLimitOption(value: number | undefined, cfg: Config): number | null {
  try {
    return keyRateLimit(value, cfg.limits);
  } catch (err) {
    throw new CommandError(`--rate-limit-rpm: ${(err as Error).message}`);
  }
}

/** `--webhook-url`, through the same SSRF guard as the dashboard's. */
async function webhookUrlOption(url: string, cfg: Config): Promise<string> {
  try {
    return await validateWebhookUrl(url, { allowPrivate: cfg.webhooks.allowPrivate });
  } catch (err) {
    throw new CommandError(`--webhook-url: ${(err as Error).message}`);
  }
}

/**
 * `--signing-secret`, sealed for storage (never stored in the clear). A secret key that does not open the stored
 * secrets is refused as the start refuses it: sealing with it would leave the database with secrets under two keys.
 */
async function sealedSecretOption(secret: string, cfg: Config, store: Store): Promise<{ sealed: string; box: SecretBox }> {
  if (secret.length < 8) throw new CommandError('--signing-secret must have at least 8 characters');
  // Receivers sign with the secret as given: a pasted newline would make every signature fail to verify.
  if (secret !== secret.trim()) throw new CommandError('--signing-secret has white space around it (a pasted newline?): give it without');
  const box = new SecretBox(resolveSecretKey(cfg.secretKey, store.handle.dataDir), cfg.previousSecretKeys);
  await checkSecretKey(box, store.keys);
  return { sealed: box.seal(secret), box };
}

/**
 * Seals every stored signing secret (current and rotated-out) under `box`'s current key. Each is replaced only
 * while it is still the value read (see KeysStore.resealSecret), so instances running meanwhile lose nothing: a
 * secret one of them set during the pass is newer, and is looked at again in the next pass. Running it again
 * finds everything current and changes nothing.
 */
async function resealSecrets(box: SecretBox, store: Store): Promise<{ resealed: number; current: number; unreadable: string[]; unreadableSecrets: number }> {
  const resealedNow = new Set<string>();
  for (let pass = 0; pass < 5; pass++) {
    let current = 0;
    let raced = 0;
    /** Keys with a secret no key of `box` opens, each once, and how many such secrets. */
    const unreadable = new Set<string>();
    let unreadableSecrets = 0;
    for (const row of await store.keys.sealedSecrets()) {
      for (const column of ['signing_secret_enc', 'previous_signing_secret_enc'] as const) {
        const sealed = row[column];
        if (sealed === null) continue;
        let next: string | undefined;
        try {
          next = box.reseal(sealed);
        } catch (err) {
          if (!(err instanceof SecretKeyMismatchError)) throw err;
          unreadable.add(row.id);
          unreadableSecrets += 1;
          continue;
        }
        if (next === undefined) {
          if (!resealedNow.has(`${row.id}/${column}`)) current += 1;
        } else if (await store.keys.resealSecret(row.id, column, sealed, next)) resealedNow.add(`${row.id}/${column}`);
        else raced += 1;
      }
    }
    if (raced === 0) return { resealed: resealedNow.size, current, unreadable: [...unreadable], unreadableSecrets };
  }
  throw new CommandError('signing secrets kept changing while they were re-encrypted: run svc-server secrets rotate again');
}

/** An unknown user, with what to do: who there is, and how to create one. */
async function noSuchUser(store: Store, who: string): Promise<CommandError> {
  const users = await store.handle.db.selectFrom('users').select('email').limit(6).execute();
  const known = users.length === 0 ? 'there are no users yet' : `users: ${users.slice(0, 5).map((u) => u.email).join(', ')}${users.length > 5 ? ', …' : ''}`;
  return new CommandError(`no such user: ${who} (${known}; create one with: svc-server users create --email ${who.includes('@') ? who : 'E'} --password P)`);
}

/** A key by id, by the prefix `keys list` shows, or by the key itself. */
async function findKey(store: Store, ref: string): Promise<ApiKeyRecord> {
  const trimmed = ref.trim();
  const byId = await store.keys.byId(trimmed);
  if (byId) return byId;
  const byToken = trimmed.startsWith('sk-svc-') ? await store.keys.byHash(hashApiKey(trimmed)) : undefined;
  if (byToken) return byToken;
  const byPrefix = (await store.keys.list()).filter((k) => k.prefix === trimmed || k.prefix.replace(/…$/, '') === trimmed.replace(/…$/, ''));
  if (byPrefix.length === 1) return byPrefix[0]!;
  if (byPrefix.length > 1) throw new CommandError(`${byPrefix.length} keys have the prefix ${ref}: give the key id (svc-server keys list)`);
  throw new CommandError(`no such key: ${ref} (svc-server keys list shows the ids and prefixes)`);
}

function keyView(key: ApiKeyRecord) {
  return {
    id: key.id,
    user_id: key.user_id,
    name: key.name,
    prefix: key.prefix,
    created_at: new Date(key.created_at).toISOString(),
    last_used_at: key.last_used_at ? new Date(key.last_used_at).toISOString() : null,
    revoked: key.revoked_at !== null,
    rate_limit_rpm: key.rate_limit_rpm,
    webhook_url: key.webhook_url,
    signing_secret: key.signing_secret_last4 ? `…${key.signing_secret_last4}` : null,
    // The rotated-out secret while it still signs beside the current one.
    ...previousSecretView(key, Date.now()),
  };
}

/** The last line of a graceful stop: a supervisor's log shows the stop finished, and how long draining took. */
function stoppedLine(drainingSince: number): string {
  return `svc stopped (in-flight requests and deliveries finished in ${((Date.now() - drainingSince) / 1000).toFixed(1)} s)`;
}

/** `start`: the server (or, with more than one process, the primary or a worker of node:cluster) until a stop signal. */
export async function start(io: CommandIO, opts: { processes?: string }): Promise<void> {
  const cfg = commandConfig(io, opts.processes === undefined ? {} : { SVC_PROCESSES: opts.processes }, true);
  // Listening for the stop signals before anything says "listening": a SIGTERM sent as soon as that line is
  // read would otherwise find no handler yet and kill the process outright, skipping the graceful stop.
  // (A cluster worker ignores them: its primary stops it.)
  const stopSignal = cluster.isWorker ? undefined : io.stopSignal();
  if (cfg.processes > 1) {
    // node:cluster forks this same command: a worker runs the server; the primary supervises.
    if (cluster.isWorker) return (await import('../cluster/worker.js')).runClusterWorker(cfg);
    const primary = await (await import('../cluster/primary.js')).startPrimary(cfg, { stopSignal });
    if (!primary) {
      io.stderr(`${await stopSignal!} received while starting: stopped every process`);
      return;
    }
    io.stderr(`svc listening on ${primary.url}  (version ${SERVER_VERSION}; dashboard: ${primary.url}/dashboard; ${primary.processes} processes)`);
    if (primary.firstRun) printFirstRun(io, primary.url, primary.firstRun);
    if (primary.noUsers) printNoUsers(io);
    const signal = await Promise.race([
      stopSignal!,
      primary.failed.then((err) => {
        throw new CommandError(`svc stopped: ${err.message}`);
      }),
    ]);
    io.stderr(`${signal} received: finishing in-flight requests and deliveries in every process…`);
    const draining = Date.now();
    await primary.close();
    io.stderr(stoppedLine(draining));
    return;
  }
  const { startServer } = await import('../server.js');
  const running = await startServer(cfg);
  io.stderr(`svc listening on ${running.url}  (version ${SERVER_VERSION}; dashboard: ${running.url}/dashboard)`);
  if (running.firstRun) printFirstRun(io, running.url, running.firstRun);
  if (running.noUsers) printNoUsers(io);
  const signal = await Promise.race([
    stopSignal!,
    running.failed.then((err) => {
      throw new CommandError(`svc stopped: ${err.message}`);
    }),
  ]);
  io.stderr(`${signal} received: finishing in-flight requests and deliveries…`);
  const draining = Date.now();
  await running.close();
  io.stderr(stoppedLine(draining));
}

/** `migrate`. */
export async function migrate(io: CommandIO): Promise<void> {
  const cfg = commandConfig(io);
  // Opening the store migrates: what it applied is what this command did.
  await withStore(cfg, async (store) => {
    io.stderr(store.migrated.length ? `applied: ${store.migrated.join(', ')}` : 'schema is up to date');
  });
}

/** `secrets rotate`. */
export async function rotateSecrets(io: CommandIO, opts: { json?: boolean }): Promise<void> {
  const cfg = commandConfig(io);
  await withStore(cfg, async (store) => {
    const box = new SecretBox(resolveSecretKey(cfg.secretKey, store.handle.dataDir), cfg.previousSecretKeys);
    const { resealed, current, unreadable, unreadableSecrets: n } = await resealSecrets(box, store);
    // Without SVC_SECRET_KEY the key is the embedded database's own file: named, rather than a setting that is unset.
    const key = cfg.secretKey ? 'SVC_SECRET_KEY' : `the data directory's ${EMBEDDED_KEY_FILE} (SVC_SECRET_KEY is unset)`;
    if (opts.json) io.stdout(JSON.stringify({ resealed, current, unreadable }));
    else io.stderr(`re-encrypted ${resealed} signing secret${resealed === 1 ? '' : 's'} with ${key}; ${current} already were`);
    // Once nothing needs the old key, say it can go (else it stays in the environment for good). On stderr
    // also with --json: stdout is the JSON alone.
    const note = n === 0 ? await previousKeyNote(box, store.keys) : undefined;
    if (note) io.stderr(note.message);
    if (n > 0) {
      throw new CommandError(
        `${n} signing secret${n === 1 ? '' : 's'} open${n === 1 ? 's' : ''} with neither SVC_SECRET_KEY nor SVC_SECRET_KEY_PREVIOUS ` +
          `(keys ${unreadable.join(', ')}): add the key they were encrypted with to SVC_SECRET_KEY_PREVIOUS and run this again, or set new signing secrets for those keys`,
      );
    }
  });
}

/** `users create`. */
export async function createUser(io: CommandIO, opts: { email: string; password?: string; passwordStdin?: boolean; json?: boolean }): Promise<void> {
  if (!/^[^\s@]+@[^\s@]+$/.test(opts.email)) throw new CommandError(`"${opts.email}" is not an email address`);
  const password = await passwordOption(opts, io.readStdin);
  await withStore(commandConfig(io), async (store) => {
    if (await store.users.byEmail(opts.email)) throw new CommandError(`a user with email ${opts.email} already exists`);
    const user = await store.users.create({ email: opts.email, passwordHash: await hashPassword(password), now: Date.now() });
    io.stdout(opts.json ? JSON.stringify({ id: user.id, email: user.email }) : `created user ${user.email} (${user.id})`);
  });
}

/** `users list`. */
export async function listUsers(io: CommandIO, opts: { json?: boolean }): Promise<void> {
  await withStore(commandConfig(io), async (store) => {
    const list = (await store.users.list()).map((u) => ({ ...u, created_at: new Date(u.created_at).toISOString() }));
    if (opts.json) io.stdout(JSON.stringify(list));
    else if (list.length === 0) io.stderr('there are no users yet (create one with: svc-server users create --email E --password-stdin)');
    else for (const u of list) io.stdout(`${u.email}  ${u.id}  created ${u.created_at}  ${u.active_keys} active key${u.active_keys === 1 ? '' : 's'}`);
  });
}

/** `users set-password`. */
export async function setPassword(io: CommandIO, opts: { email: string; password?: string; passwordStdin?: boolean }): Promise<void> {
  const password = await passwordOption(opts, io.readStdin);
  await withStore(commandConfig(io), async (store) => {
    const user = await store.users.byEmail(opts.email);
    if (!user) throw await noSuchUser(store, opts.email);
    await resetPassword(store, user.id, password);
    io.stderr(`set a new password for ${user.email}; every dashboard session of theirs has ended`);
  });
}

/** `keys create`. */
export async function createKey(
  io: CommandIO,
  opts: { userId?: string; email?: string; name: string; webhookUrl?: string; signingSecret?: string; signingSecretStdin?: boolean; rateLimitRpm?: number; json?: boolean },
): Promise<void> {
  opts.signingSecret = await signingSecretOption(opts, io.readStdin);
  const cfg = commandConfig(io);
  await withStore(cfg, async (store) => {
    let user = opts.userId ? await store.users.byId(opts.userId) : opts.email ? await store.users.byEmail(opts.email) : undefined;
    if (!opts.userId && !opts.email) {
      if ((await store.users.count()) !== 1) throw new CommandError('say whose key it is: --email E or --user-id UUID');
      const first = (await store.handle.db.selectFrom('users').selectAll().limit(1).execute())[0];
      user = first;
    }
    if (!user) throw await noSuchUser(store, opts.userId ?? opts.email!);
    const rateLimitRpm = rateLimitOption(opts.rateLimitRpm, cfg);
    const webhookUrl = opts.webhookUrl === undefined ? null : await webhookUrlOption(opts.webhookUrl, cfg);
    const secretEnc = opts.signingSecret === undefined ? null : (await sealedSecretOption(opts.signingSecret, cfg, store)).sealed;
    const generated = generateApiKey();
    const owner = user;
    const create = () =>
      store.keys.create({
        userId: owner.id,
        name: opts.name,
        prefix: generated.prefix,
        keyHash: generated.hash,
        now: Date.now(),
        rateLimitRpm,
        webhookUrl,
        signingSecretEnc: secretEnc,
        signingSecretLast4: opts.signingSecret ? opts.signingSecret.slice(-4) : null,
      });
    const key = await new KeyQuota(store.keys, cfg.limits).create(owner.id, create).catch((err: unknown) => {
      throw err instanceof ApiError ? new CommandError(err.message) : err;
    });
    if (opts.json) io.stdout(JSON.stringify({ ...keyView(key), key: generated.token }));
    else {
      io.stdout(generated.token);
      io.stderr(`created key ${key.id} (${key.name}) for ${user.email}; it is shown only this once`);
    }
  });
}

/** `keys list`. */
export async function listKeys(io: CommandIO, opts: { email?: string; json?: boolean }): Promise<void> {
  await withStore(commandConfig(io), async (store) => {
    const user = opts.email ? await store.users.byEmail(opts.email) : undefined;
    if (opts.email && !user) throw await noSuchUser(store, opts.email);
    const list = (await store.keys.list(user?.id)).map(keyView);
    if (opts.json) io.stdout(JSON.stringify(list));
    else
      for (const k of list)
        io.stdout(`${k.id}  ${k.prefix}  ${k.name}  ${k.revoked ? 'revoked' : 'active'}  ${k.webhook_url ?? '-'}`);
  });
}

/** `keys update`. */
export async function updateKey(
  io: CommandIO,
  ref: string,
  opts: { webhookUrl?: string; signingSecret?: string; signingSecretStdin?: boolean; name?: string; rateLimitRpm?: number; json?: boolean },
): Promise<void> {
  opts.signingSecret = await signingSecretOption(opts, io.readStdin);
  const cfg = commandConfig(io);
  if (opts.webhookUrl === undefined && opts.signingSecret === undefined && opts.name === undefined && opts.rateLimitRpm === undefined) {
    throw new CommandError('nothing to change: give --webhook-url, --signing-secret, --name or --rate-limit-rpm');
  }
  await withStore(cfg, async (store) => {
    const key = await findKey(store, ref);
    if (key.revoked_at !== null) throw new CommandError(`key ${key.id} is revoked`);
    const now = Date.now();
    const patch: ApiKeyPatch = {};
    if (opts.name !== undefined) patch.name = opts.name.trim() || 'default';
    if (opts.rateLimitRpm !== undefined) patch.rate_limit_rpm = rateLimitOption(opts.rateLimitRpm, cfg);
    if (opts.webhookUrl !== undefined) patch.webhook_url = opts.webhookUrl.trim() === '' ? null : await webhookUrlOption(opts.webhookUrl.trim(), cfg);
    if (opts.signingSecret !== undefined) {
      const { sealed, box } = await sealedSecretOption(opts.signingSecret, cfg, store);
      Object.assign(patch, rotatedOut(key, now, cfg.webhooks.secretOverlapMs, box), {
        signing_secret_enc: sealed,
        signing_secret_last4: opts.signingSecret.slice(-4),
      });
    }
    const updated = (await store.keys.update(key.id, patch, now))!;
    // Waiting deliveries follow the URL, as after the dashboard's Save.
    if (patch.webhook_url !== undefined) await applyUrlChange(store.deliveries, key, patch.webhook_url, now);
    if (opts.json) io.stdout(JSON.stringify(keyView(updated)));
    else io.stderr(`updated key ${key.id} (${updated.name}): webhook ${updated.webhook_url ?? 'none'}, signing secret ${updated.signing_secret_last4 ? `…${updated.signing_secret_last4}` : 'none'}`);
  });
}

/** `keys revoke`. */
export async function revokeKey(io: CommandIO, ref: string): Promise<void> {
  await withStore(commandConfig(io), async (store) => {
    const key = await findKey(store, ref);
    if (!(await store.keys.revoke(key.id, Date.now()))) throw new CommandError(`key ${key.id} was already revoked`);
    io.stderr(`revoked ${key.id} (${key.prefix})`);
  });
}
