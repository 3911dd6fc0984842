/// <reference lib="dom" />
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium, skipWithoutChromium } from './support/chromium.js';
import { startTestServer, type TestServer } from './support/test-server.js';
import { findDashboardDist } from '../src/dashboard/static-files.js';
import { PASSWORD, sessionCookie } from './support/dashboard-client.js';

// A new key and a generated signing secret are shown once (the server keeps a hash of a key and never shows a
// secret again): the dashboard must not let one go unnoticed before it is copied.
const SKIP = skipWithoutChromium('dashboard-shown-once');

describe.skipIf(SKIP)('shown-once values in Chromium', () => {
  let browser: Browser;
  let server: TestServer;

  beforeAll(async () => {
    if (!findDashboardDist()) throw new Error('apps/dashboard/dist is missing: run npm run build first');
    browser = await launchChromium();
    server = await startTestServer();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function signedIn(email: string): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await context.addCookies([await sessionCookie(server.url, email)]);
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard/`);
    await page.getByRole('heading', { name: 'API Keys', level: 1 }).waitFor();
    return { context, page };
  }

  async function createKey(page: Page, name: string): Promise<string> {
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByLabel('Key name').fill(name);
    await page.getByRole('button', { name: 'Create key' }).click();
    const token = (await page.getByTestId('shown-once-value').textContent()) ?? '';
    expect(token).toMatch(/^sk-svc-/);
    return token;
  }

  /** Whether leaving the page (reload, closing the tab) would ask first. */
  const leavingAsks = (page: Page) =>
    page.evaluate(() => {
      const event = new Event('beforeunload', { cancelable: true });
      window.dispatchEvent(event);
      return event.defaultPrevented;
    });

  /** Ends the session under the open page: signed out in another tab (same cookies). */
  async function endSession(context: BrowserContext) {
    const other = await context.newPage();
    await other.goto(`${server.url}/dashboard/`);
    await other.getByRole('button', { name: 'Sign out' }).click();
    await other.getByRole('heading', { name: 'Sign in' }).waitFor();
    await other.close();
  }

  async function signInForm(page: Page, email: string) {
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  it('a new key not copied: leaving asks, Done asks, and a session that ends keeps it for the same user after signing in', async () => {
    const { user } = await server.createKey({ name: 'first' });
    const { context, page } = await signedIn(user.email);
    try {
      const token = await createKey(page, 'ci');
      expect(await leavingAsks(page)).toBe(true);

      // Leaving within the app asks; staying keeps the key on screen.
      const asked: string[] = [];
      page.once('dialog', (d) => {
        asked.push(d.message());
        void d.dismiss();
      });
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Usage' }).click();
      await expect.poll(() => asked.length).toBe(1);
      expect(asked[0]).toContain('shown only once');
      expect(await page.getByTestId('shown-once-value').textContent()).toBe(token);

      // Done before copying asks too, in the page; the key stays.
      await page.getByRole('button', { name: 'Done' }).click();
      const uncopied = page.getByTestId('shown-once-uncopied');
      await uncopied.waitFor();
      expect(await uncopied.textContent()).toContain('You have not copied it');
      expect(await page.getByTestId('shown-once-value').textContent()).toBe(token);

      // The session ends under the page (the key list's own refresh notices): the sign-in form says the key is
      // kept, leaving the tab still asks, and after signing in the same key is shown again.
      await endSession(context);
      await page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: 30_000 });
      expect(await page.getByTestId('session-ended').textContent()).toContain('shown again after you sign in');
      expect(await page.content()).not.toContain(token);
      expect(await leavingAsks(page)).toBe(true);
      await signInForm(page, user.email);
      await page.getByRole('heading', { name: 'API Keys', level: 1 }).waitFor();
      const again = page.getByRole('region', { name: 'New key “ci”' });
      await again.waitFor();
      expect(await again.getByTestId('shown-once-value').textContent()).toBe(token);
      expect(await again.textContent()).toContain('Shown again after you signed in');

      // Copied: nothing asks any more, and Done closes it.
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
      await again.getByRole('button', { name: 'Copy' }).click();
      await again.getByRole('button', { name: 'Copied' }).waitFor();
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(token);
      expect(await leavingAsks(page)).toBe(false);
      await again.getByRole('button', { name: 'Done' }).click();
      expect(await page.getByTestId('shown-once-value').count()).toBe(0);
    } finally {
      await context.close();
    }
  });

  it('a kept key is shown to no one else: another user signing in in the tab drops it', async () => {
    const { user } = await server.createKey({ name: 'mine' });
    const { user: other } = await server.createKey({ name: 'theirs' });
    const { context, page } = await signedIn(user.email);
    try {
      const token = await createKey(page, 'secret one');
      await endSession(context);
      await page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: 30_000 });
      await signInForm(page, other.email);
      await page.getByRole('heading', { name: 'API Keys', level: 1 }).waitFor();
      await page.getByRole('cell', { name: 'theirs', exact: true }).waitFor();
      expect(await page.getByTestId('shown-once-value').count()).toBe(0);
      expect(await page.content()).not.toContain(token);
      expect(await leavingAsks(page)).toBe(false);
    } finally {
      await context.close();
    }
  });

  it('creating another key keeps the first one on screen until its own Done', async () => {
    const { user } = await server.createKey({ name: 'existing' });
    const { context, page } = await signedIn(user.email);
    try {
      const first = await createKey(page, 'first');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByLabel('Key name').fill('second');
      await page.getByRole('button', { name: 'Create key' }).click();
      const second = page.getByRole('region', { name: 'New key “second”' });
      await second.waitFor();
      expect(await page.getByRole('region', { name: 'New key “first”' }).getByTestId('shown-once-value').textContent()).toBe(first);
      expect(await page.getByTestId('shown-once-value').count()).toBe(2);
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
      await second.getByRole('button', { name: 'Copy' }).click();
      await second.getByRole('button', { name: 'Copied' }).waitFor();
      await second.getByRole('button', { name: 'Done' }).click();
      expect(await page.getByTestId('shown-once-value').allTextContents()).toEqual([first]);
    } finally {
      await context.close();
    }
  });

  it('a generated signing secret copied by hand (selected, Ctrl+C) counts as copied', async () => {
    const { user, key } = await server.createKey({ name: 'hooks', webhookUrl: 'https://example.com/hooks' });
    const { context, page } = await signedIn(user.email);
    try {
      await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}`);
      await page.getByRole('button', { name: 'Generate' }).click();
      const value = page.getByTestId('shown-once-value');
      await value.waitFor();
      expect(await leavingAsks(page)).toBe(true);
      await value.selectText();
      await page.keyboard.press('Control+C');
      await expect.poll(() => leavingAsks(page)).toBe(false);
      await page.getByRole('button', { name: 'Done' }).click();
      expect(await value.count()).toBe(0);
    } finally {
      await context.close();
    }
  });
});
