// Drives Hermes' live status page in real headless Chromium (Playwright's library, Debian's
// chromium): opens the page, says `ready` on stdout, waits until session SESSION shows as
// answered without the page reloading, saves a screenshot, and prints what it saw as one JSON
// line. Exits non-zero with the reason on stderr when anything is missing.
//
//   node status_page.mjs URL SESSION SCREENSHOT.png [PROCESSES]
//
// PROCESSES: how many processes the page must list before the screenshot (default 1).
//
// HERMES_PLAYWRIGHT: the playwright-core package directory (default: .tools/browser/...).
// HERMES_CHROMIUM: the browser binary (default: /usr/bin/chromium).
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [url, session, screenshot, processes = "1"] = process.argv.slice(2);
if (!url || !session || !screenshot) {
  console.error("usage: node status_page.mjs URL SESSION SCREENSHOT.png");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
const playwrightDir = process.env.HERMES_PLAYWRIGHT
  || path.join(here, "..", "..", ".tools", "browser", "node_modules", "playwright-core");
const require = createRequire(import.meta.url);
const { chromium } = require(playwrightDir);

const browser = await chromium.launch({
  executablePath: process.env.HERMES_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  // This machine's network is closed: keep Chromium from trying to reach Google's hosts.
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  let navigations = 0;
  page.on("framenavigated", frame => { if (frame === page.mainFrame()) navigations += 1; });
  await page.goto(url);
  await page.waitForSelector("#link.live", { timeout: 20000 });
  const load = await page.evaluate(() => window.hermesPageLoad);
  console.log("ready");
  const row = `tr[data-session="${session}"][data-state="answered"]`;
  await page.waitForSelector(row, { timeout: 90000 });
  // The processes table fills from a poll every few seconds.
  await page.waitForFunction(min => document.querySelectorAll("#processes tbody tr").length >= min,
    Number(processes), { timeout: 20000 });
  const seen = await page.evaluate(([session, load]) => ({
    sameLoad: window.hermesPageLoad === load,
    snapshots: window.hermesSnapshots || 0,
    state: document.querySelector(`tr[data-session="${session}"]`)?.dataset.state,
    tools: [...document.querySelectorAll("#tools tr[data-tool]")].map(r => r.dataset.tool),
    processes: document.querySelectorAll("#processes tbody tr").length,
    charts: document.querySelectorAll("#charts .chart").length,
  }), [session, load]);
  seen.navigations = navigations;
  await page.screenshot({ path: screenshot, fullPage: true });
  if (!seen.sameLoad || navigations !== 1) {
    throw new Error(`the page reloaded (navigations: ${navigations}); updates must arrive live`);
  }
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`status page check failed: ${error.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
