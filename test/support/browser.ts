import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/**
 * A real headless Chromium for the page tests: Debian's (`apt-get install chromium`, which
 * .ci/run does when it is missing), or the one CHROMIUM_PATH names. playwright-core drives it; it
 * downloads no browser of its own (there is no network here but the package registries).
 */
export async function launchChromium(): Promise<{ browser: Browser; close: () => Promise<void> }> {
  const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(executablePath))
    throw new Error(
      `No Chromium at ${executablePath}: install Debian's (apt-get install chromium) or set CHROMIUM_PATH`,
    );
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
