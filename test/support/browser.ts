import chromiumPackage from '@sparticuz/chromium';
import { type Browser, chromium } from 'playwright-core';

/**
 * A real headless Chromium for the page tests: the one the `@sparticuz/chromium` package ships
 * (unpacked into the temporary directory on first use), so `npm ci` is all the set-up, or the
 * one CHROMIUM_PATH names. playwright-core drives it and downloads no browser of its own (there
 * is no network here but the package registries). The package's own flags are not used: they
 * turn off web security, which the console's tests rely on.
 */
export async function launchChromium(): Promise<{ browser: Browser; close: () => Promise<void> }> {
  const executablePath = process.env.CHROMIUM_PATH ?? (await chromiumPackage.executablePath());
  const browser = await chromium.launch({
    executablePath,
    timeout: 60_000,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // A fresh profile: playwright gives every launch a temporary --user-data-dir of its own.
    ],
  });
  return {
    browser,
    close: async () => {
      await browser.close().catch(() => {});
    },
  };
}
