/// <reference lib="dom" />
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './support/chromium.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { hashPassword } from '../src/auth/passwords.js';
import { findDashboardDist } from '../src/dashboard/static-files.js';
import { startReceiver, type Receiver } from './support/webhooks.js';
import { sessionCookie } from './support/dashboard-client.js';

// Accessibility, keyboard use, narrow screens and dark mode of the dashboard, in Chromium with axe-core.
const SKIP = skipWithoutChromium('dashboard-a11y');
const HERE = dirname(fileURLToPath(import.meta.url));
// SVC_UPDATE_SCREENSHOTS=1 writes the README's screenshots; otherwise they go with the other artifacts.
const SHOTS = process.env.SVC_UPDATE_SCREENSHOTS === '1' ? join(HERE, '..', '..', '..', 'docs', 'screenshots') : join(HERE, '..', 'test-artifacts', 'screenshots');
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PASSWORD = 'a11y password 12345';
/** Every user of this file has PASSWORD: hashed once (a scrypt at OWASP's cost is ~0.3 s of CPU). */
let hashed: Promise<string> | undefined;
const passwordHash = () => (hashed ??= hashPassword(PASSWORD));
const WIDTHS = [1280, 390] as const;

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/** axe-core's serious and critical violations on the page as it is now. */
async function seriousViolations(page: Page): Promise<Violation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ content: AXE_SOURCE });
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> }> }> } }).axe;
    const result = await axe.run(document, { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 5).map((n) => n.target.join(' ')) }));
  });
}

describe.skipIf(SKIP)('dashboard accessibility in Chromium', () => {
  let browser: Browser;
  let server: TestServer;
  let receiver: Receiver;
  let email: string;
  let keyId: string;
  let keyName: string;

  beforeAll(async () => {
    if (!findDashboardDist()) throw new Error('apps/dashboard/dist is missing: run npm run build first');
    mkdirSync(SHOTS, { recursive: true });
    browser = await launchChromium();
    server = await startTestServer();
    receiver = await startReceiver();
    email = 'a11y@example.test';
    const user = await server.running.store.users.create({ email, passwordHash: await passwordHash(), now: Date.now() });
    keyName = 'production';
    const { token, key } = await server.createKey({ userId: user.id, webhookUrl: receiver.url, name: keyName });
    keyId = key.id;
    const chat = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'The sky is blue. What colour is the sky?' }] }),
    });
    expect(chat.status).toBe(200);
    const bad = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01' }),
    });
    expect(bad.status).toBe(400);
    await receiver.waitFor((r) => r.length >= 1, 30_000);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await receiver?.close();
  });

  async function signedIn(colorScheme: 'light' | 'dark', width = 1280, as = email): Promise<{ context: BrowserContext; page: Page }> {
    // bypassCSP lets axe's source be injected; the dashboard's own CSP is tested in dashboard-e2e.
    const context = await browser.newContext({ viewport: { width, height: 860 }, colorScheme, bypassCSP: true });
    // Signed in through the API, as after a reload: the sign-in form has a test of its own.
    await context.addCookies([await sessionCookie(server.url, as, PASSWORD)]);
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard/`);
    await page.getByRole('heading', { name: 'API Keys', level: 1 }).waitFor();
    return { context, page };
  }

  /** Each page: how to get there, its heading and its title. */
  const pages = (): Array<{ name: string; path: string; heading: string; title: string; open?: (page: Page) => Promise<void> }> => [
    { name: 'api-keys', path: '/dashboard/settings/api-keys', heading: 'API Keys', title: 'API Keys — svc' },
    { name: 'key-settings', path: `/dashboard/settings/api-keys/${keyId}`, heading: keyName, title: `${keyName} · API Keys — svc` },
    { name: 'deliveries', path: `/dashboard/settings/api-keys/${keyId}/deliveries`, heading: 'Deliveries', title: `Deliveries of ${keyName} — svc` },
    {
      name: 'delivery-detail',
      path: `/dashboard/settings/api-keys/${keyId}/deliveries`,
      heading: 'Deliveries',
      title: `Deliveries of ${keyName} — svc`,
      open: async (page) => {
        // The oldest delivery is the answered chat request (with its grounding table).
        await page.getByRole('button', { name: 'Details' }).last().click();
        await page.getByTestId('claims').waitFor();
        // Long claims wrap inside their column instead of running into the next one.
        expect(await page.getByTestId('claims').locator('td').first().evaluate((td) => getComputedStyle(td).whiteSpace)).toBe('normal');
      },
    },
    { name: 'usage', path: '/dashboard/usage', heading: 'Usage', title: 'Usage — svc' },
    { name: 'not-found', path: '/dashboard/nope', heading: 'Page not found', title: 'Page not found — svc' },
  ];

  for (const colorScheme of ['light', 'dark'] as const) {
    it(`${colorScheme}: axe finds no serious or critical violation on any page at 1280 and 390 px; each page has its title`, { timeout: 240_000 }, async () => {
      const found: Record<string, Violation[]> = {};
      const anonymous = await browser.newContext({ viewport: { width: 1280, height: 860 }, colorScheme, bypassCSP: true });
      try {
        const page = await anonymous.newPage();
        await page.goto(`${server.url}/dashboard/`);
        await page.getByRole('heading', { name: 'Sign in' }).waitFor();
        expect(await page.title()).toBe('Sign in — svc');
        await page.screenshot({ path: join(SHOTS, `sign-in-${colorScheme}.png`), fullPage: true });
        for (const width of WIDTHS) {
          await page.setViewportSize({ width, height: 860 });
          const v = await seriousViolations(page);
          if (v.length > 0) found[`sign-in@${width}`] = v;
        }
      } finally {
        await anonymous.close();
      }

      const { context, page } = await signedIn(colorScheme);
      try {
        for (const target of pages()) {
          await page.setViewportSize({ width: 1280, height: 860 });
          await page.goto(`${server.url}${target.path}`);
          await page.getByRole('heading', { name: target.heading, level: 1 }).waitFor();
          await target.open?.(page);
          await expect.poll(() => page.title()).toBe(target.title);
          await page.screenshot({ path: join(SHOTS, `${target.name}-${colorScheme}.png`), fullPage: true });
          for (const width of WIDTHS) {
            await page.setViewportSize({ width, height: 860 });
            const v = await seriousViolations(page);
            if (v.length > 0) found[`${target.name}@${width}`] = v;
          }
        }
      } finally {
        await context.close();
      }
      expect(found).toEqual({});
    });
  }

  it('an unknown dashboard path shows a 404 page, not API Keys', async () => {
    const { context, page } = await signedIn('light');
    try {
      await page.goto(`${server.url}/dashboard/nope`);
      await page.getByRole('heading', { name: 'Page not found', level: 1 }).waitFor();
      expect(await page.getByRole('heading', { name: 'API Keys', level: 1 }).count()).toBe(0);
      await page.getByRole('link', { name: 'Go to API Keys' }).click();
      await page.getByRole('heading', { name: 'API Keys', level: 1 }).waitFor();
    } finally {
      await context.close();
    }
  });

  it('the Revoke confirmation opens on Cancel, keeps Tab inside, closes on Escape and returns focus', async () => {
    const { context, page } = await signedIn('light');
    try {
      const revoke = page.locator(`tr[data-key-id="${keyId}"]`).getByRole('button', { name: 'Revoke' });
      await revoke.click();
      const dialog = page.getByRole('dialog');
      await dialog.waitFor();
      const focused = () => page.evaluate(() => document.activeElement?.textContent ?? '');
      expect(await focused()).toBe('Cancel');
      await page.keyboard.press('Tab');
      expect(await focused()).toBe('Revoke key');
      await page.keyboard.press('Tab');
      expect(await focused()).toBe('Cancel');
      await page.keyboard.press('Shift+Tab');
      expect(await focused()).toBe('Revoke key');
      await page.keyboard.press('Shift+Tab');
      expect(await focused()).toBe('Cancel');
      // Enter on the initial focus cancels: nothing is revoked by accident.
      await page.keyboard.press('Enter');
      await expect.poll(() => dialog.count()).toBe(0);
      await revoke.click();
      await dialog.waitFor();
      await page.keyboard.press('Escape');
      await expect.poll(() => dialog.count()).toBe(0);
      // Back on the row's Revoke, named after its key.
      expect(await page.evaluate(() => document.activeElement?.textContent)).toMatch(new RegExp(`^Revoke “${keyName}” \\(`));
      expect(await page.locator(`tr[data-key-id="${keyId}"]`).getByText('Revoked').count()).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('key settings: clear URL errors, no stale "Saved", a test failure said once, a warning before unsaved edits are lost', async () => {
    const failing = await startReceiver({ status: 403 });
    const { context, page } = await signedIn('light');
    try {
      await page.goto(`${server.url}/dashboard/settings/api-keys/${keyId}`);
      await page.getByRole('heading', { name: keyName, level: 1 }).waitFor();
      const urlField = page.getByLabel('Webhook URL');
      const saved = page.getByRole('status').filter({ hasText: /^Saved$/ });

      // aria-describedby names only what is on the page: no field points at an error that is not there.
      const danglingDescriptions = () =>
        page.evaluate(() =>
          Array.from(document.querySelectorAll('[aria-describedby]'))
            .filter((el) => (el.getAttribute('aria-describedby') ?? '').split(/\s+/).some((id: string) => !document.getElementById(id)))
            .map((el) => el.getAttribute('name')),
        );
      expect(await danglingDescriptions()).toEqual([]);
      await urlField.fill('localhost:4000');
      await page.getByRole('button', { name: 'Save' }).click();
      await expect.poll(() => page.getByTestId('webhook_url-error').textContent()).toBe('Add http:// or https:// at the start, e.g. http://localhost:4000');
      expect(await urlField.getAttribute('aria-describedby')).toBe('webhook_url-error');
      expect(await danglingDescriptions()).toEqual([]);

      // Unsaved edits: leaving within the app asks first; leaving the page triggers beforeunload.
      expect(await page.evaluate(() => {
        const event = new Event('beforeunload', { cancelable: true });
        window.dispatchEvent(event);
        return event.defaultPrevented;
      })).toBe(true);
      const dialogs: string[] = [];
      page.once('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Usage' }).click();
      await expect.poll(() => dialogs.length).toBe(1);
      expect(dialogs[0]).toContain('unsaved changes');
      expect(await urlField.inputValue()).toBe('localhost:4000');
      expect(page.url()).toContain(`/api-keys/${keyId}`);

      await urlField.fill(failing.url);
      await page.getByRole('button', { name: 'Save' }).click();
      await saved.waitFor();
      // Saved: no warning any more.
      expect(await page.evaluate(() => {
        const event = new Event('beforeunload', { cancelable: true });
        window.dispatchEvent(event);
        return event.defaultPrevented;
      })).toBe(false);

      await page.getByRole('button', { name: 'Send test' }).click();
      const result = page.getByTestId('test-result');
      await expect.poll(() => result.textContent(), { timeout: 30_000 }).toContain('Test failed with HTTP 403');
      const text = (await result.textContent()) ?? '';
      expect(text.match(/HTTP 403/g)).toHaveLength(1);
      expect(await saved.count()).toBe(0);
      // Last delivery too: the status once, not again as its error ("HTTP 403 … HTTP 403").
      await expect.poll(() => page.getByTestId('last-delivery').textContent()).toContain('HTTP 403');
      expect((await page.getByTestId('last-delivery').textContent())?.match(/HTTP 403/g)).toHaveLength(1);

      // Put the working receiver back for the other tests.
      await urlField.fill(receiver.url);
      await page.getByRole('button', { name: 'Save' }).click();
      await saved.waitFor();
      let asked = false;
      page.once('dialog', (d) => {
        asked = true;
        void d.accept();
      });
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Usage' }).click();
      await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
      expect(asked).toBe(false);

      // Back within the app with unsaved edits asks too; staying keeps the page and its URL.
      await page.goto(`${server.url}/dashboard/settings/api-keys`);
      await page.locator(`tr[data-key-id="${keyId}"]`).getByRole('link', { name: 'Settings' }).click();
      await page.getByRole('heading', { name: keyName, level: 1 }).waitFor();
      await urlField.fill('https://example.com/unsaved');
      const answers: Array<'dismiss' | 'accept'> = ['dismiss', 'accept'];
      const backDialogs: string[] = [];
      page.removeAllListeners('dialog'); // the unused once-handler above
      page.on('dialog', (d) => {
        backDialogs.push(d.message());
        void (answers.shift() === 'accept' ? d.accept() : d.dismiss());
      });
      await page.goBack();
      await expect.poll(() => backDialogs.length).toBe(1);
      await expect.poll(() => new URL(page.url()).pathname).toBe(`/dashboard/settings/api-keys/${keyId}`);
      expect(await urlField.inputValue()).toBe('https://example.com/unsaved');
      await page.goBack();
      await page.getByRole('heading', { name: 'API Keys', level: 1 }).waitFor();
      expect(backDialogs).toHaveLength(2);
    } finally {
      await context.close();
      await failing.close();
    }
  });

  it('at 390 px the delivery id is whole, attempts keep their labels and chart labels are at least 11 px', async () => {
    const { context, page } = await signedIn('light', 390);
    try {
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await page.goto(`${server.url}/dashboard/settings/api-keys/${keyId}/deliveries`);
      await page.getByRole('button', { name: 'Details' }).first().click();
      const id = page.locator('code.id');
      await id.waitFor();
      const box = await id.boundingBox();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(390);
      expect(await id.evaluate((el) => el.scrollWidth <= el.clientWidth + 1)).toBe(true);
      const labels = await page.locator('.attempts-table td').evaluateAll((cells) => cells.map((td) => getComputedStyle(td, '::before').content));
      expect(labels.slice(0, 5)).toEqual(['"#"', '"Time"', '"Outcome"', '"Code"', '"Duration"']);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);

      await page.goto(`${server.url}/dashboard/usage`);
      await page.locator('.chart .axis').first().waitFor();
      const sizes = await page.locator('.chart .axis').evaluateAll((texts) =>
        texts.map((t) => (t as SVGGraphicsElement).getScreenCTM()!.a * parseFloat(getComputedStyle(t).fontSize)),
      );
      expect(sizes.length).toBeGreaterThan(0);
      for (const size of sizes) expect(size).toBeGreaterThanOrEqual(11);
    } finally {
      await context.close();
    }
  });

  it('Usage shows requests, errors by class, latency p50/p95, tokens and the ungrounded share per day; the key is in the URL', async () => {
    const { context, page } = await signedIn('light');
    try {
      await page.goto(`${server.url}/dashboard/usage`);
      const summary = page.getByTestId('usage-summary');
      await expect
        .poll(async () => {
          await page.reload();
          await summary.waitFor();
          return summary.textContent();
        }, { timeout: 30_000 })
        .toContain('Requests2');
      const text = (await summary.textContent()) ?? '';
      expect(text).toContain('Errors 4xx / 5xx1 / 0');
      expect(text).toMatch(/Latency p50 \/ p95≤ [\d.]+ m?s \/ ≤ [\d.]+ m?s/);
      expect(text).toMatch(/Checked answers judged ungrounded\d+ % of 1/);
      const today = new Date().toISOString().slice(0, 10);
      const dayRow = page.locator('.usage-days-table tbody tr').first();
      expect(await dayRow.locator('td').first().textContent()).toBe(today);
      expect(await dayRow.locator('td').nth(2).textContent()).toBe('1 / 0');
      await page.getByRole('combobox', { name: 'Key' }).selectOption(keyId);
      await expect.poll(() => new URL(page.url()).searchParams.get('key')).toBe(keyId);
      await page.reload();
      await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
      expect(await page.getByRole('combobox', { name: 'Key' }).inputValue()).toBe(keyId);
    } finally {
      await context.close();
    }
  });

  it('Usage lists active keys first, revoked keys with requests in their own group, and only counts the unused revoked ones', async () => {
    const owner = await server.running.store.users.create({ email: 'usage-keys@example.test', passwordHash: await passwordHash(), now: Date.now() });
    await server.createKey({ userId: owner.id, name: 'live' });
    const retired = await server.createKey({ userId: owner.id, name: 'retired' });
    const chat = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${retired.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(200);
    await server.running.store.keys.revoke(retired.key.id, Date.now());
    for (let i = 0; i < 3; i++) {
      const old = await server.createKey({ userId: owner.id, name: `old-${i}` });
      await server.running.store.keys.revoke(old.key.id, Date.now());
    }
    const { context, page } = await signedIn('light', 1280, owner.email);
    try {
      const picker = page.getByRole('combobox', { name: 'Key' });
      const groups = () =>
        picker.evaluate((select) =>
          Array.from(select.querySelectorAll('optgroup'), (g) => [g.label, ...Array.from(g.querySelectorAll('option'), (o) => o.textContent?.replace(/ \(.*\)$/, ''))]),
        );
      await page.goto(`${server.url}/dashboard/usage`);
      await expect
        .poll(async () => {
          await page.reload();
          await picker.waitFor();
          return groups();
        }, { timeout: 30_000 })
        .toEqual([['Active keys', 'live'], ['Revoked keys', 'retired']]);
      expect(await page.getByTestId('usage-key-hidden').textContent()).toBe('3 revoked keys without requests in these 30 days not listed (the total counts every key).');
      expect(await picker.getAttribute('aria-describedby')).toBe('usage-key-hidden');
      expect(await seriousViolations(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('a 64-character key name wraps: Revoke stays visible at 1280 px, nothing scrolls sideways at 375 px, keys and secrets wrap as one balanced block', async () => {
    const longName = 'ProductionKeyForTheVeryLongCustomerNameIncorporatedLimitedXZZZZZ';
    expect(longName).toHaveLength(64);
    const owner = await server.running.store.users.create({ email: 'long-name@example.test', passwordHash: await passwordHash(), now: Date.now() });
    const { key } = await server.createKey({ userId: owner.id, name: longName, webhookUrl: receiver.url });
    await server.createKey({ userId: owner.id, name: 'staging' });
    const { context, page } = await signedIn('light', 1280, owner.email);
    try {
      const revokes = page.locator('tr[data-key-id]').getByRole('button', { name: 'Revoke' });
      await expect.poll(() => revokes.count()).toBe(2);
      for (const button of await revokes.all()) {
        const box = (await button.boundingBox())!;
        expect(box.x).toBeGreaterThanOrEqual(0);
        expect(box.x + box.width).toBeLessThanOrEqual(1280);
        // Not clipped by the table's card: the button's centre is the button itself.
        expect(await button.evaluate((el) => {
          const r = el.getBoundingClientRect();
          return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === el;
        })).toBe(true);
      }
      const prefix = page.locator(`tr[data-key-id="${key.id}"] code`);
      expect(await prefix.evaluate((el) => el.getClientRects().length)).toBe(1);

      // A generated secret wraps as one block of balanced lines, never a lone trailing `=`.
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByRole('button', { name: 'Generate' }).click();
      const secret = page.getByTestId('shown-once-value');
      const lineLengths = () =>
        secret.evaluate((el) => {
          const text = el.firstChild as Text;
          const lines = new Map<number, number>();
          for (let i = 0; i < text.length; i++) {
            const range = document.createRange();
            range.setStart(text, i);
            range.setEnd(text, i + 1);
            const top = Math.round(range.getBoundingClientRect().top);
            lines.set(top, (lines.get(top) ?? 0) + 1);
          }
          return [...lines.values()];
        });
      const balanced = (lengths: number[]) => Math.min(...lengths) >= Math.max(...lengths) / 2;
      expect(balanced(await lineLengths())).toBe(true);

      await page.setViewportSize({ width: 375, height: 760 });
      expect(balanced(await lineLengths())).toBe(true);
      const targets = [
        { path: `/dashboard/settings/api-keys/${key.id}`, heading: longName },
        { path: `/dashboard/settings/api-keys/${key.id}/deliveries`, heading: 'Deliveries' },
        { path: `/dashboard/usage?key=${key.id}`, heading: 'Usage' },
        { path: '/dashboard/settings/api-keys', heading: 'API Keys' },
      ];
      for (const target of targets) {
        await page.goto(`${server.url}${target.path}`);
        await page.getByRole('heading', { name: target.heading, level: 1 }).waitFor();
        await page.locator('.spinner').waitFor({ state: 'detached' });
        // Polled: a chart takes its box's width once it is measured.
        await expect.poll(async () => ({ path: target.path, width: await page.evaluate(() => document.documentElement.scrollWidth) })).toEqual({ path: target.path, width: 375 });
      }
      await page.locator(`tr[data-key-id="${key.id}"]`).getByRole('button', { name: 'Revoke' }).click();
      await page.getByRole('dialog').waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(375);
    } finally {
      await context.close();
    }
  });

  it('focus follows Create key, Revoke and Generate to their outcome; revoking the new key hides it', async () => {
    const owner = await server.running.store.users.create({ email: 'focus@example.test', passwordHash: await passwordHash(), now: Date.now() });
    const { context, page } = await signedIn('light', 1280, owner.email);
    const focused = () => page.evaluate(() => ({ text: document.activeElement?.textContent ?? '', region: document.activeElement?.closest('[role=region]')?.getAttribute('aria-label') ?? null }));
    try {
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByLabel('Key name').fill('short-lived');
      await page.keyboard.press('Enter');
      const banner = page.getByRole('region', { name: 'New key “short-lived”' });
      await banner.waitFor();
      expect(await focused()).toEqual({ text: 'Copy', region: 'New key “short-lived”' });

      // Revoking the key just created: focus lands on the outcome, and the whole key leaves the screen.
      const row = page.locator('tr[data-key-id]', { hasText: 'short-lived' });
      await row.getByRole('button', { name: 'Revoke' }).click();
      await page.getByRole('button', { name: 'Revoke key' }).click();
      await row.getByText('Revoked').waitFor();
      expect(await banner.count()).toBe(0);
      expect(await page.getByTestId('shown-once-value').count()).toBe(0);
      await expect.poll(async () => (await focused()).text).toMatch(/^Revoked “short-lived”/);
      expect(await page.evaluate(() => document.activeElement?.getAttribute('role'))).toBe('status');

      // Generate: the new secret has focus, not <body> (the Generate button that asked for it is gone).
      const { key } = await server.createKey({ userId: owner.id, name: 'secret-focus' });
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByRole('button', { name: 'Generate' }).click();
      await page.getByTestId('shown-once-value').waitFor();
      expect(await focused()).toEqual({ text: 'Copy', region: 'Signing secret' });
    } finally {
      await context.close();
    }
  });

  it('Send test says beside it why it is off, tied to the button', async () => {
    const owner = await server.running.store.users.create({ email: 'send-test@example.test', passwordHash: await passwordHash(), now: Date.now() });
    const { key } = await server.createKey({ userId: owner.id, name: 'no-hook' });
    const { context, page } = await signedIn('light', 1280, owner.email);
    try {
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      const sendTest = page.getByRole('button', { name: 'Send test' });
      await sendTest.waitFor();
      expect(await sendTest.isDisabled()).toBe(true);
      const reason = page.getByTestId('send-test-reason');
      expect(await reason.isVisible()).toBe(true);
      expect(await reason.textContent()).toContain('Set a Webhook URL');
      expect(await sendTest.getAttribute('aria-describedby')).toBe(await reason.getAttribute('id'));
      await page.getByLabel('Webhook URL').fill(receiver.url);
      await expect.poll(() => reason.textContent()).toContain('Save your changes first');
      expect(await sendTest.getAttribute('aria-describedby')).toBe(await reason.getAttribute('id'));
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      expect(await sendTest.isEnabled()).toBe(true);
      expect(await reason.count()).toBe(0);
      expect(await sendTest.getAttribute('aria-describedby')).toBeNull();
    } finally {
      await context.close();
    }
  });

  it('Sign in keeps focus while it works; a refusal, the lockout too, takes it; then the page heading has it', async () => {
    const locked = await server.running.store.users.create({ email: 'lockout@example.test', passwordHash: await passwordHash(), now: Date.now() });
    const owner = await server.running.store.users.create({ email: 'signin-focus@example.test', passwordHash: await passwordHash(), now: Date.now() });
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, bypassCSP: true });
    const page = await context.newPage();
    const focused = () => page.evaluate(() => ({ tag: document.activeElement?.tagName ?? '', text: document.activeElement?.textContent ?? '' }));
    try {
      await page.goto(`${server.url}/dashboard/`);
      // The first sign-in is held until focus has been looked at while it works.
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      let sent = 0;
      await page.route('**/dashboard/api/login', async (route) => {
        sent += 1;
        await held;
        await route.continue();
      });
      await page.getByLabel('Email').fill(locked.email);
      await page.getByLabel('Password').fill('not the password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('button', { name: 'Signing in…' }).waitFor();
      expect(await focused()).toEqual({ tag: 'BUTTON', text: 'Signing in…' });
      // Enter on the working button sends nothing more.
      await page.keyboard.press('Enter');
      release();
      await expect.poll(focused).toEqual({ tag: 'DIV', text: 'The email or password is not correct.' });
      expect(sent).toBe(1);
      await page.unroute('**/dashboard/api/login');

      // Four more wrong passwords use up the minute's five; the sixth is the lockout, and it has focus too.
      for (let i = 0; i < 5; i++) {
        await Promise.all([page.waitForResponse('**/dashboard/api/login'), page.getByRole('button', { name: 'Sign in' }).click()]);
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
      }
      await expect.poll(focused).toEqual({ tag: 'DIV', text: expect.stringMatching(/^Too many failed sign-in attempts\. Try again in \d+ seconds\.$/) });

      await page.getByLabel('Email').fill(owner.email);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByLabel('Password').press('Enter');
      await page.getByRole('heading', { name: 'API Keys', level: 1 }).waitFor();
      await expect.poll(focused).toEqual({ tag: 'H1', text: 'API Keys' });
    } finally {
      await context.close();
    }
  });

  it('a session that ends under an open page says so on the sign-in form and returns to the page, with the unsaved edit back in the form', async () => {
    const { context, page } = await signedIn('light');
    try {
      const settings = `${server.url}/dashboard/settings/api-keys/${keyId}`;
      await page.goto(settings);
      await page.getByRole('heading', { name: keyName, level: 1 }).waitFor();
      // Signed out in another tab (same cookies).
      const other = await context.newPage();
      await other.goto(`${server.url}/dashboard/`);
      await other.getByRole('button', { name: 'Sign out' }).click();
      await other.getByRole('heading', { name: 'Sign in' }).waitFor();
      expect(await other.getByTestId('session-ended').count()).toBe(0);
      await other.close();

      await page.getByLabel('Rate limit (requests/min)').fill('77');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('heading', { name: 'Sign in' }).waitFor();
      const notice = page.getByTestId('session-ended');
      await notice.waitFor({ timeout: 30_000 });
      expect(await notice.textContent()).toMatch(/session has ended.*not saved/);
      await page.getByLabel('Email').fill(email);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: keyName, level: 1 }).waitFor();
      expect(page.url()).toBe(settings);
      expect(await notice.count()).toBe(0);
      // The edit that was not saved is back in the form, said so, and saved with one click.
      const rpm = page.getByLabel('Rate limit (requests/min)');
      expect(await rpm.inputValue()).toBe('77');
      await page.getByTestId('draft-restored').waitFor();
      // Sign out asks first, as leaving the page does (dismissed: the page stays).
      const asked: string[] = [];
      page.once('dialog', (dialog) => {
        asked.push(dialog.message());
        void dialog.dismiss();
      });
      await page.getByRole('button', { name: 'Sign out' }).click();
      expect(asked).toEqual([expect.stringContaining('unsaved changes')]);
      expect(await rpm.inputValue()).toBe('77');
      await page.getByRole('button', { name: 'Save' }).click();
      // The whole text: the restored-draft notice is a status too, and its "unsaved" holds "saved".
      await page.getByRole('status').filter({ hasText: /^Saved$/ }).waitFor();
      expect(await page.getByTestId('draft-restored').count()).toBe(0);
    } finally {
      await context.close();
    }
  });
});
