import express, { type Request, type Response, type Router } from 'express';
import type {
  BulkRedeliverResult,
  DashboardCreatedKey,
  DashboardDeliveryDetail,
  DashboardDeliveryProgress,
  DashboardDeliveryPage,
  DashboardKey,
  DashboardKeyList,
  DashboardKeyResult,
  DashboardMe,
  DashboardSignIn,
  DashboardSigningSecret,
  DashboardTestResult,
  WebhookTestResult,
} from '@svc/protocol';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { DeliverySummaryRow, RedeliveryFilter } from '../storage/outbox-store.js';
import { generateApiKey } from '../auth/api-keys.js';
import { KeyQuota, keyRateLimit } from '../auth/key-limits.js';
import { NO_PREVIOUS_SECRET, rotatedOut } from '../auth/secret-rotation.js';
import { ConcurrencyGate } from '../auth/concurrency-gate.js';
import { hashPassword, needsRehash, verifyPassword } from '../auth/passwords.js';
import { generateSigningSecret } from '../crypto/secret-box.js';
import { ApiError, quoted } from '../http/errors.js';
import { labelUtf8, verifyUtf8 } from '../http/json-body.js';
import { continueBody } from '../http/expect-continue.js';
import { validateWebhookUrl } from '../webhooks/index.js';
import { DashboardError } from './errors.js';
import { Sessions, signedInOf } from './session.js';
import { SignInLimits, type SignInCounters } from './sign-in-limits.js';
import { dashboardAttemptView, dashboardDeliveryView, keyView } from './views.js';
import type { ServiceDeps } from '../service-deps.js';
import { usageView } from './usage-view.js';
import { DAY_MS, utcDay } from '../time.js';
import { isRecord } from '../is-record.js';
import { singleQueryParam } from '@svc/protocol';
import { bulkRedeliverFilter, deliveryListQuery } from '../webhooks/delivery-shapes.js';

/** The webhook operations the dashboard reuses from the webhooks module. */
export interface DashboardWebhooks {
  /** One synchronous test attempt to the key's URL (the logic behind POST /v1/webhooks/test). */
  sendTest(key: ApiKeyRecord): Promise<WebhookTestResult>;
  /** Redeliver for every delivery of the key matching the filter (or, with `dryRun`, only their count). */
  redeliverMatching(key: ApiKeyRecord, filter: Omit<RedeliveryFilter, 'limit'>, dryRun?: boolean): Promise<BulkRedeliverResult>;
  /** A new attempt now for one of the key's deliveries; undefined when the key has no such delivery. */
  redeliver(key: ApiKeyRecord, deliveryId: string): Promise<DeliverySummaryRow | undefined>;
  /** Stops one of the key's pending deliveries; undefined when the key has no such delivery. */
  cancel(key: ApiKeyRecord, deliveryId: string): Promise<DeliverySummaryRow | undefined>;
  /** The key's webhook URL is changing to `url`: cancels (null) or retargets its pending deliveries. */
  urlChanged(key: ApiKeyRecord, url: string | null): Promise<void>;
}

export interface DashboardApiDeps extends ServiceDeps {
  webhooks: DashboardWebhooks;
  /** Failed sign-ins allowed per address and email per minute (default 5; see SignInLimits for the others). */
  loginAttemptsPerMinute?: number;
  /**
   * Password checks (scrypt) running at once (default 2); more sign-ins at that moment are refused with 429.
   * libuv's pool has 4 threads: the rest stay free for gzip, file and DNS work.
   */
  loginConcurrency?: number;
  /** Where the sign-in limits count (default: this process's memory); see `signInCounters`. */
  signInCounters?: SignInCounters;
}

const MAX_NAME_LENGTH = 64;

/** Verifying against this when the email is unknown keeps the timing of both failures alike. */
const dummyHash = hashPassword('not a password anyone has');

const CONTROL_OR_LONE_SURROGATE = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * A string field of the body. `text: true` for names people read: control characters (NUL, escapes that move
 * a terminal's cursor) and unpaired UTF-16 surrogates (stored as U+FFFD) are refused, not stored.
 */
function stringField(body: Record<string, unknown>, name: string, options: { max?: number; text?: boolean } = {}): string {
  const value = body[name];
  if (value === undefined || value === null || value === '') {
    throw new ApiError('missing_required_parameter', `Enter a value for '${name}'.`, { param: name });
  }
  if (typeof value !== 'string') throw new ApiError('invalid_type', `'${name}' must be a string.`, { param: name });
  if (options.max !== undefined && value.length > options.max) {
    throw new ApiError('invalid_value', `'${name}' must be at most ${options.max} characters.`, { param: name });
  }
  if (options.text && CONTROL_OR_LONE_SURROGATE.test(value)) {
    throw new ApiError('invalid_value', `'${name}' must be plain text: no control characters and no unpaired surrogates.`, { param: name });
  }
  return value;
}

/** A key's `name`, trimmed: a name of spaces alone is refused like a missing one, on create and rename alike. */
function keyName(body: Record<string, unknown>): string {
  // The Create key form sends '' when its field is left empty: said in words, not as a parameter's name.
  if (body.name === undefined || body.name === null || body.name === '') {
    throw new ApiError('missing_required_parameter', 'Enter a name for the key.', { param: 'name' });
  }
  const name = stringField(body, 'name', { max: MAX_NAME_LENGTH, text: true }).trim();
  if (!name) throw new ApiError('missing_required_parameter', 'Enter a name for the key.', { param: 'name' });
  return name;
}

function bodyOf(req: Request): Record<string, unknown> {
  const body: unknown = req.body;
  if (body === undefined) return {};
  if (!isRecord(body)) throw new ApiError('invalid_type', 'The request body must be a JSON object.');
  return body;
}

/**
 * The dashboard's JSON API (mounted at /dashboard/api): session sign-in, and the signed-in user's keys,
 * webhook settings, deliveries and usage. Every key lookup is scoped to that user: another user's key id is
 * answered exactly like an unknown one (404).
 *
 * @example
 * app.use('/dashboard/api', createDashboardApi({ config, store, logger, clock, secretBox, keyCache, webhooks }));
 */
export function createDashboardApi(deps: DashboardApiDeps): Router {
  const { store, clock, keyCache } = deps;
  const sessions = new Sessions(store.sessions, store.users, clock);
  const quota = new KeyQuota(store.keys, deps.config.limits);
  const signInLimits = new SignInLimits(deps.loginAttemptsPerMinute ?? 5, deps.signInCounters);
  const passwordChecks = new ConcurrencyGate(deps.loginConcurrency ?? 2);

  const api = express.Router();
  // UTF-8 only, as the API's own reader: a key's name sent in Latin-1 is refused, not saved with U+FFFD in it.
  api.use((req, _res, next) => {
    continueBody(req);
    labelUtf8(req);
    next();
  });
  api.use(express.json({ limit: '100kb', strict: false, verify: verifyUtf8 }));
  // express.json() reads application/json only (what a cross-site form cannot send). Any other body would pass for
  // none: a bulk redelivery's filter sent as text/plain redelivered every delivery, a PATCH saved nothing with a 200.
  api.use((req, _res, next) => {
    if (req.is('application/json') === false && req.headers['content-length'] !== '0') {
      throw new ApiError('invalid_request', "Send the request body as JSON, with 'Content-Type: application/json'.");
    }
    next();
  });
  api.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    next();
  });

  api.post('/login', async (req, res) => {
    const body = bodyOf(req);
    // Plain text: no account's email holds a control character, and Postgres refuses a NUL in text (an internal error).
    const email = stringField(body, 'email', { max: 320, text: true }).trim().toLowerCase();
    const password = stringField(body, 'password', { max: 1024 });
    const ip = req.ip ?? 'unknown';
    // Every attempt is counted before its password is checked, concurrent ones included: 300 wrong
    // passwords sent at once get as many checks as the limit, not 300.
    await signInLimits.consume(ip, email);
    const release = passwordChecks.tryEnter();
    if (!release) {
      throw new ApiError('rate_limit_exceeded', 'Too many sign-ins are being checked right now. Try again in a second.', {
        headers: { 'retry-after': '1' },
      });
    }
    let user: Awaited<ReturnType<typeof store.users.byEmail>>;
    let ok: boolean;
    let checkedHash = '';
    try {
      user = await store.users.byEmail(email);
      ok = user ? await verifyPassword(password, user.password_hash) : (await verifyPassword(password, await dummyHash), false);
      if (user && ok) {
        checkedHash = user.password_hash;
        if (needsRehash(checkedHash)) {
          const stronger = await hashPassword(password);
          if (await store.users.replacePasswordHash(user.id, checkedHash, stronger)) checkedHash = stronger;
        }
      }
    } finally {
      release();
    }
    if (!user || !ok) throw new DashboardError('invalid_credentials', 'The email or password is not correct.');
    // Undefined: the password was reset while it was checked (svc-server users set-password); the old one no
    // longer signs in. (Two sign-ins moving the same old-parameter hash up at once can also land here: one of
    // them is asked to sign in again.)
    const csrfToken = await sessions.start(req, res, user, checkedHash);
    if (csrfToken === undefined) throw new DashboardError('invalid_credentials', 'The email or password is not correct.');
    await signInLimits.succeeded(ip, email);
    const signedIn: DashboardSignIn = { user: { id: user.id, email: user.email }, csrf_token: csrfToken };
    res.json(signedIn);
  });

  api.use(sessions.require());

  api.post('/logout', async (req, res) => {
    await sessions.end(req, res, signedInOf(res));
    res.json({ signed_out: true });
  });

  api.get('/me', (_req, res) => {
    const { user, csrfToken } = signedInOf(res);
    const body: DashboardMe = {
      user: { id: user.id, email: user.email },
      csrf_token: csrfToken,
      default_rate_limit_rpm: deps.config.rateLimitRpm,
      max_rate_limit_rpm: deps.config.limits.maxKeyRateLimitRpm,
      default_signing_secret_overlap_seconds: Math.round(deps.config.webhooks.secretOverlapMs / 1000),
    };
    res.json(body);
  });

  /** The signed-in user's key, or 404 — for another user's key too, so ids reveal nothing. */
  async function ownKey(req: Request, res: Response): Promise<ApiKeyRecord> {
    const id = String(req.params.id);
    const key = await store.keys.byId(id);
    if (!key || key.user_id !== signedInOf(res).user.id) {
      throw new ApiError('not_found', `No API key with id '${quoted(id)}'.`, { param: 'id' });
    }
    return key;
  }

  async function ownActiveKey(req: Request, res: Response): Promise<ApiKeyRecord> {
    const key = await ownKey(req, res);
    if (key.revoked_at !== null) throw new ApiError('invalid_request', 'This key has been revoked and can no longer be changed.');
    return key;
  }

  /** The key as it is after a change (which this instance's key cache forgets). */
  async function keyResult(key: ApiKeyRecord): Promise<DashboardKeyResult> {
    keyCache.invalidate(key.id);
    const fresh = await store.keys.byId(key.id);
    if (!fresh) throw new ApiError('not_found', `No API key with id '${key.id}'.`, { param: 'id' });
    return { key: keyView(fresh, clock(), await store.deliveries.retrying(fresh.id)) };
  }

  api.get('/keys', async (_req, res) => {
    const userId = signedInOf(res).user.id;
    // One query for all keys' retrying counts: the open list asks again every few seconds.
    const [keys, retrying] = await Promise.all([store.keys.list(userId), store.deliveries.retryingOfUser(userId)]);
    const body: DashboardKeyList = { data: keys.map((k) => keyView(k, clock(), retrying.get(k.id))) };
    res.json(body);
  });

  // One key, as the list shows it: the key's settings page follows its Last delivery with this, not the whole list.
  api.get('/keys/:id', async (req, res) => {
    const key = await ownKey(req, res);
    const body: DashboardKey = keyView(key, clock(), await store.deliveries.retrying(key.id));
    res.json(body);
  });

  api.post('/keys', async (req, res) => {
    const name = keyName(bodyOf(req));
    const generated = generateApiKey();
    const userId = signedInOf(res).user.id;
    const key = await quota.create(userId, () =>
      store.keys.create({ userId, name, prefix: generated.prefix, keyHash: generated.hash, now: clock() }),
    );
    const body: DashboardCreatedKey = { key: keyView(key, clock()), token: generated.token };
    res.status(201).json(body);
  });

  api.post('/keys/:id/revoke', async (req, res) => {
    const key = await ownKey(req, res);
    await store.keys.revoke(key.id, clock());
    res.json(await keyResult(key));
  });

  api.patch('/keys/:id', async (req, res) => {
    const key = await ownActiveKey(req, res);
    const body = bodyOf(req);
    const patch: { webhook_url?: string | null; rate_limit_rpm?: number | null; name?: string; signing_secret_overlap_seconds?: number | null } = {};
    if ('name' in body) patch.name = keyName(body);
    if ('webhook_url' in body) {
      const url = body.webhook_url;
      if (url === null || url === '') patch.webhook_url = null;
      else if (typeof url !== 'string') throw new ApiError('invalid_type', 'The webhook URL must be a string.', { param: 'webhook_url' });
      else patch.webhook_url = await validateWebhookUrl(url.trim(), { allowPrivate: deps.config.webhooks.allowPrivate });
    }
    if ('rate_limit_rpm' in body) patch.rate_limit_rpm = keyRateLimit(body.rate_limit_rpm, deps.config.limits);
    if ('signing_secret_overlap_seconds' in body) patch.signing_secret_overlap_seconds = secretOverlap(body.signing_secret_overlap_seconds);
    await store.keys.update(key.id, patch, clock());
    if (patch.webhook_url !== undefined) await deps.webhooks.urlChanged(key, patch.webhook_url);
    res.json(await keyResult(key));
  });

  api.post('/keys/:id/signing-secret', async (req, res) => {
    const key = await ownActiveKey(req, res);
    const secret = generateSigningSecret();
    const now = clock();
    await store.keys.update(key.id, { ...rotatedOut(key, now, deps.config.webhooks.secretOverlapMs, deps.secretBox), signing_secret_enc: deps.secretBox.seal(secret), signing_secret_last4: secret.slice(-4) }, now);
    // The only time the plaintext leaves the server.
    const body: DashboardSigningSecret = { ...(await keyResult(key)), secret };
    res.json(body);
  });

  api.delete('/keys/:id/signing-secret', async (req, res) => {
    const key = await ownActiveKey(req, res);
    await store.keys.update(key.id, { signing_secret_enc: null, signing_secret_last4: null, ...NO_PREVIOUS_SECRET }, clock());
    res.json(await keyResult(key));
  });

  api.post('/keys/:id/test', async (req, res) => {
    const key = await ownActiveKey(req, res);
    if (!key.webhook_url) {
      throw new ApiError('invalid_request', 'No webhook URL is configured for this key. Enter a Webhook URL and Save first.', {
        param: 'webhook_url',
      });
    }
    const result = await deps.webhooks.sendTest(key);
    const body: DashboardTestResult = { result, ...(await keyResult(key)) };
    res.json(body);
  });

  api.get('/keys/:id/deliveries', async (req, res) => {
    const key = await ownKey(req, res);
    const page = await store.deliveries.list(key.id, deliveryListQuery(req.query));
    const body: DashboardDeliveryPage = { data: page.rows.map(dashboardDeliveryView), has_more: page.hasMore };
    res.json(body);
  });

  api.get('/keys/:id/deliveries/:did', async (req, res) => {
    const key = await ownKey(req, res);
    const found = await store.deliveries.get(key.id, String(req.params.did));
    if (!found) throw deliveryNotFound(req);
    const body: DashboardDeliveryDetail = {
      ...dashboardDeliveryView(found.delivery),
      payload: found.delivery.payload,
      attempt_log: found.attempts.map(dashboardAttemptView),
    };
    res.json(body);
  });

  api.get('/keys/:id/deliveries/:did/progress', async (req, res) => {
    const key = await ownKey(req, res);
    const found = await store.deliveries.progress(key.id, String(req.params.did));
    if (!found) throw deliveryNotFound(req);
    const body: DashboardDeliveryProgress = { ...dashboardDeliveryView(found.delivery), attempt_log: found.attempts.map(dashboardAttemptView) };
    res.json(body);
  });

  api.post('/keys/:id/deliveries/redeliver', async (req, res) => {
    const key = await ownKey(req, res);
    const { filter, dryRun } = bulkRedeliverFilter(req.body);
    res.json(await deps.webhooks.redeliverMatching(key, filter, dryRun));
  });

  api.post('/keys/:id/deliveries/:did/redeliver', async (req, res) => {
    const key = await ownKey(req, res);
    const row = await deps.webhooks.redeliver(key, String(req.params.did));
    if (!row) throw deliveryNotFound(req);
    res.status(202).json(dashboardDeliveryView(row));
  });

  api.post('/keys/:id/deliveries/:did/cancel', async (req, res) => {
    const key = await ownKey(req, res);
    const row = await deps.webhooks.cancel(key, String(req.params.did));
    if (!row) throw deliveryNotFound(req);
    res.json(dashboardDeliveryView(row));
  });

  api.get('/usage', async (req, res) => {
    const userId = signedInOf(res).user.id;
    // Digits only, like a deliveries list's `limit`: Number() would also take '1e1', '0x10' and ' 5'.
    const daysText = queryParam(req, 'days') ?? '30';
    const days = Number(daysText);
    if (!/^\d+$/.test(daysText) || days < 1 || days > 90) {
      throw new ApiError('invalid_value', 'days must be a whole number from 1 to 90.', { param: 'days' });
    }
    const keyId = queryParam(req, 'key_id') || undefined;
    const keys = await store.keys.list(userId);
    if (keyId !== undefined && !keys.some((k) => k.id === keyId)) {
      throw new ApiError('not_found', `No API key with id '${quoted(keyId)}'.`, { param: 'key_id' });
    }
    const today = clock();
    const dayList = Array.from({ length: days }, (_, i) => utcDay(today - (days - 1 - i) * DAY_MS));
    const rows = await store.usage.byDay(userId, dayList[0] as string, keyId);
    res.json(usageView(rows, keys.filter((k) => keyId === undefined || k.id === keyId), dayList));
  });

  api.use((req: Request) => {
    throw new ApiError('not_found', `Unknown dashboard API URL: ${req.method} ${quoted(`${req.baseUrl}${req.path}`)}.`);
  });
  return api;
}

/** A query parameter given at most once and without brackets, as a deliveries list reads its own; else a 400 naming it. */
function queryParam(req: Request, name: string): string | undefined {
  const read = singleQueryParam(req.query, name);
  if (!read.ok) throw new ApiError('invalid_value', read.message, { param: name });
  return read.text;
}

function deliveryNotFound(req: Request): ApiError {
  return new ApiError('not_found', `No delivery with id '${quoted(String(req.params.did))}'.`, { param: 'id' });
}

/** The longest a rotated-out secret may keep signing (30 days). */
const MAX_OVERLAP_SECONDS = 30 * 86_400;

/** A key's `signing_secret_overlap_seconds`: whole seconds from 0 to 30 days, or null/'' for the server default. */
function secretOverlap(value: unknown): number | null {
  if (value === null || value === '') return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_OVERLAP_SECONDS) {
    throw new ApiError('invalid_value', `The secret overlap must be a whole number of seconds from 0 to ${MAX_OVERLAP_SECONDS}, or null for the default.`, {
      param: 'signing_secret_overlap_seconds',
    });
  }
  return value;
}
