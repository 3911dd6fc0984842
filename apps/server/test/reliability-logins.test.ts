import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTestServer, type TestServer } from './support/test-server.js';
import { DashboardClient, PASSWORD } from './support/dashboard-client.js';

/**
 * Dashboard sign-in under attack (issue #26 §3, §8): attempts are counted before the password is checked, so a
 * burst sent at once gets no more checks than the limit; scrypt runs a bounded number at a time; client
 * addresses come from X-Forwarded-For only behind SVC_TRUST_PROXY.
 */

const servers: TestServer[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function server(env: Record<string, string> = {}): Promise<TestServer> {
  const s = await startTestServer({ env });
  servers.push(s);
  return s;
}

async function login(base: string, email: string, password: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/dashboard/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ email, password }),
  });
  const body = (await res.json()) as { error?: { code: string; message: string } };
  return { status: res.status, code: body.error?.code, message: body.error?.message, headers: res.headers };
}

describe('sign-in brute force by concurrency', () => {
  it('300 wrong passwords sent at once: at most 5 are checked, the rest 429; the right one sent last is refused until the window passes', async () => {
    const srv = await server();
    const { user, token } = await srv.createKey();
    const flood = Array.from({ length: 300 }, (_, i) => login(srv.url, user.email, `wrong password ${i}`));
    // An unrelated gzip-encoded chat request during the flood: zlib shares libuv's pool with scrypt.
    const gz = fetch(`${srv.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'Say hello.' }] })),
    });
    const results = await Promise.all(flood);
    const right = await login(srv.url, user.email, PASSWORD);

    const checked = results.filter((r) => r.status === 401);
    const refused = results.filter((r) => r.status === 429);
    expect(checked.length + refused.length).toBe(300);
    expect(checked.length).toBeGreaterThanOrEqual(1);
    expect(checked.length).toBeLessThanOrEqual(5);
    for (const r of refused) expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(right.status).toBe(429);
    expect(right.message).toMatch(/Too many failed sign-in attempts/);
    expect((await gz).status).toBe(200);

    // Once the minute has passed (the clock moved, not waited for), the right password gets in.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    vi.setSystemTime(Date.now() + 61_000);
    expect((await login(srv.url, user.email, PASSWORD)).status).toBe(200);
  });

  it('300 sign-ins from 300 addresses (trusted proxy): every one is answered 401 or 429, none waits for a check slot', async () => {
    const srv = await server({ SVC_TRUST_PROXY: 'loopback' });
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => login(srv.url, `nobody${i}@example.test`, 'guess', { 'x-forwarded-for': `10.0.${Math.floor(i / 250)}.${i % 250}` })),
    );
    for (const r of results) expect([401, 429]).toContain(r.status);
    const busy = results.filter((r) => r.status === 429);
    for (const r of busy) {
      expect(r.message).toMatch(/being checked right now|Too many failed sign-in attempts/);
      expect(r.headers.get('retry-after')).not.toBeNull();
    }
  });
});

describe('SVC_TRUST_PROXY', () => {
  it('unset: X-Forwarded-For is ignored, so rotating it does not reset the limit; the cookie is not Secure', async () => {
    const srv = await server();
    const { user } = await srv.createKey();
    for (let i = 0; i < 5; i++) expect((await login(srv.url, user.email, 'wrong', { 'x-forwarded-for': `203.0.113.${i}` })).status).toBe(401);
    expect((await login(srv.url, user.email, 'wrong', { 'x-forwarded-for': '203.0.113.99' })).status).toBe(429);
    const other = await srv.createKey();
    const ok = await login(srv.url, other.user.email, PASSWORD, { 'x-forwarded-proto': 'https' });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('set-cookie')).not.toMatch(/Secure/);
  });

  it('loopback: the client address comes from X-Forwarded-For (one client’s lockout is not another’s) and https sets Secure', async () => {
    const srv = await server({ SVC_TRUST_PROXY: 'loopback' });
    const { user } = await srv.createKey();
    const a = { 'x-forwarded-for': '203.0.113.7' };
    for (let i = 0; i < 5; i++) expect((await login(srv.url, user.email, 'wrong', a)).status).toBe(401);
    expect((await login(srv.url, user.email, PASSWORD, a)).status).toBe(429);
    const fromB = await login(srv.url, user.email, PASSWORD, { 'x-forwarded-for': '198.51.100.8', 'x-forwarded-proto': 'https' });
    expect(fromB.status).toBe(200);
    expect(fromB.headers.get('set-cookie')).toMatch(/; Secure/);
    const plain = await login(srv.url, user.email, PASSWORD, { 'x-forwarded-for': '198.51.100.9' });
    expect(plain.headers.get('set-cookie')).not.toMatch(/Secure/);
  });

  it('a list that does not name the proxy: its X-Forwarded-For is not believed', async () => {
    const srv = await server({ SVC_TRUST_PROXY: '10.0.0.0/8' });
    const { user } = await srv.createKey();
    for (let i = 0; i < 5; i++) expect((await login(srv.url, user.email, 'wrong', { 'x-forwarded-for': `203.0.113.${i}` })).status).toBe(401);
    expect((await login(srv.url, user.email, PASSWORD, { 'x-forwarded-for': '198.51.100.1' })).status).toBe(429);
  });
});

describe('attempts spread over many addresses', () => {
  it('one account from 21 addresses: after 20 failures the right password is refused too (429), until the window passes', async () => {
    const srv = await server({ SVC_TRUST_PROXY: 'loopback' });
    const { user } = await srv.createKey();
    for (let i = 0; i < 20; i++) expect((await login(srv.url, user.email, `guess ${i}`, { 'x-forwarded-for': `203.0.113.${i + 1}` })).status).toBe(401);
    const locked = await login(srv.url, user.email, PASSWORD, { 'x-forwarded-for': '198.51.100.21' });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(60);
    // Another account is not affected.
    const other = await srv.createKey();
    expect((await login(srv.url, other.user.email, PASSWORD, { 'x-forwarded-for': '198.51.100.22' })).status).toBe(200);
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    vi.setSystemTime(Date.now() + 601_000);
    expect((await login(srv.url, user.email, PASSWORD, { 'x-forwarded-for': '198.51.100.21' })).status).toBe(200);
  });

  it('the addresses of one IPv6 /64 share one limit: a new address in it is no fresh start; another /64 is', async () => {
    const srv = await server({ SVC_TRUST_PROXY: 'loopback' });
    const { user } = await srv.createKey();
    for (let i = 1; i <= 5; i++) expect((await login(srv.url, user.email, 'wrong', { 'x-forwarded-for': `2001:db8:1:2::${i}` })).status).toBe(401);
    expect((await login(srv.url, user.email, PASSWORD, { 'x-forwarded-for': '2001:db8:1:2:ffff:1:2:3' })).status).toBe(429);
    expect((await login(srv.url, user.email, PASSWORD, { 'x-forwarded-for': '2001:db8:1:3::1' })).status).toBe(200);
  });
});

describe('a successful sign-in', () => {
  // 40: past the address's 30 a minute and the account's 20. Each is a password hash: on a loaded host (two suites
  // side by side) 40 of them took longer than the default 30 s.
  it('gives its attempt back: 40 sign-ins in a row from one address all succeed', async () => {
    const srv = await server();
    const { user } = await srv.createKey();
    for (let i = 0; i < 40; i++) expect((await new DashboardClient(srv.url).login(user.email)).status).toBe(200);
  });
});
