/// <reference lib="dom" />
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './support/chromium.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { findDashboardDist } from '../src/dashboard/static-files.js';
import { sessionCookie } from './support/dashboard-client.js';

// A receiver engineer looking for one delivery among thousands: by its id (webhook-id), by the request id their
// logs hold, by the last attempt's HTTP code and by time, in a view whose URL can be reloaded and shared.
const SKIP = skipWithoutChromium('dashboard-delivery-search');
const COUNT = 3000;
const MINUTE = 60_000;

interface Seeded {
  id: string;
  requestId: string;
  createdAt: number;
  status: 'delivered' | 'failed';
  code: number;
}

/** `COUNT` finished deliveries of one key, a minute apart, ending an hour ago: every 7th failed with 503, every 5th other with 500. */
function seed(server: TestServer, keyId: string, userId: string): Seeded[] {
  const db = server.running.store.handle.sqlite!;
  const end = Date.now() - 60 * MINUTE;
  const rows: Seeded[] = [];
  const insert = db.prepare(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at,
    last_status_code, last_error, created_at, updated_at, delivered_at) values (?, ?, ?, 'llm.request.completed', ?, 'https://example.com/hooks', ?, ?, 1, null, ?, ?, ?, ?, ?)`);
  db.transaction(() => {
    for (let i = 0; i < COUNT; i++) {
      const createdAt = end - (COUNT - 1 - i) * MINUTE;
      const id = `whd_${createdAt.toString(16).padStart(12, '0')}${i.toString(16).padStart(20, '0')}`;
      const requestId = `chatcmpl-seed${String(i).padStart(5, '0')}`;
      const code = i % 7 === 0 ? 503 : i % 5 === 0 ? 500 : 200;
      const status = code === 200 ? 'delivered' : 'failed';
      const payload = JSON.stringify({ event: 'llm.request.completed', request_id: requestId, status_code: 200 });
      insert.run(id, keyId, userId, requestId, payload, status, code, code === 200 ? null : `HTTP ${code}`, createdAt, createdAt, code === 200 ? createdAt : null);
      rows.push({ id, requestId, createdAt, status, code });
    }
  })();
  return rows;
}

describe.skipIf(SKIP)('delivery search in Chromium', () => {
  let browser: Browser;
  let server: TestServer;
  let rows: Seeded[];
  let keyId: string;
  let email: string;

  beforeAll(async () => {
    if (!findDashboardDist()) throw new Error('apps/dashboard/dist is missing: run npm run build first');
    browser = await launchChromium();
    server = await startTestServer();
    const { key, user } = await server.createKey({ name: 'busy', webhookUrl: 'https://example.com/hooks' });
    keyId = key.id;
    email = user.email;
    rows = seed(server, key.id, user.id);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  /** Request ids of the list's rows. */
  const listed = (page: Page) => page.locator('tr.clickable code.truncate').allTextContents();
  const codes = (page: Page) => page.locator('tr.clickable td[data-label="Code"]').allTextContents();

  it('finds a delivery by request id, delivery id, HTTP code and time (in the viewer\'s zone); the URL keeps the search', { timeout: 120_000 }, async () => {
    // A viewer in New York: the time fields are in their zone, the API gets UTC.
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: 'America/New_York', locale: 'en-US' });
    await context.addCookies([await sessionCookie(server.url, email)]);
    const page = await context.newPage();
    try {
      await page.goto(`${server.url}/dashboard/settings/api-keys/${keyId}/deliveries`);
      await page.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
      await expect.poll(() => listed(page)).toHaveLength(20);
      const search = page.getByRole('search', { name: 'Search deliveries' });

      // By the request id (x-request-id) an engineer has in their logs, far beyond the first page.
      const wanted = rows[1234]!;
      await search.getByLabel('Delivery or request id').fill(wanted.requestId);
      await search.getByLabel('Delivery or request id').press('Enter');
      await expect.poll(() => listed(page)).toEqual([wanted.requestId]);
      expect(new URL(page.url()).searchParams.get('request_id')).toBe(wanted.requestId);
      // Reloaded (or shared), the view is the same.
      await page.reload();
      await expect.poll(() => listed(page)).toEqual([wanted.requestId]);
      expect(await search.getByLabel('Delivery or request id').inputValue()).toBe(wanted.requestId);
      // The time shows in the viewer's zone; on hover, whole and in UTC.
      const time = page.locator('tr.clickable time');
      expect(await time.getAttribute('datetime')).toBe(new Date(wanted.createdAt).toISOString());
      expect(await time.getAttribute('title')).toContain(new Date(wanted.createdAt).toISOString());
      expect(await time.textContent()).toMatch(/\b(EST|EDT)$/);
      // Redeliver all takes the request searched for: it would send what the list shows, no more.
      await page.getByRole('button', { name: /^Redeliver all/ }).click();
      await expect.poll(() => page.getByRole('dialog').getByRole('heading').textContent()).toBe(`Redeliver 1 delivery of request ${wanted.requestId}?`);
      await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();

      // By delivery id (the receiver's webhook-id): that delivery's details.
      const old = rows[17]!;
      await search.getByLabel('Delivery or request id').fill(old.id);
      await search.getByRole('button', { name: 'Search' }).click();
      await expect.poll(() => new URL(page.url()).searchParams.get('delivery')).toBe(old.id);
      await expect.poll(() => page.locator('code.id').first().textContent()).toBe(old.id);
      expect(new URL(page.url()).searchParams.get('request_id')).toBeNull();

      // Clear filters: the whole list again.
      await page.getByRole('button', { name: 'Clear filters' }).click();
      await expect.poll(() => listed(page)).toHaveLength(20);
      expect(new URL(page.url()).search).toBe('');
      expect(await search.getByLabel('Delivery or request id').inputValue()).toBe('');
      // A delivery opened from the list is in the URL, but it is no search: the field stays empty.
      await page.locator('tr.clickable').first().getByRole('button', { name: 'Details' }).click();
      await expect.poll(() => new URL(page.url()).searchParams.get('delivery')).toBe(rows.at(-1)!.id);
      expect(await search.getByLabel('Delivery or request id').inputValue()).toBe('');
      expect(await page.getByRole('button', { name: 'Clear filters' }).count()).toBe(0);
      await page.locator('tr.clickable').first().getByRole('button', { name: 'Hide' }).click();

      // By the last attempt's HTTP code (a class, and one code with a status).
      await search.getByLabel('HTTP code').fill('5xx');
      await search.getByLabel('HTTP code').press('Enter');
      await expect.poll(async () => new Set(await codes(page))).toEqual(new Set(['500', '503']));
      await page.getByLabel('Status', { exact: true }).selectOption('failed');
      await search.getByLabel('HTTP code').fill('503');
      await search.getByLabel('HTTP code').press('Enter');
      const failed503 = rows.filter((r) => r.code === 503).reverse();
      await expect.poll(() => listed(page)).toEqual(failed503.slice(0, 20).map((r) => r.requestId));
      expect(new URL(page.url()).searchParams.get('status')).toBe('failed');
      expect(new URL(page.url()).searchParams.get('last_status_code')).toBe('503');
      // Older pages keep the search.
      await page.getByRole('button', { name: 'Load older deliveries' }).click();
      await expect.poll(() => listed(page)).toEqual(failed503.slice(0, 40).map((r) => r.requestId));

      // A code that is no HTTP status is said next to the field; the list stays.
      await search.getByLabel('HTTP code').fill('6xx');
      await search.getByLabel('HTTP code').press('Enter');
      expect(await search.getByLabel('HTTP code').getAttribute('aria-invalid')).toBe('true');
      expect(await search.locator('#delivery-search-code-error').textContent()).toContain('500, or a class such as 5xx');
      expect(new URL(page.url()).searchParams.get('last_status_code')).toBe('503');

      // By time, typed in New York time: 10 deliveries, a minute apart.
      await page.getByRole('button', { name: 'Clear filters' }).click();
      const from = rows[2000]!.createdAt;
      const local = (ms: number) => new Date(ms).toLocaleString('sv-SE', { timeZone: 'America/New_York' }).replace(' ', 'T').slice(0, 16);
      expect(await search.getByText('From (America/New_York)').count()).toBe(1);
      await search.getByLabel(/^From/).fill(local(from));
      await search.getByLabel(/^To/).fill(local(from + 10 * MINUTE));
      await search.getByRole('button', { name: 'Search' }).click();
      // Minutes are whole in the fields: the window is [from's minute, that + 10 min).
      const start = Math.floor(from / MINUTE) * MINUTE;
      const inWindow = rows.filter((r) => r.createdAt >= start && r.createdAt < start + 10 * MINUTE).reverse();
      expect(inWindow).toHaveLength(10);
      await expect.poll(() => listed(page)).toEqual(inWindow.map((r) => r.requestId));
      expect(new URL(page.url()).searchParams.get('since')).toBe(new Date(start).toISOString());
      // A range that ends before it starts is said, not sent.
      await search.getByLabel(/^To/).fill(local(from - 10 * MINUTE));
      await search.getByRole('button', { name: 'Search' }).click();
      expect(await search.locator('#delivery-search-time-error').textContent()).toContain('“From” must be before “To”');

      // Nothing found is said as such.
      await search.getByLabel(/^To/).fill('');
      await search.getByLabel('Delivery or request id').fill('chatcmpl-nothing');
      await search.getByRole('button', { name: 'Search' }).click();
      await page.getByText('No deliveries match this search.').waitFor();
    } finally {
      await context.close();
    }
  });

  it('the key list and a key\'s page give the exact time, in UTC too, on hover of Created and Last used', async () => {
    const { token, key, user } = await server.createKey({ name: 'timed' });
    const used = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } });
    expect(used.status).toBe(200);
    const context = await browser.newContext({ timezoneId: 'Asia/Tokyo', locale: 'en-US' });
    await context.addCookies([await sessionCookie(server.url, user.email)]);
    const page = await context.newPage();
    try {
      await page.goto(`${server.url}/dashboard/`);
      const row = page.locator(`tr[data-key-id="${key.id}"]`);
      const lastUsed = row.locator('td[data-label="Last used"] time');
      await expect.poll(() => lastUsed.textContent()).toBe('Just now');
      const fresh = (await server.running.store.keys.list(user.id)).find((k) => k.id === key.id)!;
      expect(await lastUsed.getAttribute('datetime')).toBe(new Date(Number(fresh.last_used_at)).toISOString());
      // "Nov 30, 2026, 11:31:02 AM GMT+9 (2026-11-30T02:31:02.123Z)"
      expect(await lastUsed.getAttribute('title')).toMatch(/GMT\+9 \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\)$/);
      expect(await row.locator('td[data-label="Created"] time').getAttribute('title')).toContain(new Date(Number(fresh.created_at)).toISOString());
      await row.getByRole('link', { name: 'timed', exact: true }).click();
      await page.getByRole('heading', { name: 'timed', level: 1 }).waitFor();
      expect(await page.locator('.page-head time').last().getAttribute('title')).toContain(new Date(Number(fresh.last_used_at)).toISOString());
    } finally {
      await context.close();
    }
  });

  it('a receiver\'s binary answer shows its control characters as symbols and says it is not text', async () => {
    // An answer of bytes that are not UTF-8, with an escape sequence and a BEL in it.
    const binary = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(500, { 'content-type': 'application/octet-stream' });
        res.end(Buffer.concat([Buffer.from([0xff, 0xfe, 0x00, 0x01]), Buffer.from('\u001b[31mred\u0007 <b>x</b>')]));
      });
    });
    await new Promise<void>((resolve) => binary.listen(0, '127.0.0.1', resolve));
    const { user, key } = await server.createKey({ name: 'binary', webhookUrl: `http://127.0.0.1:${(binary.address() as AddressInfo).port}/hook` });
    const context = await browser.newContext();
    await context.addCookies([await sessionCookie(server.url, user.email)]);
    const page = await context.newPage();
    try {
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByRole('button', { name: 'Send test' }).click();
      const answer = page.getByTestId('test-receiver-answer');
      await answer.waitFor({ timeout: 30_000 });
      expect(await answer.textContent()).toBe('\ufffd\ufffd\ufffd␁␛[31mred␇ <b>x</b>');
      await page.getByTestId('test-receiver-answer-binary').waitFor();
      // The delivery's own attempt log says the same.
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}/deliveries`);
      await page.locator('tr.clickable').first().getByRole('button', { name: 'Details' }).click();
      await expect.poll(() => page.getByTestId('receiver-answer').first().textContent()).toBe('\ufffd\ufffd\ufffd␁␛[31mred␇ <b>x</b>');
      expect(await page.locator('.attempts-table td[data-label="Error / response"]').first().textContent()).toContain('␛[31mred␇');
    } finally {
      await context.close();
      binary.close();
    }
  });

  it('a payload of megabytes opens with its first 64 KB shown; Copy payload takes all of it, Show all shows it', async () => {
    const { user, key } = await server.createKey({ name: 'long prompts', webhookUrl: 'https://example.com/hooks' });
    const payload = JSON.stringify({ event: 'llm.request.completed', request_id: 'chatcmpl-long', status_code: 200, prompt: `user: ${'word '.repeat(600_000)}` });
    const id = `whd_${Date.now().toString(16).padStart(12, '0')}${'f'.repeat(20)}`;
    server.running.store.handle.sqlite!.prepare(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts,
      last_status_code, created_at, updated_at, delivered_at) values (?, ?, ?, 'llm.request.completed', 'chatcmpl-long', 'https://example.com/hooks', ?, 'delivered', 1, 200, ?, ?, ?)`)
      .run(id, key.id, user.id, payload, Date.now(), Date.now(), Date.now());
    const context = await browser.newContext();
    await context.addCookies([await sessionCookie(server.url, user.email)]);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    const page = await context.newPage();
    try {
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}/deliveries?delivery=${id}`);
      const cut = page.getByTestId('payload-cut');
      await cut.waitFor();
      expect(await cut.textContent()).toContain(`This payload is ${payload.length.toLocaleString('en-US')} bytes: its first 64 KB are shown`);
      const pretty = page.getByTestId('payload-pretty');
      expect(await pretty.textContent()).toBe(`${payload.slice(0, 64 * 1024)}…`);
      // The raw copy is not laid out until asked for.
      expect(await page.getByTestId('payload').count()).toBe(0);
      await page.getByRole('button', { name: 'Copy payload' }).click();
      await page.getByRole('button', { name: 'Copied' }).waitFor();
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(payload);
      await cut.getByRole('button', { name: 'Show all' }).click();
      await expect.poll(() => pretty.evaluate((el) => el.textContent?.length)).toBe(JSON.stringify(JSON.parse(payload), null, 2).length);
      expect(await cut.count()).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('a search the server refuses is said in its words (a hand-edited URL)', async () => {
    const context = await browser.newContext();
    await context.addCookies([await sessionCookie(server.url, email)]);
    const page = await context.newPage();
    try {
      await page.goto(`${server.url}/dashboard/settings/api-keys/${keyId}/deliveries?since=yesterday`);
      await expect.poll(() => page.getByRole('alert').first().textContent()).toContain("'since' must be an ISO 8601 time");
    } finally {
      await context.close();
    }
  });
});
