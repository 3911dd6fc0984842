import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium: the browser tests drive it, never a downloaded one. */
export const CHROMIUM = '/usr/bin/chromium';
const REQUIRED = process.env.SVC_TEST_CHROMIUM_REQUIRED === '1';
const HAVE_CHROMIUM = existsSync(CHROMIUM);

/**
 * Whether a browser test file skips: Chromium is missing and CI did not require it (SVC_TEST_CHROMIUM_REQUIRED=1
 * makes `launchChromium` fail instead). Says so on the console when it does.
 */
export function skipWithoutChromium(file: string): boolean {
  const skip = !HAVE_CHROMIUM && !REQUIRED;
  if (skip) {
    console.warn(
      `\n[${file}] SKIPPED: ${CHROMIUM} not found. Install it with 'apt-get install chromium' ` +
        '(CI sets SVC_TEST_CHROMIUM_REQUIRED=1 and fails instead).\n',
    );
  }
  return skip;
}

/** Chromium headless, without network chatter of its own. */
export async function launchChromium(): Promise<Browser> {
  if (!HAVE_CHROMIUM) throw new Error(`SVC_TEST_CHROMIUM_REQUIRED=1 but ${CHROMIUM} is missing: apt-get install chromium`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
}
