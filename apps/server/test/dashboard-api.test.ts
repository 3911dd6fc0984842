import { createHmac, randomBytes, scryptSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/test-server.js';
import { newDeliveryId } from '../src/storage/outbox-store.js';
import express from 'express';
import type { AddressInfo } from 'node:net';
import { dashboardStatic } from '../src/dashboard/static-files.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { DashboardClient } from './support/dashboard-client.js';
import { hashPassword } from '../src/auth/passwords.js';
import { resetPassword } from '../src/auth/password-reset.js';
import type { z } from 'zod';
import {
  DashboardCreatedKeySchema,
  DashboardDeliveryAttemptSchema,
  DashboardDeliveryDetailSchema,
  DashboardDeliveryPageSchema,
  DashboardDeliverySchema,
  DashboardKeyListSchema,
  DashboardKeySchema,
  DashboardMeSchema,
  DashboardSigningSecretSchema,
  DashboardTestResultSchema,
  UsageReportSchema,
} from '@svc/protocol';


let server: TestServer;
let alice: { email: string; keyId: string; token: string };
let bob: { email: string; keyId: string };
let receiver: Receiver;

beforeAll(async () => {
  server = await startTestServer();
  receiver = await startReceiver();
  const a = await server.createKey({ name: 'alice key' });
  const b = await server.createKey({ name: 'bob key' });
  alice = { email: a.user.email, keyId: a.key.id, token: a.token };
  bob = { email: b.user.email, keyId: b.key.id };
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
});

/** A call to the public webhooks API (`/v1/webhooks…`) with an API key. */
async function publicApi(token: string, path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}/v1/webhooks${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: await res.json() };
}

describe('sign-in', () => {
  it('signs in with email and password, sets an HttpOnly SameSite=Lax cookie, and signs out', async () => {
    const client = new DashboardClient(server.url);
    expect((await client.request('GET', '/me')).status).toBe(401);
    const login = await client.login(alice.email.toUpperCase());
    expect(login.status).toBe(200);
    expect(login.body.user.email).toBe(alice.email);
    const cookie = login.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^svc_session=[\w-]{43}; /);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Lax');
    expect(cookie).toContain('Path=/dashboard');
    expect(cookie).not.toContain('Secure'); // plain http here

    const me = await client.request('GET', '/me');
    expect(me.status).toBe(200);
    expect(me.body.user.email).toBe(alice.email);
    expect(me.body.csrf_token).toBe(client.csrf);

    const stolenCookie = client.cookie;
    expect((await client.request('POST', '/logout', {})).status).toBe(200);
    expect(client.cookie).toBe('');
    // The old token is dead on the server, not only forgotten by the browser.
    client.cookie = stolenCookie;
    const after = await client.request('GET', '/me');
    expect(after.status).toBe(401);
    expect(after.body.error).toMatchObject({ type: 'authentication_error', code: 'not_signed_in', param: null });
  });

  it('stores only the SHA-256 of the session token', async () => {
    const client = new DashboardClient(server.url);
    await client.login(alice.email);
    const token = client.cookie.split('=')[1]!;
    const rows = await server.running.store.handle.db.selectFrom('sessions').select('token_hash').execute();
    expect(rows.some((r) => r.token_hash === token)).toBe(false);
    expect(rows.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash))).toBe(true);
  });

  it('rate-limits wrong passwords per address and email: the 6th attempt within a minute is 429', async () => {
    const { user } = await server.createKey();
    const client = new DashboardClient(server.url);
    for (let i = 0; i < 5; i++) {
      const res = await client.login(user.email, 'wrong password');
      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_credentials' });
    }
    const limited = await client.login(user.email, 'wrong password');
    expect(limited.status).toBe(429);
    expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // Even the right password waits: otherwise the limit would only slow guessing down, not stop it.
    expect((await client.login(user.email)).status).toBe(429);
    // Another account from the same address is not locked out by this one.
    expect((await new DashboardClient(server.url).login(alice.email)).status).toBe(200);
  });

  it('hashes passwords at OWASP strength, and moves a hash made with weaker parameters up at its next sign-in', async () => {
    // The parameters new hashes got before: scrypt N=2^14, r=8, p=1 (a quarter of OWASP's minimum cost).
    const salt = randomBytes(16);
    const old = ['scrypt', 16384, 8, 1, salt.toString('base64url'), scryptSync('old params password', salt, 32, { N: 16384, r: 8, p: 1 }).toString('base64url')].join('$');
    const user = await server.running.store.users.create({ email: 'old-hash@example.test', passwordHash: old, now: Date.now() });
    expect((await new DashboardClient(server.url).login(user.email, 'old params password')).status).toBe(200);
    const stored = (await server.running.store.users.byId(user.id))?.password_hash ?? '';
    // The rows of OWASP's Password Storage Cheat Sheet for scrypt (equal strength, from 128 MiB down to 8 MiB).
    const owasp = ['2^17,8,1', '2^16,8,2', '2^15,8,3', '2^14,8,5', '2^13,8,10'];
    const [scheme, n, r, p] = stored.split('$');
    expect(scheme).toBe('scrypt');
    expect(owasp).toContain(`2^${Math.log2(Number(n))},${r},${p}`);
    // The new hash still takes the same password, and only that.
    expect((await new DashboardClient(server.url).login(user.email, 'old params password')).status).toBe(200);
    expect((await new DashboardClient(server.url).login(user.email, 'another password')).status).toBe(401);
    expect((await server.running.store.users.byId(user.id))?.password_hash).toBe(stored);
  });

  /**
   * A password reset (what `svc-server users set-password` runs) made while a sign-in with the old password is
   * being checked: the store's method named is wrapped to run the reset at that moment, then put back.
   */
  async function resetDuring<T>(method: 'sessions.create' | 'users.byEmail', userId: string, newPassword: string, signIn: () => Promise<T>): Promise<T> {
    const store = server.running.store;
    const [part, name] = method.split('.') as ['sessions' | 'users', 'create' | 'byEmail'];
    const target = store[part] as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = target[name]!;
    let reset = false;
    target[name] = async (...args: unknown[]) => {
      if (method === 'users.byEmail') {
        const row = await original.apply(target, args);
        if (!reset) await resetPassword(store, userId, newPassword);
        reset = true;
        return row;
      }
      if (!reset) await resetPassword(store, userId, newPassword);
      reset = true;
      return original.apply(target, args);
    };
    try {
      return await signIn();
    } finally {
      target[name] = original;
    }
  }

  it('a password reset during a sign-in with the old password leaves that sign-in no session, and the old password no way back', async () => {
    const user = await server.running.store.users.create({ email: 'reset-race@example.test', passwordHash: await hashPassword('the old password'), now: Date.now() });
    // The reset ends the user's sessions just before this sign-in's session is stored.
    const racing = new DashboardClient(server.url);
    const refused = await resetDuring('sessions.create', user.id, 'the new password', () => racing.login(user.email, 'the old password'));
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('invalid_credentials');
    expect(racing.cookie).toBe('');
    expect((await server.running.store.handle.db.selectFrom('sessions').select('token_hash').where('user_id', '=', user.id).execute())).toEqual([]);
    expect((await new DashboardClient(server.url).login(user.email, 'the old password')).status).toBe(401);
    expect((await new DashboardClient(server.url).login(user.email, 'the new password')).status).toBe(200);
  });

  it('a hash moved up at sign-in does not overwrite a password reset made during that sign-in', async () => {
    const salt = randomBytes(16);
    const old = ['scrypt', 16384, 8, 1, salt.toString('base64url'), scryptSync('weak params password', salt, 32, { N: 16384, r: 8, p: 1 }).toString('base64url')].join('$');
    const user = await server.running.store.users.create({ email: 'reset-rehash@example.test', passwordHash: old, now: Date.now() });
    // The reset lands after the sign-in read the old hash, before it stores the stronger hash of the old password.
    const refused = await resetDuring('users.byEmail', user.id, 'the reset password', () => new DashboardClient(server.url).login(user.email, 'weak params password'));
    expect(refused.status).toBe(401);
    expect((await new DashboardClient(server.url).login(user.email, 'weak params password')).status).toBe(401);
    expect((await new DashboardClient(server.url).login(user.email, 'the reset password')).status).toBe(200);
  });

  it('answers unknown emails like wrong passwords', async () => {
    const res = await new DashboardClient(server.url).login('nobody@example.test', 'whatever');
    expect(res.status).toBe(401);
    expect(res.body.error.message).toBe('The email or password is not correct.');
  });

  it('reports missing fields with their names', async () => {
    const res = await new DashboardClient(server.url).request('POST', '/login', { email: alice.email });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'missing_required_parameter', param: 'password' });
  });
});

describe('CSRF', () => {
  it('refuses every write without the session CSRF token, and with a wrong one', async () => {
    const client = new DashboardClient(server.url);
    await client.login(alice.email);
    const writes: Array<[string, string, unknown]> = [
      ['POST', '/keys', { name: 'x' }],
      ['PATCH', `/keys/${alice.keyId}`, { rate_limit_rpm: 5 }],
      ['POST', `/keys/${alice.keyId}/signing-secret`, {}],
      ['DELETE', `/keys/${alice.keyId}/signing-secret`, undefined],
      ['POST', `/keys/${alice.keyId}/revoke`, {}],
      ['POST', `/keys/${alice.keyId}/test`, {}],
      ['POST', '/logout', {}],
    ];
    for (const [method, path, body] of writes) {
      const res = await client.request(method, path, body, { csrf: false });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'csrf_token_invalid', type: 'invalid_request_error' });
    }
    const saved = client.csrf;
    client.csrf = `${saved.slice(0, -1)}x`;
    expect((await client.request('POST', '/keys', { name: 'x' })).status).toBe(403);
    client.csrf = saved;
    // Nothing changed.
    const key = await server.running.store.keys.byId(alice.keyId);
    expect(key).toMatchObject({ revoked_at: null, rate_limit_rpm: null, signing_secret_enc: null });
    expect((await client.request('GET', '/me')).status).toBe(200);
  });
});

describe('isolation between users', () => {
  it("a second user can neither see nor change the first user's keys or deliveries (404)", async () => {
    const deliveryId = newDeliveryId();
    await server.running.store.deliveries.insert({
      id: deliveryId,
      keyId: alice.keyId,
      userId: (await server.running.store.keys.byId(alice.keyId))!.user_id,
      event: 'llm.request.completed',
      requestId: 'chatcmpl-x',
      url: 'http://127.0.0.1:9/',
      payload: '{"event":"llm.request.completed"}',
      now: Date.now(),
      nextAttemptAt: Date.now() + 3_600_000,
    });
    const client = new DashboardClient(server.url);
    await client.login(bob.email);
    const list = await client.request('GET', '/keys');
    expect(list.body.data.map((k: { id: string }) => k.id)).toEqual([bob.keyId]);

    const attempts: Array<[string, string, unknown]> = [
      ['GET', `/keys/${alice.keyId}`, undefined],
      ['PATCH', `/keys/${alice.keyId}`, { webhook_url: 'https://attacker.example/' }],
      ['POST', `/keys/${alice.keyId}/revoke`, {}],
      ['POST', `/keys/${alice.keyId}/signing-secret`, {}],
      ['DELETE', `/keys/${alice.keyId}/signing-secret`, undefined],
      ['POST', `/keys/${alice.keyId}/test`, {}],
      ['GET', `/keys/${alice.keyId}/deliveries`, undefined],
      ['GET', `/keys/${alice.keyId}/deliveries/${deliveryId}`, undefined],
      ['POST', `/keys/${alice.keyId}/deliveries/${deliveryId}/redeliver`, {}],
      ['POST', `/keys/${alice.keyId}/deliveries/${deliveryId}/cancel`, {}],
      ['POST', `/keys/${alice.keyId}/deliveries/redeliver`, {}],
      ['POST', `/keys/${alice.keyId}/deliveries/redeliver`, { dry_run: true }],
      // Bob's own key does not open Alice's delivery either.
      ['GET', `/keys/${bob.keyId}/deliveries/${deliveryId}`, undefined],
      ['POST', `/keys/${bob.keyId}/deliveries/${deliveryId}/redeliver`, {}],
      ['POST', `/keys/${bob.keyId}/deliveries/${deliveryId}/cancel`, {}],
      ['GET', `/usage?key_id=${alice.keyId}`, undefined],
    ];
    const before = await server.running.store.deliveries.byId(deliveryId);
    for (const [method, path, body] of attempts) {
      const res = await client.request(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    // A bulk redelivery of Bob's own key counts none of Alice's deliveries.
    const own = await client.request('POST', `/keys/${bob.keyId}/deliveries/redeliver`, { dry_run: true });
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ matched: 0, redelivered: 0 });
    const key = await server.running.store.keys.byId(alice.keyId);
    expect(key).toMatchObject({ webhook_url: null, revoked_at: null, signing_secret_enc: null });
    const delivery = await server.running.store.deliveries.byId(deliveryId);
    expect(delivery).toEqual(before);
    expect(delivery).toMatchObject({ status: 'pending', last_error: null });
    expect(delivery?.next_attempt_at).toBeGreaterThan(Date.now() + 3_000_000);

    // Alice sees it, and her own bulk redelivery counts it.
    const aliceClient = new DashboardClient(server.url);
    await aliceClient.login(alice.email);
    const hers = await aliceClient.request('GET', `/keys/${alice.keyId}/deliveries/${deliveryId}`);
    expect(hers.status).toBe(200);
    expect(hers.body.payload).toBe('{"event":"llm.request.completed"}');
    expect((await aliceClient.request('POST', `/keys/${alice.keyId}/deliveries/redeliver`, { dry_run: true })).body).toMatchObject({ matched: 1 });
  });
});

describe('one key: GET /keys/{id}', () => {
  it("answers the signed-in user's key as the list shows it, with its last delivery; another user's key like an unknown id (404)", async () => {
    const { key, user } = await server.createKey({ name: 'one key' });
    await server.running.store.keys.setLastDelivery(key.id, { at: Date.now(), outcome: 'failure', statusCode: 503, error: 'HTTP 503', test: false });
    const owner = new DashboardClient(server.url);
    await owner.login(user.email);
    const one = await owner.request('GET', `/keys/${key.id}`);
    expect(one.status).toBe(200);
    expect(one.headers.get('cache-control')).toBe('no-store');
    const listed = (await owner.request('GET', '/keys')).body.data[0];
    expect(one.body).toEqual(listed);
    expect(one.body).toMatchObject({ id: key.id, name: 'one key', revoked_at: null, last_delivery: { outcome: 'failure', status_code: 503, test: false } });

    const other = new DashboardClient(server.url);
    await other.login(bob.email);
    const foreign = await other.request('GET', `/keys/${key.id}`);
    const unknown = await other.request('GET', `/keys/${key.id.replace(/.$/, (c) => (c === '0' ? '1' : '0'))}`);
    expect(foreign.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(foreign.body.error).toMatchObject({ type: 'invalid_request_error', code: 'not_found', param: 'id' });
    expect(foreign.body.error.message.replace(key.id, 'ID')).toBe(unknown.body.error.message.replace(/'[^']+'/, "'ID'"));
    expect(JSON.stringify(foreign.body)).not.toContain('one key');
    // Signed out: 401, as every other route.
    expect((await new DashboardClient(server.url).request('GET', `/keys/${key.id}`)).status).toBe(401);
  });
});

describe('keys and webhook settings', () => {
  let client: DashboardClient;
  beforeAll(async () => {
    client = new DashboardClient(server.url);
    await client.login(alice.email);
  });

  it('creates a key shown once, which then works against the API', async () => {
    const created = await client.request('POST', '/keys', { name: 'ci' });
    expect(created.status).toBe(201);
    expect(created.body.token).toMatch(/^sk-svc-/);
    expect(created.body.key).toMatchObject({ name: 'ci', revoked_at: null, last_delivery: null });
    expect(JSON.stringify(created.body.key)).not.toContain(created.body.token);
    const listed = await client.request('GET', '/keys');
    expect(JSON.stringify(listed.body)).not.toContain(created.body.token);
    expect(JSON.stringify(listed.body)).not.toContain('key_hash');
    const models = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${created.body.token}` } });
    expect(models.status).toBe(200);

    const revoked = await client.request('POST', `/keys/${created.body.key.id}/revoke`, {});
    expect(revoked.body.key.revoked_at).not.toBeNull();
    const after = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${created.body.token}` } });
    expect(after.status).toBe(401);
  });

  it('validates inputs and names the field', async () => {
    const cases: Array<[unknown, string, string]> = [
      [{ webhook_url: 'ftp://example.com/hook' }, 'webhook_url', 'invalid_value'],
      [{ webhook_url: 'not a url' }, 'webhook_url', 'invalid_value'],
      [{ webhook_url: 'https://user:pw@example.com/' }, 'webhook_url', 'invalid_value'],
      [{ webhook_url: 42 }, 'webhook_url', 'invalid_type'],
      [{ rate_limit_rpm: 0 }, 'rate_limit_rpm', 'invalid_value'],
      [{ rate_limit_rpm: 1.5 }, 'rate_limit_rpm', 'invalid_value'],
      [{ rate_limit_rpm: '60' }, 'rate_limit_rpm', 'invalid_value'],
      [{ name: 'a\u0000b' }, 'name', 'invalid_value'],
      [{ name: 'red\u001b[31m' }, 'name', 'invalid_value'],
      [{ name: 'half \ud800 a pair' }, 'name', 'invalid_value'],
      // Spaces alone would be stored as an empty name, which the key list cannot show.
      [{ name: ' \t ' }, 'name', 'invalid_value'],
      [{ name: '   ' }, 'name', 'missing_required_parameter'],
    ];
    for (const [body, param, code] of cases) {
      const res = await client.request('PATCH', `/keys/${alice.keyId}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code, param });
    }
    // An empty name (the form's field left empty) and a missing one read as the form's words, like spaces alone.
    for (const body of [{ name: '' }, {}, { name: '   ' }]) {
      const res = await client.request('POST', '/keys', body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'missing_required_parameter', param: 'name', message: 'Enter a name for the key.' });
    }
    expect((await client.request('POST', '/keys', { name: 'tab\there' })).body.error).toMatchObject({ code: 'invalid_value', param: 'name' });
    // A name of emoji and accents (whole surrogate pairs) is text.
    const emoji = await client.request('PATCH', `/keys/${alice.keyId}`, { name: 'Café 🚀' });
    expect(emoji.status).toBe(200);
    expect(emoji.body.key.name).toBe('Café 🚀');
    const bad = await client.request('GET', `/keys/${alice.keyId}/deliveries?status=lost`);
    expect(bad.body.error).toMatchObject({ code: 'invalid_value', param: 'status' });
  });

  it('saves the webhook URL and rate limit; empty values clear them', async () => {
    const saved = await client.request('PATCH', `/keys/${alice.keyId}`, { webhook_url: receiver.url, rate_limit_rpm: 120 });
    expect(saved.status).toBe(200);
    expect(saved.body.key).toMatchObject({ webhook_url: receiver.url, rate_limit_rpm: 120 });
    const rateHeader = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${alice.token}` } });
    expect(rateHeader.headers.get('x-ratelimit-limit-requests')).toBe('120');
    const cleared = await client.request('PATCH', `/keys/${alice.keyId}`, { rate_limit_rpm: null });
    expect(cleared.body.key.rate_limit_rpm).toBeNull();
  });

  it('generates a signing secret shown once, stores it encrypted, and signs the test delivery with it', async () => {
    await client.request('PATCH', `/keys/${alice.keyId}`, { webhook_url: receiver.url });
    const generated = await client.request('POST', `/keys/${alice.keyId}/signing-secret`, {});
    expect(generated.status).toBe(200);
    const secret: string = generated.body.secret;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(generated.body.key.signing_secret_last4).toBe(secret.slice(-4));
    const listed = await client.request('GET', '/keys');
    expect(JSON.stringify(listed.body)).not.toContain(secret);

    // The database file (and its WAL) must not contain the secret in plaintext.
    const dbFile = join(server.dataDir, 'svc.db');
    const raw = Buffer.concat([dbFile, `${dbFile}-wal`].filter(existsSync).map((f) => readFileSync(f)));
    expect(raw.includes(Buffer.from(secret))).toBe(false);
    expect(raw.includes(Buffer.from(secret.slice(6, 30)))).toBe(false);
    const row = await server.running.store.keys.byId(alice.keyId);
    expect(row?.signing_secret_enc).toMatch(/^v1\./);

    const before = receiver.received.length;
    const test = await client.request('POST', `/keys/${alice.keyId}/test`, {});
    expect(test.status).toBe(200);
    expect(test.body.result).toEqual({ success: true, delivered_to: receiver.url });
    expect(test.body.key.last_delivery).toMatchObject({ outcome: 'success', status_code: 200, error: null });
    const got = receiver.received[before]!;
    const payload = JSON.parse(got.raw.toString('utf8'));
    expect(payload).toMatchObject({ test: true, event: 'llm.request.completed' });
    expect(payload.request_id).toMatch(/^test-/);
    const expected = `sha256=${createHmac('sha256', secret).update(got.raw).digest('hex')}`;
    expect(got.headers['x-svc-signature']).toBe(expected);

    // Rotating replaces it; clearing removes the signature header.
    const rotated = await client.request('POST', `/keys/${alice.keyId}/signing-secret`, {});
    expect(rotated.body.secret).not.toBe(secret);
    const cleared = await client.request('DELETE', `/keys/${alice.keyId}/signing-secret`);
    expect(cleared.body.key.signing_secret_last4).toBeNull();
    await client.request('POST', `/keys/${alice.keyId}/test`, {});
    expect(receiver.received.at(-1)!.headers['x-svc-signature']).toBeUndefined();

    const deliveries = await client.request('GET', `/keys/${alice.keyId}/deliveries`);
    expect(deliveries.body.data[0]).toMatchObject({ test: true, status: 'delivered', attempts: 1 });
    const detail = await client.request('GET', `/keys/${alice.keyId}/deliveries/${deliveries.body.data[0].id}`);
    expect(detail.body.payload).toBe(receiver.received.at(-1)!.raw.toString('utf8'));
    expect(detail.body.attempts).toBe(1);
    expect(detail.body.attempt_log).toHaveLength(1);
  });

  it("reports a failed test with its status code, error and the receiver's answer", async () => {
    receiver.queue.push({ status: 500, body: 'down for maintenance' });
    const test = await client.request('POST', `/keys/${alice.keyId}/test`, {});
    expect(test.body.result).toMatchObject({ success: false, status_code: 500, response_body: 'down for maintenance' });
    expect(test.body.key.last_delivery).toMatchObject({ outcome: 'failure', status_code: 500 });
  });

  it('asks for a webhook URL before a test', async () => {
    const created = await client.request('POST', '/keys', { name: 'no hook' });
    const res = await client.request('POST', `/keys/${created.body.key.id}/test`, {});
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'webhook_url' });
  });

  it("shows deliveries as the API does, without `object` and marked `test`", async () => {
    await client.request('PATCH', `/keys/${alice.keyId}`, { webhook_url: receiver.url });
    await client.request('POST', `/keys/${alice.keyId}/test`, {});
    const page = await client.request('GET', `/keys/${alice.keyId}/deliveries?limit=1`);
    const listed = await publicApi(alice.token, '/deliveries?limit=1');
    expect(page.status).toBe(200);
    const { object, ...delivery } = listed.body.data[0];
    expect(object).toBe('webhook.delivery');
    expect(page.body).toEqual({ data: [{ ...delivery, test: true }], has_more: listed.body.has_more });

    const detail = await client.request('GET', `/keys/${alice.keyId}/deliveries/${delivery.id}`);
    const shown = await publicApi(alice.token, `/deliveries/${delivery.id}`);
    const { object: _object, attempt_log: attempts, ...rest } = shown.body;
    expect(detail.body).toEqual({
      ...rest,
      test: true,
      attempt_log: attempts.map((a: { status_code: number | null }) => ({ ...a, outcome: a.status_code === 200 ? 'success' : 'failure' })),
    });
  });

  it('answers in the shapes @svc/protocol gives the dashboard', async () => {
    const strict = <T extends z.ZodObject>(schema: T, body: unknown) => expect(schema.strict().parse(body)).toEqual(body);
    await client.request('PATCH', `/keys/${alice.keyId}`, { webhook_url: receiver.url });
    strict(DashboardTestResultSchema, (await client.request('POST', `/keys/${alice.keyId}/test`, {})).body);
    strict(DashboardMeSchema, (await client.request('GET', '/me')).body);
    const keys = await client.request('GET', '/keys');
    DashboardKeyListSchema.parse(keys.body);
    for (const key of keys.body.data) strict(DashboardKeySchema, key);
    // One key: the very object the list has for it.
    const one = await client.request('GET', `/keys/${alice.keyId}`);
    expect(one.status).toBe(200);
    strict(DashboardKeySchema, one.body);
    expect(one.body).toEqual(keys.body.data.find((k: { id: string }) => k.id === alice.keyId));
    const page = await client.request('GET', `/keys/${alice.keyId}/deliveries`);
    DashboardDeliveryPageSchema.parse(page.body);
    for (const delivery of page.body.data) strict(DashboardDeliverySchema, delivery);
    const detail = await client.request('GET', `/keys/${alice.keyId}/deliveries/${page.body.data[0].id}`);
    strict(DashboardDeliveryDetailSchema, detail.body);
    for (const attempt of detail.body.attempt_log) strict(DashboardDeliveryAttemptSchema, attempt);
    const secret = await client.request('POST', `/keys/${alice.keyId}/signing-secret`, {});
    strict(DashboardSigningSecretSchema, secret.body);
    strict(DashboardCreatedKeySchema, (await client.request('POST', '/keys', { name: 'shapes' })).body);
    strict(UsageReportSchema, (await client.request('GET', '/usage?days=2')).body);
  });

  it('refuses a bad list query (a `before` that is no delivery id too) with the same 400 on both APIs', async () => {
    const queries = [['before=nope', 'before'], ['before=whd_1', 'before'], ['limit=0', 'limit'], ['limit=1.5', 'limit'], ['status=lost', 'status'], ['status=failed&status=pending', 'status'], ['status[]=failed', 'status'], ['limit[]=1', 'limit']];
    for (const [query, param] of queries) {
      const dashboard = await client.request('GET', `/keys/${alice.keyId}/deliveries?${query}`);
      const api = await publicApi(alice.token, `/deliveries?${query}`);
      for (const res of [dashboard, api]) {
        expect(res.status, query).toBe(400);
        expect(res.body, query).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', code: 'invalid_value', param } });
      }
      expect(dashboard.body.error.message).toBe(api.body.error.message);
    }
  });

  it('refuses a body that is not sent as JSON instead of acting as if there were none', async () => {
    const asText = (method: string, path: string, body: string) =>
      fetch(`${server.url}/dashboard/api${path}`, {
        method,
        headers: { cookie: client.cookie, 'x-csrf-token': client.csrf, 'content-type': 'text/plain;charset=UTF-8' },
        body,
      });
    const message = "Send the request body as JSON, with 'Content-Type: application/json'.";
    await client.request('PATCH', `/keys/${alice.keyId}`, { webhook_url: receiver.url });
    expect((await client.request('POST', `/keys/${alice.keyId}/test`, {})).body.result.success).toBe(true);
    const before = receiver.received.length;
    // Read as no filter, this redelivered every delivery of the key, delivered ones too.
    const bulk = await asText('POST', `/keys/${alice.keyId}/deliveries/redeliver`, JSON.stringify({ status: 'failed' }));
    expect(bulk.status).toBe(400);
    expect(await bulk.json()).toEqual({ error: { message, type: 'invalid_request_error', code: 'invalid_request', param: null } });
    const rename = await asText('PATCH', `/keys/${alice.keyId}`, JSON.stringify({ name: 'renamed as text' }));
    expect(rename.status).toBe(400);
    const signIn = await fetch(`${server.url}/dashboard/api/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'email=a&password=b' });
    expect(((await signIn.json()) as { error: { message: string } }).error.message).toBe(message);
    expect(receiver.received.length).toBe(before);
    // The same filter as JSON, and a write without a body, are served.
    expect((await client.request('POST', `/keys/${alice.keyId}/deliveries/redeliver`, { status: 'failed', dry_run: true })).status).toBe(200);
    const spare = await client.request('POST', '/keys', { name: 'spare' });
    expect((await client.request('POST', `/keys/${spare.body.key.id}/revoke`)).status).toBe(200);
  });

  it('charts usage per day for 30 days, per key and in total', async () => {
    const today = new Date().toISOString().slice(0, 10);
    const userId = (await server.running.store.keys.byId(alice.keyId))!.user_id;
    await server.running.store.usage.add([{ keyId: alice.keyId, userId, day: today, requests: 3, inputTokens: 30, outputTokens: 12 }]);
    const usage = await client.request('GET', '/usage?days=30');
    expect(usage.status).toBe(200);
    expect(usage.body.days).toHaveLength(30);
    expect(usage.body.days.at(-1)).toBe(today);
    expect(usage.body.total.at(-1)).toMatchObject({ requests: 3, total_tokens: 42 });
    const perKey = usage.body.keys.find((k: { key_id: string }) => k.key_id === alice.keyId);
    expect(perKey.series.at(-1)).toMatchObject({ requests: 3, input_tokens: 30, output_tokens: 12 });
    const one = await client.request('GET', `/usage?key_id=${alice.keyId}`);
    expect(one.body.keys).toHaveLength(1);
  });

  it('refuses a usage query it would otherwise misread: a parameter given twice, days not in digits', async () => {
    const cases: Array<[string, string, string]> = [
      // Read as no key_id, this charted every key of the user.
      [`key_id=${alice.keyId}&key_id=${alice.keyId}`, 'key_id', "'key_id' must be given once."],
      ['days=7&days=30', 'days', "'days' must be given once."],
      ['days[]=7', 'days', "'days' must be given as days=…, without brackets."],
      ['days=1e1', 'days', 'days must be a whole number from 1 to 90.'],
      ['days=0x10', 'days', 'days must be a whole number from 1 to 90.'],
      ['days=%205', 'days', 'days must be a whole number from 1 to 90.'],
      ['days=7.0', 'days', 'days must be a whole number from 1 to 90.'],
    ];
    for (const [query, param, message] of cases) {
      const res = await client.request('GET', `/usage?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body, query).toEqual({ error: { message, type: 'invalid_request_error', code: 'invalid_value', param } });
    }
    expect((await client.request('GET', '/usage?days=07&key_id=')).body.days).toHaveLength(7);
  });

  it('counts errors by status class, latency percentiles and ungrounded answers from real requests', async () => {
    const userId = (await server.running.store.keys.byId(alice.keyId))!.user_id;
    const { key, token } = await server.createKey({ userId, name: 'quality' });
    const send = (body: unknown) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const ask = { model: 'svc01', messages: [{ role: 'system', content: 'The sky is blue on a clear day.' }, { role: 'user', content: 'What colour is the sky?' }] };
    expect((await send(ask)).status).toBe(200);
    expect((await send(ask)).status).toBe(200);
    expect((await send({ model: 'svc01' })).status).toBe(400);

    type Point = { requests: number; errors_4xx: number; errors_5xx: number; latency_p50_ms: number | null; latency_p95_ms: number | null; grounding_checked: number; ungrounded: number; ungrounded_share: number | null };
    let today: Point | undefined;
    let summary: Point | undefined;
    await expect
      .poll(async () => {
        const usage = await client.request('GET', `/usage?key_id=${key.id}`);
        today = usage.body.keys[0].series.at(-1);
        summary = usage.body.keys[0].summary;
        return today?.requests;
      }, { timeout: 30_000 })
      .toBe(3);
    expect(today).toMatchObject({ errors_4xx: 1, errors_5xx: 0, grounding_checked: 2 });
    expect(today!.latency_p50_ms).toBeGreaterThan(0);
    expect(today!.latency_p95_ms).toBeGreaterThanOrEqual(today!.latency_p50_ms!);
    expect(today!.ungrounded_share).toBe(today!.ungrounded / 2);
    expect(summary).toEqual({ ...today, day: expect.stringMatching(/^\d{4}-\d\d-\d\d\.\.\d{4}-\d\d-\d\d$/) });
  });
});

describe('blocked private webhook addresses', () => {
  it('refuses a private address when SVC_WEBHOOK_ALLOW_PRIVATE=false', async () => {
    const strict = await startTestServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'false' } });
    try {
      const { user, key } = await strict.createKey();
      const client = new DashboardClient(strict.url);
      await client.login(user.email);
      for (const url of ['http://10.0.0.5/hook', 'http://169.254.169.254/latest', 'http://127.0.0.1:8080/']) {
        const res = await client.request('PATCH', `/keys/${key.id}`, { webhook_url: url });
        expect(res.status, url).toBe(400);
        expect(res.body.error).toMatchObject({ code: 'invalid_value', param: 'webhook_url' });
        expect(res.body.error.message).toMatch(/address/);
      }
    } finally {
      await strict.close();
    }
  });
});

describe('headers and static files', () => {
  it('sends security headers with a self-only CSP on API and page responses', async () => {
    for (const path of ['/dashboard/api/me', '/dashboard/', '/dashboard/keys/x']) {
      const res = await fetch(`${server.url}${path}`);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp, path).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('SAMEORIGIN');
    }
  });

  it('serves the built SPA with a fallback to index.html, or says it is not built', async () => {
    const res = await fetch(`${server.url}/dashboard/keys/abc/deliveries`);
    if (res.status === 503) {
      expect(await res.text()).toContain('dashboard not built: run npm run build');
    } else {
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
      expect(await res.text()).toContain('<div id="root">');
    }
    const api404 = await fetch(`${server.url}/dashboard/api/nope`, { headers: { cookie: '' } });
    expect(api404.status).toBe(401);
  });
});

describe('dashboard not built', () => {
  it('answers 503 with how to build it', async () => {
    const app = express().use('/dashboard', dashboardStatic(join(server.dataDir, 'no-such-dist')));
    const listener = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => listener.once('listening', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(listener.address() as AddressInfo).port}/dashboard/settings/api-keys`);
      expect(res.status).toBe(503);
      expect(await res.text()).toBe('dashboard not built: run npm run build\n');
    } finally {
      await new Promise((resolve) => listener.close(resolve));
    }
  });
});
