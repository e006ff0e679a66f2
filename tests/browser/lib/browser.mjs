// Debian's Chromium driven by playwright-core: headless, no sandbox (CI
// runs as root), nothing that phones home, a fresh profile per run. The
// page's console errors, uncaught exceptions and every request it makes
// are recorded, so a test can assert there were none it did not expect.

import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
/** Screenshots go here: test artifacts, not sources. */
export const ARTIFACTS = join(root, "target", "browser");

const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "fencelog-chromium-"));
  // launchPersistentContext is how playwright takes --user-data-dir.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 860 },
    deviceScaleFactor: 1,
    locale: "en-US",
    timezoneId: "UTC",
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A page that records what went wrong on it and where it went. */
export async function watchedPage(context) {
  const page = await context.newPage();
  const problems = [];
  const requests = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
  page.on("request", (r) => requests.push(r.url()));
  return { page, problems, requests };
}

export async function screenshot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, name);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** How long a page may take to show something: the overview scrapes every 2 s. */
export const SHOW_MS = 20_000;

/** Waits until `fn(arg)` is true in `page`; fails with `what` and the page's text. */
export async function shown(page, fn, arg, what) {
  try {
    await page.waitForFunction(fn, arg, { timeout: SHOW_MS, polling: 100 });
  } catch (e) {
    const text = await page.locator("main").innerText().catch(() => "(no page)");
    assert.fail(`${what}: not shown within ${SHOW_MS} ms (${e.message.split("\n")[0]}); the page says:\n${text}`);
  }
}

/** The text of each element matching `selector`, whitespace collapsed. */
export const texts = (page, selector) =>
  page.locator(selector).evaluateAll((rows) => rows.map((r) => r.innerText.replace(/\s+/g, " ").trim()));
