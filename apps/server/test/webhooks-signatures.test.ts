import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verify as verifyGitHubStyle } from '@octokit/webhooks-methods';
import { verifyWebhook } from '@svc/verify';
import OpenAI from 'openai';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningSecret } from '../src/crypto/secret-box.js';
import { DashboardClient } from './support/dashboard-client.js';
import { createTestPostgres } from './support/databases.js';
import { startFakeUpstream, type FakeUpstream } from './support/fake-upstream.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver, type ReceivedDelivery } from './support/webhooks.js';

let upstream: FakeUpstream;
let server: TestServer;
let receiver: Receiver;

beforeAll(async () => {
  upstream = await startFakeUpstream({ answer: 'The Eiffel Tower is in Paris.' });
  receiver = await startReceiver();
  // 2 s between attempts (±20 %): a retry falls in another second, so its webhook-timestamp differs.
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, SVC_WEBHOOK_RETRY_SCHEDULE: '2s' } });
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await upstream?.close();
});

afterEach(() => {
  receiver.queue.length = 0;
});

const one = (value: string | string[] | undefined): string => (Array.isArray(value) ? value.join(' ') : (value ?? ''));
const standardHeaders = (h: IncomingHttpHeaders) => ({
  'webhook-id': one(h['webhook-id']),
  'webhook-timestamp': one(h['webhook-timestamp']),
  'webhook-signature': one(h['webhook-signature']),
});

async function chat(token: string, via = server): Promise<string> {
  const client = new OpenAI({ apiKey: token, baseURL: `${via.url}/v1`, maxRetries: 0 });
  const completion = await client.chat.completions.create({ model: 'svc01', messages: [{ role: 'user', content: 'Where is the Eiffel Tower?' }] });
  return completion.id;
}

async function deliveriesOf(requestId: string, count = 1): Promise<ReceivedDelivery[]> {
  const of = (list: ReceivedDelivery[]) => list.filter((d) => d.raw.toString('utf8').includes(`"request_id":"${requestId}"`));
  await receiver.waitFor((list) => of(list).length >= count);
  return of(receiver.received);
}

describe('Standard Webhooks headers beside X-Svc-Signature', () => {
  it('are verified by the standardwebhooks and svix libraries with the secret as the dashboard shows it, and X-Svc-Signature by @octokit/webhooks-methods', async () => {
    const secret = generateSigningSecret();
    const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: secret });
    const requestId = await chat(token);
    const [delivery] = await deliveriesOf(requestId);
    const body = delivery!.raw.toString('utf8');
    const headers = standardHeaders(delivery!.headers);

    expect(headers['webhook-id']).toBe(delivery!.headers['x-svc-delivery']);
    expect(Math.abs(Number(headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new StandardWebhook(secret).verify(body, headers)).toMatchObject({ request_id: requestId });
    expect(new SvixWebhook(secret).verify(body, headers)).toMatchObject({ request_id: requestId });
    expect(await verifyGitHubStyle(secret, body, one(delivery!.headers['x-svc-signature']))).toBe(true);
    expect(verifyWebhook(delivery!.raw, delivery!.headers, secret)).toBe(true);
  });

  it('refuses a replay: the same delivery presented after the tolerance (5 minutes by default)', async () => {
    const secret = generateSigningSecret();
    const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: secret });
    const [delivery] = await deliveriesOf(await chat(token));
    const sentAt = Number(delivery!.headers['webhook-timestamp']) * 1000;
    expect(verifyWebhook(delivery!.raw, delivery!.headers, secret, { now: sentAt + 299_000 })).toBe(true);
    expect(verifyWebhook(delivery!.raw, delivery!.headers, secret, { now: sentAt + 301_000 })).toBe(false);
    // The library refuses it the same way once its clock has moved on.
    const body = delivery!.raw.toString('utf8');
    const replayed = { ...standardHeaders(delivery!.headers), 'webhook-timestamp': String(Math.floor(sentAt / 1000) - 600) };
    expect(() => new StandardWebhook(secret).verify(body, replayed)).toThrow(/too old/i);
  });

  it('keys a user-chosen secret by its UTF-8 bytes: the libraries take "whsec_" + base64(secret)', async () => {
    const secret = 'my own signing secret';
    const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: secret });
    const [delivery] = await deliveriesOf(await chat(token));
    const body = delivery!.raw.toString('utf8');
    const headers = standardHeaders(delivery!.headers);
    expect(new StandardWebhook(`whsec_${Buffer.from(secret).toString('base64')}`).verify(body, headers)).toBeTruthy();
    expect(new StandardWebhook(secret, { format: 'raw' }).verify(body, headers)).toBeTruthy();
    expect(verifyWebhook(delivery!.raw, delivery!.headers, secret)).toBe(true);
    expect(await verifyGitHubStyle(secret, body, one(delivery!.headers['x-svc-signature']))).toBe(true);
  });

  it('re-signs every retry with a fresh webhook-timestamp: same bytes, same webhook-id', async () => {
    const secret = generateSigningSecret();
    const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: secret });
    receiver.queue.push({ status: 500 });
    const requestId = await chat(token);
    const [first, retry] = await deliveriesOf(requestId, 2);
    expect(retry!.raw.equals(first!.raw)).toBe(true);
    expect(retry!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(Number(retry!.headers['webhook-timestamp'])).toBeGreaterThan(Number(first!.headers['webhook-timestamp']));
    expect(retry!.headers['x-svc-signature']).toBe(first!.headers['x-svc-signature']);
    for (const d of [first!, retry!]) expect(new StandardWebhook(secret).verify(d.raw.toString('utf8'), standardHeaders(d.headers))).toBeTruthy();
  });

  it('signs the test send the same way', async () => {
    const secret = generateSigningSecret();
    const { token } = await server.createKey({ webhookUrl: receiver.url, signingSecret: secret });
    const res = await fetch(`${server.url}/v1/webhooks/test`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect(await res.json()).toMatchObject({ success: true });
    const sent = receiver.received.at(-1)!;
    expect(new StandardWebhook(secret).verify(sent.raw.toString('utf8'), standardHeaders(sent.headers))).toMatchObject({ test: true });
    expect(await verifyGitHubStyle(secret, sent.raw.toString('utf8'), one(sent.headers['x-svc-signature']))).toBe(true);
  });
});

/** A receiver that verifies with the standardwebhooks library and whatever secret it knows right now. */
async function startVerifyingReceiver(): Promise<{ url: string; knows: string[]; answered: number[]; server: Server }> {
  const state = { knows: [] as string[], answered: [] as number[] };
  const http = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const ok = state.knows.some((secret) => {
        try {
          new StandardWebhook(secret).verify(body, standardHeaders(req.headers));
          return true;
        } catch {
          return false;
        }
      });
      state.answered.push(ok ? 204 : 401);
      res.writeHead(ok ? 204 : 401).end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return Object.assign(state, { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/hook`, server: http });
}

const pgDb = await createTestPostgres('webhooks-signatures');
const variants = [{ name: 'sqlite', url: undefined }, ...(pgDb ? [{ name: 'postgres', url: pgDb.url }] : [])];
afterAll(async () => pgDb?.drop());

describe.each(variants)('rotating the signing secret ($name)', ({ url }) => {
  let rot: TestServer;
  beforeAll(async () => {
    rot = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstream.url, ...(url ? { SVC_DATABASE_URL: url, SVC_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') } : {}) } });
  });
  afterAll(async () => rot?.close());

  it('keeps the old secret signing for the overlap: a receiver knowing only the old one, then only the new one, loses nothing', async () => {
    const verifying = await startVerifyingReceiver();
    try {
      const { token, key, user } = await rot.createKey({ webhookUrl: verifying.url });
      const dashboard = new DashboardClient(rot.url);
      expect((await dashboard.login(user.email)).status).toBe(200);
      const me = await dashboard.request('GET', '/me');
      expect(me.body.default_signing_secret_overlap_seconds).toBe(86_400);

      const first = await dashboard.request('POST', `/keys/${key.id}/signing-secret`, {});
      const oldSecret: string = first.body.secret;
      expect(first.body.key.previous_signing_secret_expires_at).toBeNull();
      verifying.knows = [oldSecret];
      const sendTest = async () => (await dashboard.request('POST', `/keys/${key.id}/test`, {})).body.result;
      expect(await sendTest()).toMatchObject({ success: true });

      const before = Date.now();
      const rotated = await dashboard.request('POST', `/keys/${key.id}/signing-secret`, {});
      const newSecret: string = rotated.body.secret;
      expect(newSecret).not.toBe(oldSecret);
      expect(rotated.body.key).toMatchObject({ signing_secret_last4: newSecret.slice(-4), previous_signing_secret_last4: oldSecret.slice(-4) });
      const until = Date.parse(rotated.body.key.previous_signing_secret_expires_at);
      expect(until - before).toBeGreaterThanOrEqual(86_400_000 - 1000);
      expect(until - before).toBeLessThan(86_400_000 + 60_000);

      // The receiver has not been told yet: the old secret's signature still verifies.
      expect(await sendTest()).toMatchObject({ success: true });
      await chat(token, rot);
      // Redeployed with the new secret only.
      verifying.knows = [newSecret];
      expect(await sendTest()).toMatchObject({ success: true });
      await chat(token, rot);
      await expect.poll(() => verifying.answered.length, { timeout: 30_000 }).toBe(5);
      expect(verifying.answered).toEqual([204, 204, 204, 204, 204]);
      // The receiver has answered; svc records each attempt once its answer is read, a moment later.
      const recorded = async () => {
        const deliveries = await fetch(`${rot.url}/v1/webhooks/deliveries?limit=10`, { headers: { authorization: `Bearer ${token}` } });
        const list = (await deliveries.json()) as { data: Array<{ status: string; attempts: number }> };
        return list.data.map((d) => [d.status, d.attempts]);
      };
      await expect.poll(recorded).toEqual(Array(5).fill(['delivered', 1]));

      // An overlap of the key's own (1 s) ends: then only the newest secret signs.
      expect((await dashboard.request('PATCH', `/keys/${key.id}`, { signing_secret_overlap_seconds: 1 })).body.key.signing_secret_overlap_seconds).toBe(1);
      const third = await dashboard.request('POST', `/keys/${key.id}/signing-secret`, {});
      const newest: string = third.body.secret;
      verifying.knows = [newSecret];
      expect(await sendTest()).toMatchObject({ success: true });
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect((await dashboard.request('GET', '/keys')).body.data[0].previous_signing_secret_expires_at).toBeNull();
      expect(await sendTest()).toMatchObject({ success: false, status_code: 401 });
      verifying.knows = [newest];
      expect(await sendTest()).toMatchObject({ success: true });
      expect((await dashboard.request('PATCH', `/keys/${key.id}`, { signing_secret_overlap_seconds: -1 })).status).toBe(400);
    } finally {
      await new Promise((resolve) => verifying.server.close(resolve));
    }
  });

  it('clearing the secret ends the overlap too: nothing is signed', async () => {
    const { key, user } = await rot.createKey({ webhookUrl: receiver.url });
    const dashboard = new DashboardClient(rot.url);
    await dashboard.login(user.email);
    await dashboard.request('POST', `/keys/${key.id}/signing-secret`, {});
    await dashboard.request('POST', `/keys/${key.id}/signing-secret`, {});
    const cleared = await dashboard.request('DELETE', `/keys/${key.id}/signing-secret`);
    expect(cleared.body.key).toMatchObject({ signing_secret_last4: null, previous_signing_secret_last4: null, previous_signing_secret_expires_at: null });
    await dashboard.request('POST', `/keys/${key.id}/test`, {});
    const sent = receiver.received.at(-1)!;
    expect(sent.headers['webhook-signature']).toBeUndefined();
    expect(sent.headers['webhook-id']).toBe(sent.headers['x-svc-delivery']);
  });
});
