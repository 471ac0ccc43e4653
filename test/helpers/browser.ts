/**
 * A real browser for the report's tests: Debian's chromium (installed by the tests themselves
 * when missing and allowed: root or passwordless sudo, Debian packages reachable) driven by
 * playwright-core with the flags in tools/browser/chromium.ts. Pages opened here record every
 * console error, page error and network request, so a test can require none.
 */
import { pathToFileURL } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM_FLAGS, launchChromium } from '../../tools/browser/chromium.js';

export { CHROMIUM_FLAGS };

export type BrowserOrReason = { browser: Browser } | { browser: undefined; reason: string };

/** Launches chromium, or says why it cannot (the caller skips its browser tests then). */
export async function startBrowser(): Promise<BrowserOrReason> {
  try {
    return await launchChromium();
  } catch (err) {
    return { browser: undefined, reason: `chromium did not start: ${(err as Error).message}` };
  }
}

export interface OpenedPage {
  page: Page;
  url: string;
  /** Console messages of type error, and uncaught page errors. */
  errors: string[];
  /** Every request the page made, the document itself included. */
  requests: string[];
}

/** Opens a local HTML file, recording errors and requests from the first byte on. */
export async function openFile(
  browser: Browser,
  path: string,
  viewport = { width: 1280, height: 900 },
): Promise<OpenedPage> {
  const page = await browser.newPage({ viewport });
  const url = pathToFileURL(path).href;
  const errors: string[] = [];
  const requests: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  page.on('request', (request) => requests.push(request.url()));
  await page.goto(url, { waitUntil: 'load' });
  return { page, url, errors, requests };
}
