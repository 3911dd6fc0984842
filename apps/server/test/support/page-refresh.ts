import type { Page } from 'playwright-core';

/**
 * The longest a dashboard view waits before it looks at the server again on its own (IDLE_REFRESH_MS in
 * apps/dashboard/src/delivery-refresh.ts); its shorter waits (1.5 s, 2 s while a delivery is pending) fall within it.
 */
const LONGEST_REFRESH_MS = 5_000;

/**
 * For `expect.poll`: what `read` finds once the page's clock has jumped past its next look at the server. A test of
 * "the page shows it without a click or a reload" then waits for the page's own timer to fire and its request to be
 * answered, not for seconds of real time in between. Only the page's clock jumps (the server keeps real time); the page
 * needs `page.clock.install()` before it loads.
 *
 * @example
 * await page.clock.install();
 * await page.goto(`${server.url}/dashboard/settings/api-keys/${key.id}/deliveries`);
 * await expect.poll(afterNextRefresh(page, () => row.locator('td').nth(3).textContent())).toBe('Delivered');
 */
export function afterNextRefresh<T>(page: Page, read: () => Promise<T>): () => Promise<T> {
  return async () => {
    await page.clock.fastForward(LONGEST_REFRESH_MS);
    return read();
  };
}
