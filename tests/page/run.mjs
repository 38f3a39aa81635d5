#!/usr/bin/env node
// The page test: Playwright (playwright-core + Debian Chromium) drives www/ through one flow twice,
//   1. against the in-browser broker (the real JS module from www/vendor/queen-edge/, built by
//      scripts/build-js), with www/ served by a small static server, on a fresh IndexedDB database;
//   2. against the real worker (`wrangler dev`, workerd, on a free port with a temporary state folder),
//      which serves the page at / and the API at /api/v1.
// Then the activity pictures (tests/page/pictures.mjs) and dead letters by filter (tests/page/dlq-bulk.mjs)
// in the same page.
// Screenshots go to test-artifacts/page/. Any console error or page error fails the run.
//
//   node tests/page/run.mjs                 both modes
//   QE_PAGE_MODES=browser node tests/...    only the named modes (the others are reported as not run)
import { chromium } from 'playwright-core';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serveStatic } from './static-server.mjs';
import { startWorker } from './wrangler.mjs';
import { runFlow } from './flow.mjs';
import { runPictures } from './pictures.mjs';
import { runDlqBulk } from './dlq-bulk.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const WWW = join(ROOT, 'www');
const SHOTS = join(ROOT, 'test-artifacts', 'page');
const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const MODULE = join(WWW, 'vendor', 'queen-edge', 'queen-edge.js');
const ALL_MODES = ['browser', 'worker'];
const modes = (process.env.QE_PAGE_MODES || ALL_MODES.join(',')).split(',').map((s) => s.trim()).filter(Boolean);

function fail(message) {
  console.error(`page test: ${message}`);
  process.exit(1);
}

for (const m of modes) if (!ALL_MODES.includes(m)) fail(`unknown mode "${m}" in QE_PAGE_MODES (known: ${ALL_MODES.join(', ')})`);
if (!existsSync(CHROMIUM)) fail(`no Chromium at ${CHROMIUM}. Install it: apt-get install -y chromium (scripts/setup does this).`);
if (!existsSync(MODULE)) fail(`the JS module is missing at ${MODULE}. Build it with scripts/build-js.`);

rmSync(SHOTS, { recursive: true, force: true });
mkdirSync(SHOTS, { recursive: true });

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run'],
});

/** Runs the flow in a fresh browser context and fails on console errors. */
async function runMode(label, url) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}${msg.location()?.url ? ` (${msg.location().url})` : ''}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('crash', () => problems.push('the page crashed'));
  try {
    await runFlow(page, { label, url, shots: SHOTS });
    await runPictures(page, { label, shots: SHOTS });
    await runDlqBulk(page, { label, shots: SHOTS });
  } catch (e) {
    problems.unshift(`flow failed: ${e.message}`);
    await page.screenshot({ path: join(SHOTS, `${label}-FAILED.png`), fullPage: true }).catch(() => {});
    const alert = await page.locator('#alert-text').textContent().catch(() => '');
    if (alert) problems.push(`the page's alert said: ${alert}`);
  } finally {
    await context.close();
  }
  return problems;
}

const results = [];
let server = null;
let worker = null;
try {
  if (modes.includes('browser')) {
    server = await serveStatic(WWW);
    const db = `page-test-${Date.now()}`;
    console.log(`page test: in-browser broker, page served from ${server.url} (IndexedDB "${db}")`);
    results.push(['browser', await runMode('browser', `${server.url}/?mode=browser&db=${db}`)]);
  }
  if (modes.includes('worker')) {
    console.log('page test: starting the worker (wrangler dev) ...');
    try {
      worker = await startWorker(ROOT);
    } catch (e) {
      results.push(['worker', [`could not start the worker: ${e.message}`]]);
    }
    if (worker) {
      console.log(`page test: worker at ${worker.url}, page served by the worker`);
      results.push(['worker', await runMode('worker', `${worker.url}/?mode=worker&url=${encodeURIComponent(worker.url)}`)]);
    }
  }
} finally {
  await browser.close().catch(() => {});
  await server?.close();
  await worker?.stop();
}

let failed = false;
console.log('\npage test results:');
for (const m of ALL_MODES) {
  const r = results.find(([label]) => label === m);
  if (!r) {
    console.log(`  NOT RUN  ${m} (QE_PAGE_MODES=${process.env.QE_PAGE_MODES})`);
    continue;
  }
  const [, problems] = r;
  if (problems.length) {
    failed = true;
    console.log(`  FAIL  ${m}`);
    for (const p of problems) console.log(`        ${p.split('\n').join('\n        ')}`);
  } else {
    console.log(`  ok    ${m}`);
  }
}
console.log(`screenshots: ${SHOTS}`);
process.exit(failed ? 1 : 0);
