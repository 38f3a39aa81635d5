// Shared pieces of the browser tests: Chromium via playwright-core (Debian's /usr/bin/chromium), the
// static server, and a tiny test runner (no test framework dependency).

import { chromium } from 'playwright-core'
import { mkdir } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startServer } from './server.mjs'

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
export const ARTIFACTS = resolve(ROOT, 'test-artifacts/js')

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run'
]

/** Starts the static server and Chromium. Resolves to { url, browser, close }. */
export async function launch() {
  await mkdir(ARTIFACTS, { recursive: true })
  const server = await startServer()
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
    args: CHROMIUM_ARGS
  })
  return {
    url: server.url,
    browser,
    async close() {
      await browser.close()
      await server.close()
    }
  }
}

/** Opens the fixture page in `context` and waits until the module is imported (window.QE). */
export async function openPage(context, url, label) {
  const page = await context.newPage()
  page.on('console', (m) => {
    if (m.type() === 'error' && !/favicon|Failed to load resource/.test(m.text())) {
      console.log(`    [${label} console.error] ${m.text()}`)
    }
  })
  page.on('pageerror', (e) => console.log(`    [${label} pageerror] ${e.message}`))
  await page.goto(url + '/index.html')
  await page.waitForFunction(() => window.qeReady === true, null, { timeout: 15000 })
  return page
}

/** A unique broker name per test run. */
export function uniqueName(what) {
  return `t-${what}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
}

export function assert(condition, message) {
  if (!condition) throw new Error('assertion failed: ' + message)
}

export function assertEq(actual, expected, message) {
  const a = JSON.stringify(actual)
  const e = JSON.stringify(expected)
  if (a !== e) throw new Error(`assertion failed: ${message}\n      expected ${e}\n      actual   ${a}`)
}

/** Runs named async tests in order; prints a line each; returns the number of failures. */
export async function runTests(tests, env, only) {
  let failed = 0
  for (const [name, fn] of tests) {
    if (only && only.length && !only.some((o) => name.includes(o))) continue
    const t0 = Date.now()
    try {
      await fn(env)
      console.log(`  ok    ${name} (${Date.now() - t0} ms)`)
    } catch (error) {
      failed++
      console.log(`  FAIL  ${name} (${Date.now() - t0} ms)\n      ${(error && error.stack) || error}`)
    }
  }
  return failed
}
