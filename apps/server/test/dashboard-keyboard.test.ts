/// <reference lib="dom" />
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './support/chromium.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { findDashboardDist } from '../src/dashboard/static-files.js';
import { sessionCookie } from './support/dashboard-client.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { newDeliveryId } from '../src/storage/outbox-store.js';

// Settings → API Keys as a screen-reader and keyboard-only user meets it, and as a customer with failing receivers
// uses it: row buttons that say which row they act on, focus that stays on a control, outcomes announced, a bulk
// redelivery of exactly what a search shows, and an open delivery that follows its attempts without re-reading
// its payload.
const SKIP = skipWithoutChromium('dashboard-keyboard');

describe.skipIf(SKIP)('dashboard for keyboard and screen-reader users, in Chromium', () => {
  let browser: Browser;
  let server: TestServer;
  let receiver: Receiver;

  beforeAll(async () => {
    if (!findDashboardDist()) throw new Error('apps/dashboard/dist is missing: run npm run build first');
    browser = await launchChromium();
    server = await startTestServer();
    receiver = await startReceiver();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await receiver?.close();
  });

  async function openSignedIn(email: string, path: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addCookies([await sessionCookie(server.url, email)]);
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard${path}`);
    return page;
  }

  async function chat(token: string): Promise<string> {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'The sky is blue. What colour is the sky?' }] }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id;
  }

  /** Finished deliveries of a key, a minute apart and an hour old, whose last attempt got `codes[i]`. */
  function seedFailed(keyId: string, userId: string, url: string, codes: number[]): Array<{ id: string; code: number }> {
    const db = server.running.store.handle.sqlite!;
    const insert = db.prepare(`insert into webhook_deliveries (id, key_id, user_id, event, request_id, url, payload, status, attempts, next_attempt_at,
      last_status_code, last_error, created_at, updated_at, delivered_at) values (?, ?, ?, 'llm.request.completed', ?, ?, ?, 'failed', 8, null, ?, ?, ?, ?, null)`);
    const start = Date.now() - 3_600_000;
    return codes.map((code, i) => {
      const id = newDeliveryId();
      const requestId = `chatcmpl-seeded${i}`;
      insert.run(id, keyId, userId, requestId, url, JSON.stringify({ event: 'llm.request.completed', request_id: requestId, status_code: 200 }), code, `HTTP ${code}`, start + i * 60_000, start + i * 60_000);
      return { id, code };
    });
  }

  /** What has keyboard focus: its accessible text, or `body` when focus was dropped. */
  const focused = (page: Page) => page.evaluate(() => (document.activeElement === document.body ? 'body' : (document.activeElement?.textContent ?? '')));

  it("row buttons say which key or delivery they act on", async () => {
    const { key: alpha, user } = await server.createKey({ name: 'alpha', webhookUrl: receiver.url });
    const { key: beta } = await server.createKey({ userId: user.id, name: 'beta' });
    const page = await openSignedIn(user.email, '/settings/api-keys');
    try {
      await page.getByRole('heading', { name: 'API Keys' }).waitFor();
      await page.locator(`tr[data-key-id="${alpha.id}"]`).waitFor();
      for (const key of [alpha, beta]) {
        const named = `“${key.name}” (${key.prefix})`;
        expect(await page.getByRole('button', { name: `Revoke ${named}`, exact: true }).count()).toBe(1);
        expect(await page.getByRole('link', { name: `Settings of ${named}`, exact: true }).count()).toBe(1);
        expect(await page.getByRole('link', { name: `Deliveries of ${named}`, exact: true }).count()).toBe(1);
      }
      // The visible label is the start of the name (what a voice-control user says to press it).
      expect(await page.locator(`tr[data-key-id="${alpha.id}"]`).getByRole('button').textContent()).toMatch(/^Revoke/);

      const { token, key: gamma } = await server.createKey({ userId: user.id, name: 'gamma', webhookUrl: receiver.url });
      const first = await chat(token);
      const second = await chat(token);
      await receiver.waitFor((list) => [first, second].every((id) => list.some((d) => d.raw.toString('utf8').includes(id))));
      await page.goto(`${server.url}/dashboard/settings/api-keys/${gamma.id}/deliveries`);
      for (const requestId of [first, second]) {
        await page.getByRole('button', { name: new RegExp(`^Details of the delivery of ${requestId}, `) }).waitFor();
      }
      expect(await page.getByRole('button', { name: /^Details of the delivery of/ }).count()).toBe(2);
      await page.getByRole('button', { name: new RegExp(`^Details of the delivery of ${first}, `) }).click();
      await page.getByRole('button', { name: new RegExp(`^Hide the delivery of ${first}, `) }).waitFor();
      await page.getByRole('button', { name: new RegExp(`^Redeliver the delivery of ${first}, `) }).waitFor();
      await page.getByRole('button', { name: new RegExp(`^Refresh the delivery of ${first}, `) }).waitFor();
      // The page's own Refresh stays the one named Refresh.
      expect(await page.getByRole('button', { name: 'Refresh', exact: true }).count()).toBe(1);
    } finally {
      await page.context().close();
    }
  });

  it('keyboard only: Redeliver, Save and Clear filters leave focus on a control; their outcomes come in live regions already on the page', async () => {
    const { key, user, token } = await server.createKey({ name: 'keyboard', webhookUrl: receiver.url });
    const requestId = await chat(token);
    await receiver.waitFor((list) => list.some((d) => d.raw.toString('utf8').includes(requestId)));
    const page = await openSignedIn(user.email, `/settings/api-keys/${key.id}/deliveries`);
    try {
      await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
      const details = page.getByRole('button', { name: /^Details of the delivery of/ });
      await details.focus();
      await page.keyboard.press('Enter');
      const redeliver = page.getByRole('button', { name: /^Redeliver the delivery of/ });
      await redeliver.waitFor();
      // The region that will say the outcome is there before it: a region added with its text is often not read.
      const detailStatus = page.getByTestId('delivery-action-status');
      expect(await detailStatus.getAttribute('role')).toBe('status');
      const announced = await detailStatus.elementHandle();
      expect(await announced!.textContent()).toBe('');
      await redeliver.focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => announced!.textContent()).toContain('Redelivery queued');
      expect(await focused(page)).toMatch(/^Redeliver/);
      await receiver.waitFor((list) => list.filter((d) => d.raw.toString('utf8').includes(requestId)).length === 2);

      // Copy payload says it copied, in a live region too.
      const copyStatus = page.locator('.subhead-row [role="status"]');
      expect(await copyStatus.count()).toBe(1);
      await page.getByRole('button', { name: 'Copy payload' }).focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => copyStatus.textContent()).toBe('Copied to the clipboard.');

      // A search, then Clear filters, which goes away with the search: focus goes to the search's first field.
      const search = page.getByRole('search', { name: 'Search deliveries' });
      await search.getByLabel('HTTP code').fill('500');
      await search.getByLabel('HTTP code').press('Enter');
      await expect.poll(() => new URL(page.url()).searchParams.get('last_status_code')).toBe('500');
      await page.getByRole('button', { name: 'Clear filters' }).focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => new URL(page.url()).search).toBe('');
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('delivery-search-id');

      // Save from the keyboard: focus stays on Save, and Saved comes in the region that was there before.
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByLabel('Rate limit (requests/min)').fill('120');
      const saveStatus = page.getByTestId('save-status');
      expect(await saveStatus.getAttribute('role')).toBe('status');
      const saved = await saveStatus.elementHandle();
      await page.getByRole('button', { name: 'Save', exact: true }).focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => saved!.textContent()).toBe('Saved');
      expect(await focused(page)).toBe('Save');
      expect((await server.running.store.keys.byId(key.id))?.rate_limit_rpm).toBe(120);
    } finally {
      await page.context().close();
    }
  });

  it('Redeliver all takes the HTTP code searched for: it asks how many, then sends exactly those', async () => {
    const { key, user } = await server.createKey({ name: 'flaky receiver', webhookUrl: receiver.url });
    const seeded = seedFailed(key.id, user.id, receiver.url, [500, 503, 500, 404, 503, 500, 503]);
    const got500 = seeded.filter((d) => d.code === 500).map((d) => d.id);
    const page = await openSignedIn(user.email, `/settings/api-keys/${key.id}/deliveries`);
    try {
      const search = page.getByRole('search', { name: 'Search deliveries' });
      await search.getByLabel('HTTP code').fill('500');
      await search.getByRole('button', { name: 'Search' }).click();
      await expect.poll(() => page.locator('tr.clickable').count()).toBe(got500.length);
      await page.getByRole('combobox', { name: 'Status' }).selectOption('failed');
      await expect.poll(() => new URL(page.url()).searchParams.get('status')).toBe('failed');

      const before = receiver.received.length;
      await page.getByRole('button', { name: /^Redeliver all failed…/ }).click();
      const dialog = page.getByRole('dialog');
      await expect.poll(() => dialog.getByRole('heading').textContent()).toBe('Redeliver 3 failed deliveries whose last attempt got HTTP 500?');
      await dialog.getByRole('button', { name: 'Redeliver 3 failed deliveries' }).click();
      await expect.poll(() => page.getByTestId('bulk-redeliver-status').textContent()).toBe('Redelivery of 3 failed deliveries whose last attempt got HTTP 500 queued.');
      const resent = (await receiver.waitFor((list) => list.length >= before + got500.length)).slice(before);
      expect(resent.map((r) => r.headers['x-svc-delivery']).sort()).toEqual([...got500].sort());
      for (const d of seeded.filter((s) => s.code !== 500)) expect((await server.running.store.deliveries.byId(d.id))?.status).toBe('failed');
    } finally {
      await page.context().close();
    }
  });

  it('an open pending delivery follows its attempts without reading its payload again', async () => {
    // A receiver of its own (no other test's late redelivery takes its hold), holding its answer: the delivery stays
    // pending, its attempt in flight.
    let answer!: () => void;
    const slow = await startReceiver({ until: new Promise<void>((resolve) => (answer = resolve)) });
    const { key, user, token } = await server.createKey({ name: 'slow receiver', webhookUrl: slow.url });
    const requestId = await chat(token);
    await slow.waitFor((list) => list.length > 0);
    const page = await openSignedIn(user.email, `/settings/api-keys/${key.id}/deliveries`);
    try {
      const reads = { whole: 0, progress: 0 };
      page.on('request', (request) => {
        const path = new URL(request.url()).pathname;
        if (request.method() !== 'GET' || !path.includes(`/keys/${key.id}/deliveries/whd_`)) return;
        if (path.endsWith('/progress')) reads.progress++;
        else reads.whole++;
      });
      await page.getByRole('button', { name: new RegExp(`^Details of the delivery of ${requestId}`) }).click();
      await page.getByTestId('payload-pretty').waitFor();
      // It looks again while pending, more than once.
      await expect.poll(() => reads.progress, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
      answer();
      await expect.poll(() => page.locator('.delivery-detail .facts').textContent(), { timeout: 30_000 }).toContain('Delivered');
      expect(await page.locator('.attempts-table tbody tr').count()).toBeGreaterThanOrEqual(1);
      // The payload, which never changes, was read once.
      expect(reads.whole).toBe(1);
      expect(await page.getByTestId('payload-pretty').textContent()).toContain(requestId);
    } finally {
      answer();
      await page.context().close();
      await slow.close();
    }
  });
});
