import { createHash } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blockedRange } from '../src/webhooks/url-guard.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { until } from './support/reliability-http.js';
import { leakedSecrets } from './support/reliability-kit.js';

/**
 * Security, beyond what webhooks-ssrf / url-guard / dashboard-api already cover: more SSRF address forms at
 * send time, redirects never followed, keys stored and looked up only by hash, revoked keys refused,
 * signing secrets encrypted at rest (raw database file and WAL), and no key or secret in any log line.
 */

let upstream: FakeUpstream;
let receiver: Receiver;
let strict: TestServer;
let open: TestServer;
/** Every key and secret created here; none may appear in logs or (keys, secrets) in the database files. */
const secrets: Record<string, string> = {};

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'Hello.' });
  receiver = await startReceiver();
  strict = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_ALLOW_PRIVATE: 'false', SVC_WEBHOOK_RETRY_SCHEDULE: '50ms' } });
  open = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_RETRY_SCHEDULE: '50ms' } });
});

afterAll(async () => {
  await strict?.close();
  await open?.close();
  await receiver?.close();
  await upstream?.close();
});

async function post(server: TestServer, path: string, token: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe('SSRF at send time (SVC_WEBHOOK_ALLOW_PRIVATE=false): address forms not in webhooks-ssrf.test.ts', () => {
  it('refuses octal, hex, short, IPv4-compatible, NAT64 and unspecified forms, and names resolving to private addresses', async () => {
    const port = Number(new URL(receiver.url).port);
    const forms = [
      `http://0177.0.0.1:${port}/h`, // octal
      `http://0x7f000001:${port}/h`, // one hex number
      `http://017700000001:${port}/h`, // one octal number
      `http://127.1:${port}/h`, // short dotted
      `http://0x7f.0.0.0x1:${port}/h`, // mixed hex parts
      `http://[::ffff:7f00:1]:${port}/h`, // IPv4-mapped, hex tail
      `http://[::127.0.0.1]:${port}/h`, // IPv4-compatible
      `http://[64:ff9b::7f00:1]:${port}/h`, // NAT64
      `http://[0:0:0:0:0:ffff:127.0.0.1]:${port}/h`, // mapped, long form
      `http://0.0.0.0:${port}/h`,
      `http://[::]:${port}/h`,
      `http://0:${port}/h`,
      `http://10.1.2.3/h`,
      `http://192.168.0.1/h`,
      `http://172.16.0.1/h`,
      `http://100.64.0.1/h`,
      `http://[fd00::1]/h`,
      `http://[fe80::1]/h`,
    ];
    // Names this machine resolves to a non-public address (DNS to a private address).
    for (const name of ['localhost', 'LOCALHOST', hostname()]) {
      const resolved = await lookup(name, { all: true }).catch(() => []);
      if (resolved.length > 0 && resolved.every((a) => blockedRange(a.address))) forms.push(`http://${name}:${port}/h`);
    }
    for (const url of forms) {
      const { token } = await strict.createKey({ webhookUrl: url });
      secrets[`strict:${url}`] = token;
      const res = await post(strict, '/v1/webhooks/test', token);
      expect(res.body, url).toMatchObject({ success: false, status_code: null, error: expect.stringMatching(/^refused to connect to /) });
    }
    expect(receiver.received).toHaveLength(0);
    console.info(`[reliability] SSRF: ${forms.length} address forms refused at send time`);
  });
});

describe('redirects', () => {
  it('a 3xx from the receiver is a failed attempt; the Location (a private address) is never requested', async () => {
    const target = await startReceiver();
    const redirector = await startReceiver({ status: 307, headers: { location: `${target.url}?from=redirect` } });
    try {
      const { token } = await open.createKey({ webhookUrl: redirector.url });
      secrets.redirect = token;
      const res = await post(open, '/v1/webhooks/test', token);
      expect(res.body).toMatchObject({ success: false, status_code: 307, error: `HTTP 307 (redirects are not followed: it points to ${target.url}?from=redirect)` });
      // And for audit deliveries, on every attempt.
      const chat = await post(open, '/v1/chat/completions', token, { model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
      expect(chat.status).toBe(200);
      await until(() => redirector.received.length >= 3, 10_000, 'audit attempts at the redirector');
      await new Promise((r) => setTimeout(r, 300));
      expect(target.received).toHaveLength(0);
    } finally {
      await target.close();
      await redirector.close();
    }
  });
});

describe('API keys', () => {
  it('are stored as SHA-256 only: neither the raw database file nor its WAL holds a key', async () => {
    const created = await Promise.all([1, 2, 3].map(() => open.createKey({ webhookUrl: receiver.url, signingSecret: `whsec_at-rest-${Math.random().toString(36).slice(2)}` })));
    created.forEach((c, i) => (secrets[`key${i}`] = c.token));
    for (const c of created) {
      expect((await post(open, '/v1/chat/completions', c.token, { model: 'svc01', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
      expect(c.key.key_hash).toBe(createHash('sha256').update(c.token).digest('hex'));
    }
    const files = ['svc.db', 'svc.db-wal'].map((f) => join(open.dataDir, f)).filter(existsSync);
    expect(files.length).toBeGreaterThan(0);
    const raw = Buffer.concat(files.map((f) => readFileSync(f)));
    const hashes = created.filter((c) => raw.includes(c.key.key_hash)).length;
    expect(hashes, 'the key hashes are in the files (the check reads the right bytes)').toBe(created.length);
    for (const c of created) {
      expect(raw.includes(c.token), 'plaintext key at rest').toBe(false);
      // Not even the random part without the prefix.
      expect(raw.includes(c.token.slice('sk-svc-'.length)), 'key body at rest').toBe(false);
    }
  });

  it('an unknown key that shares a real key’s prefix and length is refused', async () => {
    const { token } = await open.createKey();
    const forged = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    const res = await post(open, '/v1/chat/completions', forged, { model: 'svc01', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('a revoked key is refused (within the 1 s cache TTL) everywhere, and refused requests are not audited', async () => {
    const { token, key } = await open.createKey({ webhookUrl: receiver.url });
    secrets.revoked = token;
    expect((await post(open, '/v1/chat/completions', token, { model: 'svc01', messages: [{ role: 'user', content: 'before' }] })).status).toBe(200);
    await open.running.store.keys.revoke(key.id, Date.now());
    // Revoked behind this instance's back (as by another instance): its key cache may serve the key for up to 1 s.
    let acceptedAfter = 0;
    const refused = await until(async () => {
      const res = await post(open, '/v1/chat/completions', token, { model: 'svc01', messages: [{ role: 'user', content: 'after revoke' }] });
      if (res.status === 200) acceptedAfter++;
      return res.status === 401 ? res : undefined;
    }, 3000, 'revoked key refused');
    expect(refused.body.error).toMatchObject({ code: 'invalid_api_key', type: 'authentication_error' });
    for (const path of ['/v1/models', '/v1/webhooks/deliveries']) {
      const res = await fetch(`${open.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status, path).toBe(401);
    }
    const afterRevoke = () => receiver.received.filter((d) => d.raw.toString().includes('after revoke')).length;
    await receiver.waitFor(() => afterRevoke() >= acceptedAfter, 30_000);
    await new Promise((r) => setTimeout(r, 300));
    // Refused requests are not audited: only the ones accepted within the TTL have a delivery.
    expect(receiver.received.filter((d) => d.raw.toString().includes('after revoke'))).toHaveLength(acceptedAfter);
  });
});

describe('signing secrets at rest', () => {
  it('are encrypted in the database (raw file and WAL); only the last 4 characters are readable', async () => {
    const secret = `whsec_${'plain-text-canary-'.repeat(2)}8f3e`;
    secrets.signing = secret;
    const { key } = await open.createKey({ webhookUrl: receiver.url, signingSecret: secret });
    expect(key.signing_secret_enc).toBeTruthy();
    expect(key.signing_secret_enc).not.toContain('canary');
    expect(key.signing_secret_last4).toBe('8f3e');
    const raw = Buffer.concat(['svc.db', 'svc.db-wal'].map((f) => join(open.dataDir, f)).filter(existsSync).map((f) => readFileSync(f)));
    expect(raw.includes(key.signing_secret_enc!)).toBe(true);
    for (const form of [secret, Buffer.from(secret).toString('base64'), Buffer.from(secret).toString('hex'), 'plain-text-canary']) {
      expect(raw.includes(form), form).toBe(false);
    }
  });
});

describe('logs', () => {
  it('no key or secret created in this file appears in either server’s logs', () => {
    const text = [...strict.logs, ...open.logs].join('\n');
    expect(text.length).toBeGreaterThan(1000);
    expect(Object.keys(secrets).length).toBeGreaterThan(20);
    expect(leakedSecrets(text, secrets)).toEqual([]);
  });

  it('API responses carry no x-powered-by and a request id', async () => {
    const res = await fetch(`${open.url}/v1/models`, { headers: { authorization: `Bearer ${secrets.key0}` } });
    expect(res.headers.get('x-powered-by')).toBeNull();
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
  });
});
