import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './support/chromium.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { hashPassword } from '../src/auth/passwords.js';
import { findDashboardDist } from '../src/dashboard/static-files.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { sessionCookie } from './support/dashboard-client.js';
import { newDeliveryId } from '../src/storage/outbox-store.js';
import { afterNextRefresh } from './support/page-refresh.js';

const SKIP = skipWithoutChromium('dashboard-e2e');
const ARTIFACTS = join(dirname(fileURLToPath(import.meta.url)), '..', 'test-artifacts');
const PASSWORD = 'e2e password 12345';


/** Verifies X-Svc-Signature over the raw bytes, as a receiver would. */
function signatureValid(raw: Buffer, header: string | string[] | undefined, secret: string): boolean {
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`);
  const actual = Buffer.from(String(header ?? ''));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** Every user of this file has PASSWORD: hashed once (a scrypt at OWASP's cost is ~0.3 s of CPU). */
let hashed: Promise<string> | undefined;

async function createUser(server: TestServer, email: string) {
  return server.running.store.users.create({ email, passwordHash: await (hashed ??= hashPassword(PASSWORD)), now: Date.now() });
}

/** Opens the dashboard signed in as `email` (the first test signs in through the form). */
async function signIn(page: Page, base: string, email: string) {
  await page.context().addCookies([await sessionCookie(base, email, PASSWORD)]);
  await page.goto(`${base}/dashboard/`);
  await page.getByRole('heading', { name: 'API Keys' }).waitFor();
}

/** Copies the value shown once, as a user must before it may go, and closes it with Done. */
async function copyThenDone(page: Page) {
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(page.url()).origin });
  const shown = page.locator('.show-once');
  await shown.getByRole('button', { name: 'Copy' }).click();
  await shown.getByRole('button', { name: 'Copied' }).waitFor();
  await shown.getByRole('button', { name: 'Done' }).click();
}

async function chat(server: TestServer, token: string) {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc01',
      messages: [
        { role: 'system', content: 'The sky is blue because air scatters blue light more than red light.' },
        { role: 'user', content: 'What colour is the sky?' },
      ],
    }),
  });
}

describe.skipIf(SKIP)('dashboard in Chromium', () => {
  let browser: Browser;
  let server: TestServer;
  let receiver: Receiver;
  const shot = (page: Page, name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    if (!findDashboardDist()) throw new Error('apps/dashboard/dist is missing: run npm run build first');
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchChromium();
    server = await startTestServer();
    receiver = await startReceiver();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await receiver?.close();
  });

  it('signs in, creates and uses a key, configures and tests the webhook, redelivers, charts usage and revokes', async () => {
    const user = await createUser(server, 'e2e@example.test');
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.clock.install();
    const cspErrors: string[] = [];
    page.on('console', (msg) => {
      if (msg.type() === 'error') cspErrors.push(msg.text());
    });

    // Sign in (a wrong password first).
    await page.goto(`${server.url}/dashboard/`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await shot(page, '01-sign-in');
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill('wrong');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not correct');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'API Keys' }).waitFor();

    // Create key: shown once, with Copy.
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByLabel('Key name').fill('production');
    await page.getByRole('button', { name: 'Create key' }).click();
    const token = (await page.getByTestId('shown-once-value').textContent()) ?? '';
    expect(token).toMatch(/^sk-svc-/);
    await expect.poll(() => page.getByRole('button', { name: 'Copy' }).isVisible()).toBe(true);
    await shot(page, '02-api-keys-created');
    await copyThenDone(page);
    expect(await page.getByTestId('shown-once-value').count()).toBe(0);
    expect(await page.content()).not.toContain(token);

    // The key works against the API (built-in offline model).
    const first = await chat(server, token);
    expect(first.status).toBe(200);

    // Key settings: invalid URLs are explained next to the field.
    await page.getByRole('link', { name: 'production', exact: true }).click();
    await page.getByRole('heading', { name: 'production' }).waitFor();
    const urlField = page.getByLabel('Webhook URL');
    const urlError = page.getByTestId('webhook_url-error');
    await urlField.fill('ftp://example.com/hook');
    await page.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => urlError.textContent()).toContain('must use http or https');
    await shot(page, '03-invalid-webhook-url');
    await urlField.fill('not a url');
    await page.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => urlError.textContent()).toContain('is not a valid URL');
    await page.getByLabel('Rate limit (requests/min)').fill('0');
    await urlField.fill(receiver.url);
    await page.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByTestId('rate_limit_rpm-error').textContent()).toContain('whole number');
    await page.getByLabel('Rate limit (requests/min)').fill('120');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
    expect(await urlError.count()).toBe(0);

    // Signing secret: generated and shown once; afterwards only the last 4 characters.
    await page.getByRole('button', { name: 'Generate' }).click();
    const secret = (await page.getByTestId('shown-once-value').textContent()) ?? '';
    expect(secret).toMatch(/^whsec_/);
    await expect.poll(() => page.getByTestId('signing-secret-state').textContent()).toContain(secret.slice(-4));
    await shot(page, '04-key-settings-secret');

    // Send test → signed test payload arrives; the page shows the outcome and the last delivery status.
    await page.getByRole('button', { name: 'Send test' }).click();
    await expect.poll(() => page.getByTestId('test-result').textContent()).toContain(`Test delivered to ${receiver.url}`);
    const lastDelivery = page.getByTestId('last-delivery');
    await expect.poll(() => lastDelivery.textContent()).toContain('Succeeded');
    expect(await lastDelivery.textContent()).toContain('HTTP 200');
    const testDelivery = receiver.received.at(-1)!;
    const testPayload = JSON.parse(testDelivery.raw.toString('utf8'));
    expect(testPayload).toMatchObject({ event: 'llm.request.completed', test: true, user_id: user.id });
    expect(testPayload.request_id).toMatch(/^test-/);
    expect(signatureValid(testDelivery.raw, testDelivery.headers['x-svc-signature'], secret)).toBe(true);
    await copyThenDone(page);
    await shot(page, '05-key-settings-tested');

    // A chat request → its delivery appears under Deliveries, with the exact payload; Redeliver sends it again.
    // The receiver holds its answer until the list shows the delivery pending; the list then follows it to
    // Delivered by itself, without Refresh.
    let answer!: () => void;
    receiver.queue.push({ until: new Promise<void>((resolve) => (answer = resolve)) });
    const response = await chat(server, token);
    const completion = (await response.json()) as { id: string };
    await receiver.waitFor((list) => list.some((d) => d.raw.toString('utf8').includes(completion.id)));
    const sent = receiver.received.find((d) => d.raw.toString('utf8').includes(completion.id))!;
    expect(signatureValid(sent.raw, sent.headers['x-svc-signature'], secret)).toBe(true);

    await page.getByRole('link', { name: 'Deliveries' }).first().click();
    await page.getByRole('heading', { name: 'Deliveries' }).waitFor();
    const row = page.locator('tr.clickable', { hasText: completion.id });
    await row.waitFor();
    expect(await row.locator('td').nth(3).textContent()).toBe('Pending');
    expect(await row.locator('td').nth(2).textContent()).toBe('200');
    // The test send's row: its request status is the sample's, said as such (no request was made).
    const testRow = page.locator('tr.clickable', { hasText: testPayload.request_id });
    expect(await testRow.locator('td').nth(2).textContent()).toBe('200 (sample)');
    answer();
    await expect.poll(afterNextRefresh(page, () => row.locator('td').nth(3).textContent()), { timeout: 30_000 }).toBe('Delivered');
    await row.click();
    const payload = page.getByTestId('payload');
    await expect.poll(() => payload.textContent()).toBe(sent.raw.toString('utf8'));
    // Beside the payload, each claim of the answer with the passage of the request that supports it.
    const claimsSent = (JSON.parse(sent.raw.toString('utf8')) as { claims: Array<{ text: string; evidence: { message_index: number; text: string } | null }> }).claims;
    expect(claimsSent.length).toBeGreaterThan(0);
    expect(claimsSent[0]!.evidence).toMatchObject({ message_index: 0 });
    const firstClaim = page.getByTestId('claims').locator('tbody tr').first();
    await expect.poll(() => firstClaim.textContent()).toContain(claimsSent[0]!.text);
    expect(await firstClaim.textContent()).toContain(claimsSent[0]!.evidence!.text);
    expect(await firstClaim.textContent()).toContain('Supported');
    const before = receiver.received.length;
    await page.getByRole('button', { name: /^Redeliver the delivery of/ }).click();
    await page.getByRole('status').filter({ hasText: 'Redelivery queued' }).waitFor();
    const [again] = (await receiver.waitFor((list) => list.length > before)).slice(before);
    expect(again!.raw.equals(sent.raw)).toBe(true);
    expect(again!.headers['x-svc-delivery']).toBe(sent.headers['x-svc-delivery']);
    await page.getByRole('button', { name: 'Refresh' }).last().click();
    await expect.poll(afterNextRefresh(page, () => page.locator('.attempts-table tbody tr').count()), { timeout: 30_000 }).toBe(2);
    expect(await row.locator('td').nth(3).textContent()).toBe('Delivered');
    expect(await row.locator('td').nth(5).textContent()).toBe('2');
    await shot(page, '06-deliveries');

    // Status filter.
    await page.getByLabel('Status').selectOption('failed');
    await page.getByText('No deliveries with this status.').waitFor();
    await page.getByLabel('Status').selectOption('delivered');
    await row.waitFor();

    // Usage: requests and tokens per day as inline SVG charts, per key and in total.
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
    await expect
      .poll(async () => {
        await page.reload();
        await page.getByRole('img', { name: /Requests per day/ }).waitFor();
        return page.locator('.total-row').textContent();
      }, { timeout: 30_000 })
      .toMatch(/^Total2/);
    expect(await page.locator('svg.chart rect.bar').count()).toBe(60);
    const keyOption = await page.locator('select[name=key] option', { hasText: 'production' }).getAttribute('value');
    await page.getByLabel('Key', { exact: true }).selectOption(keyOption ?? '');
    await page.getByRole('img', { name: 'Requests per day, key “production”' }).waitFor();
    await shot(page, '07-usage');

    // Revoke with confirmation → the key gets 401.
    await page.getByRole('link', { name: 'API Keys' }).click();
    const keyRow = page.locator('tr', { hasText: 'production' });
    await keyRow.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').waitFor();
    await shot(page, '08-revoke-confirm');
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await keyRow.getByText('Revoked').waitFor();
    expect((await chat(server, token)).status).toBe(401);
    await shot(page, '09-api-keys-revoked');

    // Narrow screens get a readable layout too.
    await page.setViewportSize({ width: 390, height: 844 });
    await shot(page, '10-api-keys-mobile');

    expect(cspErrors.filter((e) => /Content Security Policy/i.test(e))).toEqual([]);
    await page.close();
  });

  it('deliveries tell the truth: Retrying with the next attempt, the request status, the receiver answer; links, filters in the URL, bulk redeliver', async () => {
    const retrying = await startTestServer({ env: { SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,1h' } });
    const failing = await startReceiver({ status: 503, body: 'down for maintenance' });
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    try {
      const user = await createUser(retrying, 'retrying@example.test');
      const { token, key } = await retrying.createKey({ userId: user.id, webhookUrl: failing.url, name: 'flaky receiver' });
      const response = await chat(retrying, token);
      expect(response.status).toBe(200);
      const { id: requestId } = (await response.json()) as { id: string };
      // Two attempts failed, a third is due in an hour.
      await failing.waitFor((list) => list.length >= 2);
      await expect.poll(async () => (await retrying.running.store.deliveries.list(key.id, { limit: 1 })).rows[0]?.attempts, { timeout: 30_000 }).toBe(2);

      await signIn(page, retrying.url, user.email);
      const lastDelivery = page.getByTestId('last-delivery');
      await expect.poll(() => lastDelivery.textContent()).toMatch(/^Retrying \(1 delivery, next (\w+ \d+, )?\d\d:\d\d/);
      expect(await lastDelivery.textContent()).toContain('HTTP 503');
      expect(await page.getByTestId('failing-endpoint').count()).toBe(0);
      // Failing for days: marked as such (nothing is discarded).
      const threeDaysAgo = Date.now() - 3 * 24 * 3_600_000 - 60_000;
      await retrying.running.store.handle.db.updateTable('api_keys').set({ last_delivery_failing_since: threeDaysAgo }).where('id', '=', key.id).execute();
      await page.reload();
      await expect.poll(() => page.getByTestId('failing-endpoint').textContent()).toBe('Failing for 3 days');

      // The key's settings give the svc-cli listen line for its (loopback) webhook URL, ready to copy.
      await page.goto(`${retrying.url}/dashboard/settings/api-keys/${key.id}`);
      const hook = new URL(failing.url);
      const expectedListen = `svc-cli listen --port ${hook.port}${hook.pathname === '/' ? '' : ` --path ${hook.pathname}`}`;
      await expect.poll(() => page.getByTestId('listen-command').textContent()).toBe(expectedListen);
      expect(await page.getByTestId('failing-endpoint').textContent()).toBe('Failing for 3 days');

      // The filter is in the URL: opening it shows the filtered list.
      await page.goto(`${retrying.url}/dashboard/settings/api-keys/${key.id}/deliveries?status=pending`);
      const row = page.locator('tr.clickable', { hasText: requestId });
      await row.waitFor();
      expect(await page.getByLabel('Status').inputValue()).toBe('pending');
      expect(await row.locator('td').nth(2).textContent()).toBe('200');
      expect(await row.locator('td').nth(3).textContent()).toMatch(/^Retrying \(attempt 3, next (\w+ \d+, )?\d\d:\d\d [A-Z]/);
      expect(await row.locator('td').nth(4).textContent()).toBe('503');

      // The details: receiver's answer, pretty payload, a link that opens them again.
      await row.click();
      await expect.poll(() => page.url()).toMatch(/[?&]delivery=whd_[0-9a-f]{32}/);
      await expect.poll(() => page.getByTestId('receiver-answer').first().textContent()).toBe('down for maintenance');
      // Beside the Code column (503) the attempts say what the receiver answered, not "HTTP 503" again.
      expect(await page.locator('td[data-label="Code"]').first().textContent()).toBe('503');
      expect(await page.locator('td[data-label="Error / response"]').first().textContent()).toBe('down for maintenance');
      expect(await page.getByTestId('payload-pretty').textContent()).toContain('"status_code": 200');
      const headers = await page.getByTestId('sent-headers').textContent();
      expect(headers).toContain('content-type: application/json');
      expect(headers).toMatch(/x-svc-delivery: whd_[0-9a-f]{32}/);
      const link = await page.getByTestId('delivery-link').getAttribute('href');
      expect(link).toMatch(/\/deliveries\?delivery=whd_/);
      await shot(page, '14-delivery-retrying');
      await page.reload();
      await page.getByTestId('receiver-answer').first().waitFor();

      // Bulk redeliver: a count, a confirmation, then every matching delivery is sent again.
      failing.fallback = { status: 200 };
      const before = failing.received.length;
      await page.getByRole('button', { name: 'Redeliver all pending…' }).click();
      const dialog = page.getByRole('dialog');
      await expect.poll(() => dialog.getByRole('heading').textContent()).toBe('Redeliver 1 pending delivery?');
      await dialog.getByRole('button', { name: 'Redeliver 1 pending delivery' }).click();
      await page.getByRole('status').filter({ hasText: 'Redelivery of 1 pending delivery queued.' }).waitFor();
      await failing.waitFor((list) => list.length > before);
      await page.getByLabel('Status').selectOption('');
      await expect.poll(() => page.url()).not.toContain('status=');
      await expect.poll(() => row.locator('td').nth(3).textContent(), { timeout: 30_000 }).toBe('Delivered');
    } finally {
      await page.close();
      await retrying.close();
      await failing.close();
    }
  });

  it("Last delivery follows deliveries without a click, and a test send is marked as one beside the real ones still retrying", async () => {
    const retrying = await startTestServer({ env: { SVC_WEBHOOK_RETRY_SCHEDULE: '200ms,1h' } });
    const flaky = await startReceiver({ status: 503, body: 'down' });
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.clock.install();
    try {
      const user = await createUser(retrying, 'last-delivery@example.test');
      const { token, key } = await retrying.createKey({ userId: user.id, webhookUrl: flaky.url, name: 'flaky' });
      await signIn(page, retrying.url, user.email);
      const lastDelivery = page.getByTestId('last-delivery');
      expect(await lastDelivery.count()).toBe(0);

      // The list follows a delivery that fails after it was opened: no reload.
      expect((await chat(retrying, token)).status).toBe(200);
      // All its texts (none until the delivery is there): textContent would wait for the element, refresh or not.
      await expect
        .poll(afterNextRefresh(page, () => lastDelivery.allTextContents()), { timeout: 30_000 })
        .toEqual([expect.stringMatching(/^Retrying \(1 delivery, next (\w+ \d+, )?\d\d:\d\d/)]);

      // Its second attempt (200 ms after the first) failed too: the next is an hour away, after the receiver is fixed.
      await expect.poll(async () => (await retrying.running.store.deliveries.list(key.id, { limit: 1 })).rows[0]?.attempts, { timeout: 30_000 }).toBe(2);

      // The receiver is fixed; a test send gets through. The real delivery is still retrying, and says so.
      // The key's page asks for its own key only (GET /keys/{id}), not for the whole list.
      flaky.fallback = { status: 200 };
      const keyReads: string[] = [];
      page.on('request', (request) => {
        const path = new URL(request.url()).pathname;
        if (request.method() === 'GET' && path.startsWith('/dashboard/api/keys')) keyReads.push(path);
      });
      await page.goto(`${retrying.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByRole('button', { name: 'Send test' }).click();
      await expect.poll(() => page.getByTestId('test-result').textContent()).toContain('Test delivered');
      await expect.poll(afterNextRefresh(page, () => lastDelivery.textContent())).toMatch(/^SucceededTest sendRetrying \(1 delivery, next (\w+ \d+, )?\d\d:\d\d/);
      await shot(page, '15-test-send-beside-retrying');

      // A real delivery getting through replaces the test send there, without a reload; the other still retries.
      expect((await chat(retrying, token)).status).toBe(200);
      await expect.poll(afterNextRefresh(page, () => lastDelivery.textContent()), { timeout: 30_000 }).toMatch(/^SucceededRetrying \(1 delivery/);
      expect(await page.getByTestId('retrying').count()).toBe(1);
      expect(keyReads.length).toBeGreaterThanOrEqual(2);
      expect(new Set(keyReads)).toEqual(new Set([`/dashboard/api/keys/${key.id}`]));
    } finally {
      await page.close();
      await retrying.close();
      await flaky.close();
    }
  });

  it('asks before rotating the signing secret and says until when the old one still signs', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    try {
      const user = await createUser(server, 'rotate@example.test');
      await signIn(page, server.url, user.email);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByLabel('Key name').fill('rotating');
      await page.getByRole('button', { name: 'Create key' }).click();
      await copyThenDone(page);
      await page.getByRole('link', { name: 'rotating', exact: true }).click();
      await page.getByRole('button', { name: 'Generate' }).click();
      const oldSecret = (await page.getByTestId('shown-once-value').textContent()) ?? '';
      await copyThenDone(page);

      // Rotate asks first; Cancel changes nothing.
      await page.getByRole('button', { name: 'Rotate' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.waitFor();
      expect(await dialog.textContent()).toMatch(new RegExp(`ending in …${oldSecret.slice(-4).replace(/[+/]/g, '\\$&')} keeps signing beside the new one for 1 day, until .+`));
      await shot(page, '12-rotate-confirm');
      await page.getByRole('button', { name: 'Cancel' }).click();
      await expect.poll(() => dialog.count()).toBe(0);
      expect(await page.getByTestId('previous-secret-state').count()).toBe(0);

      const before = Date.now();
      await page.getByRole('button', { name: 'Rotate' }).click();
      await page.getByRole('button', { name: 'Rotate secret' }).click();
      const newSecret = (await page.getByTestId('shown-once-value').textContent()) ?? '';
      expect(newSecret).toMatch(/^whsec_/);
      expect(newSecret).not.toBe(oldSecret);
      const previous = page.getByTestId('previous-secret-state');
      await expect.poll(() => previous.textContent()).toContain(`ending in …${oldSecret.slice(-4)}, still signs until`);
      const until = Date.parse((await previous.locator('time').getAttribute('datetime')) ?? '');
      expect(until - before).toBeGreaterThanOrEqual(86_400_000 - 1000);
      expect(until - before).toBeLessThan(86_400_000 + 60_000);
      await copyThenDone(page);
      await shot(page, '13-rotated-overlap');

      // The key's own overlap: the next rotation's confirmation says so.
      await page.getByLabel('Secret overlap after Rotate (hours)').fill('2');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      await page.getByRole('button', { name: 'Rotate' }).click();
      await expect.poll(() => page.getByRole('dialog').textContent()).toContain('keeps signing beside the new one for 2 hours');
      await page.getByRole('button', { name: 'Cancel' }).click();
      const stored = (await server.running.store.keys.list(user.id))[0];
      expect(stored?.signing_secret_overlap_seconds).toBe(7200);
    } finally {
      await page.close();
    }
  });

  it('a new delivery appears in an open Deliveries list without Refresh, with nothing pending, and again after Load older and Refresh', async () => {
    const quiet = await startTestServer();
    const receiver = await startReceiver();
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.clock.install();
    try {
      const user = await createUser(quiet, 'quiet@example.test');
      const { token, key } = await quiet.createKey({ userId: user.id, webhookUrl: receiver.url, name: 'quiet' });
      const first = (await (await chat(quiet, token)).json()) as { id: string };
      await expect.poll(async () => (await quiet.running.store.deliveries.list(key.id, { limit: 1 })).rows[0]?.status, { timeout: 30_000 }).toBe('delivered');
      await signIn(page, quiet.url, user.email);
      await page.goto(`${quiet.url}/dashboard/settings/api-keys/${key.id}/deliveries`);
      await page.locator('tr.clickable', { hasText: first.id }).waitFor();
      // Nothing pending: before, the list loaded again only on Refresh.
      const second = (await (await chat(quiet, token)).json()) as { id: string };
      await expect.poll(afterNextRefresh(page, () => page.locator('tr.clickable', { hasText: second.id }).count()), { timeout: 30_000 }).toBe(1);

      // Older pages loaded: the list holds still (rows do not move under the reader) until Refresh, after which it
      // follows new deliveries again (before, it stayed still until the page was left).
      for (let i = 0; i < 20; i++) {
        await quiet.running.store.deliveries.insert({
          id: newDeliveryId(),
          keyId: key.id,
          userId: user.id,
          event: 'llm.request.completed',
          requestId: `chatcmpl-old-${i}`,
          url: 'http://127.0.0.1:9/',
          payload: '{}',
          now: Date.now() - 3_600_000 - i,
          nextAttemptAt: Date.now() + 3_600_000,
        });
      }
      await page.getByRole('button', { name: 'Refresh', exact: true }).click();
      // A slow server: the older page is held back until the button has been looked at.
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      let olderAsked = 0;
      await page.route(/\/deliveries\?.*before=/, async (route) => {
        olderAsked++;
        await held;
        await route.continue();
      });
      await page.getByRole('button', { name: 'Load older deliveries' }).click();
      const loading = page.getByRole('button', { name: 'Loading older deliveries…' });
      await loading.waitFor();
      expect(await loading.isDisabled()).toBe(true);
      release();
      await expect.poll(() => page.locator('tr.clickable').count()).toBe(22);
      expect(olderAsked).toBe(1);
      await page.unroute(/\/deliveries\?.*before=/);
      await page.getByRole('button', { name: 'Refresh', exact: true }).click();
      await expect.poll(() => page.locator('tr.clickable').count()).toBe(20);
      const third = (await (await chat(quiet, token)).json()) as { id: string };
      await expect.poll(afterNextRefresh(page, () => page.locator('tr.clickable', { hasText: third.id }).count()), { timeout: 30_000 }).toBe(1);
    } finally {
      await page.close();
      await receiver.close();
      await quiet.close();
    }
  });

  it("another account's key: its Deliveries page says the key is not there, as its settings page does", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    try {
      const { key: theirs } = await server.createKey({ name: 'not yours' });
      const user = await createUser(server, 'not-yours@example.test');
      await signIn(page, server.url, user.email);
      for (const path of [`${theirs.id}/deliveries`, theirs.id]) {
        await page.goto(`${server.url}/dashboard/settings/api-keys/${path}`);
        await expect.poll(() => page.getByTestId('key-not-found').textContent()).toContain('This key does not exist or belongs to another account.');
        expect(await page.getByRole('button', { name: 'Try again' }).count()).toBe(0);
        expect(await page.getByRole('button', { name: /Redeliver all/ }).count()).toBe(0);
      }
      await page.getByRole('link', { name: 'Back to API Keys' }).click();
      await page.getByRole('heading', { name: 'API Keys' }).waitFor();
    } finally {
      await page.close();
    }
  });

  it('keyboard focus lands on a control after Done and after a dialog, never on nothing', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    const focused = () => page.evaluate(() => (document.activeElement === document.body ? 'body' : document.activeElement?.textContent ?? null));
    try {
      const user = await createUser(server, 'focus@example.test');
      await signIn(page, server.url, user.email);
      await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
      // A key shown once: Done gives focus back to Create key.
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByLabel('Key name').fill('focus');
      await page.keyboard.press('Enter');
      await expect.poll(focused).toBe('Copy');
      // Copied first (Enter on Copy, where focus is): Done would otherwise ask before the value goes.
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Copied' }).waitFor();
      await page.getByRole('button', { name: 'Done' }).press('Enter');
      expect(await focused()).toBe('Create key');

      // A signing secret shown once: Done gives focus to Rotate.
      await page.getByRole('link', { name: 'focus', exact: true }).click();
      await page.getByRole('button', { name: 'Generate' }).press('Enter');
      await expect.poll(focused).toBe('Copy');
      // Copied first (Enter on Copy, where focus is): Done would otherwise ask before the value goes.
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Copied' }).waitFor();
      await page.getByRole('button', { name: 'Done' }).press('Enter');
      expect(await focused()).toBe('Rotate');

      // Redeliver all… is disabled while it counts, so focus had left it: Escape and the confirmation give it back.
      const key = (await server.running.store.keys.list(user.id))[0]!;
      await page.getByLabel('Webhook URL').fill(receiver.url);
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      await page.getByRole('button', { name: 'Send test' }).click();
      await page.getByTestId('test-result').waitFor();
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}/deliveries`);
      await page.locator('tr.clickable').first().waitFor();
      const bulk = page.getByRole('button', { name: 'Redeliver all…' });
      await bulk.press('Enter');
      await page.getByRole('dialog').waitFor();
      expect(await focused()).toBe('Cancel');
      await page.keyboard.press('Escape');
      await expect.poll(() => page.getByRole('dialog').count()).toBe(0);
      expect(await focused()).toBe('Redeliver all…');
      await bulk.press('Enter');
      await page.getByRole('dialog').getByRole('button', { name: 'Redeliver 1 delivery' }).click();
      await page.getByRole('status').filter({ hasText: 'Redelivery of 1 delivery queued.' }).waitFor();
      expect(await focused()).toBe('Redeliver all…');
    } finally {
      await page.close();
    }
  });

  it("a test's outcome goes once another Webhook URL is saved: it was about the old one; a refused one shows the receiver's answer", async () => {
    const why = '{"error":"no webhook-signature header: set the signing secret"}';
    const other = await startReceiver({ status: 401, body: why });
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    try {
      const user = await createUser(server, 'stale-test@example.test');
      const { key } = await server.createKey({ userId: user.id, webhookUrl: receiver.url, name: 'stale test' });
      await signIn(page, server.url, user.email);
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByRole('button', { name: 'Send test' }).click();
      await expect.poll(() => page.getByTestId('test-result').textContent()).toContain(`Test delivered to ${receiver.url}`);
      expect(await page.getByTestId('test-receiver-answer').count()).toBe(0);
      // Saving the same URL (another field changed) keeps it.
      await page.getByLabel('Rate limit (requests/min)').fill('60');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      expect(await page.getByTestId('test-result').count()).toBe(1);
      await page.getByLabel('Webhook URL').fill(other.url);
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      expect(await page.getByTestId('test-result').count()).toBe(0);
      // A refusal says why only in the receiver's own answer: it is shown under the outcome.
      await page.getByRole('button', { name: 'Send test' }).click();
      await expect.poll(() => page.getByTestId('test-result').textContent()).toContain('Test failed with HTTP 401');
      expect(await page.getByTestId('test-receiver-answer').textContent()).toBe(why);
    } finally {
      await page.close();
      await other.close();
    }
  });

  it('an open key settings page shows the key revoked elsewhere without a reload, instead of a form whose Save fails', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.clock.install();
    try {
      const user = await createUser(server, 'revoked-elsewhere@example.test');
      const { key } = await server.createKey({ userId: user.id, name: 'revoked elsewhere' });
      await signIn(page, server.url, user.email);
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByLabel('Webhook URL').waitFor();
      // Revoked from another tab.
      const other = await browser.newPage();
      await signIn(other, server.url, user.email);
      await other.locator('tr', { hasText: 'revoked elsewhere' }).getByRole('button', { name: 'Revoke' }).click();
      await other.getByRole('button', { name: 'Revoke key' }).click();
      await other.getByTestId('revoked-notice').waitFor();
      await other.close();
      const revoked = page.getByText(/^This key was revoked on .+; its settings can no longer be changed\.$/);
      await expect.poll(afterNextRefresh(page, () => revoked.count()), { timeout: 30_000 }).toBe(1);
      expect(await page.getByLabel('Webhook URL').count()).toBe(0);
    } finally {
      await page.close();
    }
  });

  it('two tabs on one key: a Save in one keeps what the other saved in a field it left alone; each shows what the other changes', async () => {
    const user = await createUser(server, 'two-tabs@example.test');
    const { key } = await server.createKey({ userId: user.id, name: 'two tabs', webhookUrl: 'http://127.0.0.1:9/first' });
    const [a, b] = [await browser.newPage(), await browser.newPage()];
    await a.clock.install();
    try {
      for (const page of [a, b]) {
        await signIn(page, server.url, user.email);
        await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
        await page.getByLabel('Webhook URL').waitFor();
      }
      await b.getByLabel('Webhook URL').fill('http://127.0.0.1:9/second');
      await b.getByRole('button', { name: 'Save' }).click();
      await b.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      // Tab A, loaded before, changes only the rate limit.
      await a.getByLabel('Rate limit (requests/min)').fill('42');
      await a.getByRole('button', { name: 'Save' }).click();
      await a.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      const saved = await server.running.store.keys.byId(key.id);
      expect(saved?.webhook_url).toBe('http://127.0.0.1:9/second');
      expect(saved?.rate_limit_rpm).toBe(42);
      // Tab A now shows the key as saved, with nothing left to save.
      expect(await a.getByLabel('Webhook URL').inputValue()).toBe('http://127.0.0.1:9/second');
      expect(await a.getByTestId('send-test-reason').count()).toBe(0);

      // What tab B changes next shows in tab A without a reload: the new signing secret's last 4 characters (A's
      // Rotate would otherwise name the wrong secret), and the webhook URL in a field A has not edited; a field A
      // is editing keeps what is typed.
      await a.getByLabel('Rate limit (requests/min)').fill('43');
      await b.getByRole('button', { name: 'Generate' }).click();
      const secret = (await b.getByTestId('shown-once-value').textContent()) ?? '';
      await b.getByLabel('Webhook URL').fill('http://127.0.0.1:9/third');
      await b.getByRole('button', { name: 'Save' }).click();
      await b.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      await expect.poll(afterNextRefresh(a, () => a.getByTestId('signing-secret-state').textContent()), { timeout: 30_000 }).toContain(secret.slice(-4));
      await expect.poll(afterNextRefresh(a, () => a.getByLabel('Webhook URL').inputValue()), { timeout: 30_000 }).toBe('http://127.0.0.1:9/third');
      expect(await a.getByLabel('Rate limit (requests/min)').inputValue()).toBe('43');
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a confirmation stays open while its action runs, a click beside it included, so its error is shown', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    try {
      const user = await createUser(server, 'busy-dialog@example.test');
      const { key } = await server.createKey({ userId: user.id, name: 'busy dialog' });
      await signIn(page, server.url, user.email);
      // The revoke is held, then answered with an error.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      await page.route('**/dashboard/api/keys/*/revoke', async (route) => {
        await held;
        await route.fulfill({ status: 500, contentType: 'application/json', body: JSON.stringify({ error: { message: 'The database is unavailable.', type: 'server_error', code: 'internal_error', param: null } }) });
      });
      await page.locator(`tr[data-key-id="${key.id}"]`).getByRole('button', { name: 'Revoke' }).click();
      await page.getByRole('button', { name: 'Revoke key' }).click();
      await page.getByRole('button', { name: 'Working…' }).waitFor();
      await page.mouse.click(5, 5);
      expect(await page.getByRole('dialog').count()).toBe(1);
      release();
      await expect.poll(() => page.getByRole('dialog').getByRole('alert').textContent()).toBe('The database is unavailable.');
      // Once it is done, a click beside it cancels as before.
      await page.mouse.click(5, 5);
      await expect.poll(() => page.getByRole('dialog').count()).toBe(0);
    } finally {
      await page.close();
    }
  });

  it('an open delivery follows its redelivery to a slow receiver until it is delivered, without Refresh', async () => {
    const user = await createUser(server, 'slow-redelivery@example.test');
    const { token, key } = await server.createKey({ userId: user.id, name: 'slow receiver', webhookUrl: receiver.url });
    const response = await chat(server, token);
    const { id: requestId } = (await response.json()) as { id: string };
    await receiver.waitFor((list) => list.some((d) => d.raw.toString('utf8').includes(requestId)));
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.clock.install();
    try {
      await signIn(page, server.url, user.email);
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}/deliveries`);
      const row = page.locator('tr.clickable', { hasText: requestId });
      // All its texts (none until the row is there): textContent would wait for the row, refresh or not.
      await expect.poll(afterNextRefresh(page, () => row.locator('td').nth(3).allTextContents()), { timeout: 30_000 }).toEqual(['Delivered']);
      await row.getByRole('button', { name: 'Details' }).click();
      const attempts = page.locator('.attempts-table tbody tr');
      await expect.poll(() => attempts.count()).toBe(1);

      // The receiver holds its answer to the redelivery past the details' first look after Redeliver.
      let answer!: () => void;
      receiver.queue.push({ until: new Promise<void>((resolve) => (answer = resolve)) });
      const before = receiver.received.length;
      await page.getByRole('button', { name: /^Redeliver the delivery of/ }).click();
      await page.getByRole('status').filter({ hasText: 'Redelivery queued' }).waitFor();
      await receiver.waitFor((list) => list.length > before);
      // The details' look after Redeliver, made while the receiver still holds its answer.
      await page.waitForResponse((r) => r.request().method() === 'GET' && /\/deliveries\/whd_[0-9a-f]{32}\/progress$/.test(new URL(r.url()).pathname));
      expect(await attempts.count()).toBe(1);
      answer();
      // Then the details follow it to Delivered, with its second attempt, as the list does.
      await expect.poll(afterNextRefresh(page, () => attempts.count()), { timeout: 30_000 }).toBe(2);
      expect(await page.locator('.delivery-detail .facts').textContent()).toContain('Delivered');
    } finally {
      await page.close();
    }
  });

  it('explains a blocked private webhook address next to the field', async () => {
    const strict = await startTestServer({ env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'false' } });
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    try {
      const user = await createUser(strict, 'strict@example.test');
      await signIn(page, strict.url, user.email);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByLabel('Key name').fill('locked down');
      await page.getByRole('button', { name: 'Create key' }).click();
      await copyThenDone(page);
      await page.getByRole('link', { name: 'locked down', exact: true }).click();
      await page.getByLabel('Webhook URL').fill('http://10.1.2.3/hook');
      await page.getByRole('button', { name: 'Save' }).click();
      await expect.poll(() => page.getByTestId('webhook_url-error').textContent()).toMatch(/10\.1\.2\.3, a private address/);
      await page.getByLabel('Webhook URL').fill('http://169.254.169.254/latest/meta-data');
      await page.getByRole('button', { name: 'Save' }).click();
      await expect.poll(() => page.getByTestId('webhook_url-error').textContent()).toMatch(/link-local/);
      await shot(page, '11-private-address-blocked');
      const key = (await strict.running.store.keys.list(user.id))[0];
      expect(key?.webhook_url).toBeNull();
    } finally {
      await page.close();
      await strict.close();
    }
  });
});
