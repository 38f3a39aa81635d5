// An existing user's database across builds, in headless Chromium: a page with an earlier build's module
// (`--base DIR`, a js/dist such as main's) writes a broker (pushes over two queues and partitions, a
// forwarded, recorded request, a pop and an ack); a page with this build's module (`--new DIR`,
// default js/dist) opens the same database, which upgrades it, and must find every message that was not
// acknowledged or leased (the acked one gone, the popped one still leased), and answer the recorded
// request's retry from its record; then a page with the earlier
// build again must be refused with code `newer_format` and a message saying a newer queen-edge wrote it.
// The base build is not in the repository, so no tier runs this: run it by hand after a change of the
// IndexedDB schema. Exit code 1 when a check fails.
//
//   node tests/js/idb-upgrade-from-build.mjs --base /tmp/s18-base-dist [--new js/dist]

import { createServer } from 'node:http'
import { readFile } from 'node:fs/promises'
import { extname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { chromium } from 'playwright-core'
import { ROOT, CHROMIUM_ARGS } from './harness.mjs'

const { values } = parseArgs({
  options: { base: { type: 'string' }, new: { type: 'string', default: join(ROOT, 'js/dist') }, help: { type: 'boolean' } }
})
if (values.help || !values.base) {
  console.log('node tests/js/idb-upgrade-from-build.mjs --base DIR [--new DIR]   (DIR: a js/dist with queen-edge.js)')
  process.exit(values.help ? 0 : 2)
}

const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html', '.map': 'application/json' }
const mounts = { base: resolve(values.base), new: resolve(values.new) }
const server = createServer(async (req, res) => {
  const [, mount, ...rest] = new URL(req.url, 'http://x').pathname.split('/')
  try {
    if (!mount) {
      res.writeHead(200, { 'Content-Type': 'text/html' })
      res.end('<!doctype html><title>upgrade</title>')
      return
    }
    const file = join(mounts[mount], ...rest.filter((p) => p !== '..'))
    const body = await readFile(file)
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] || 'application/octet-stream', 'Cache-Control': 'no-store' })
    res.end(body)
  } catch {
    res.writeHead(404)
    res.end()
  }
})
await new Promise((r) => server.listen(0, '127.0.0.1', r))
const url = `http://127.0.0.1:${server.address().port}/`
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium', args: CHROMIUM_ARGS })
const context = await browser.newContext()
let failures = 0
const check = (ok, what, detail) => {
  console.log(`  ${ok ? 'ok  ' : 'FAIL'}  ${what}${ok ? '' : ': ' + JSON.stringify(detail)}`)
  if (!ok) failures++
}

async function inPage(build, fn, arg) {
  const page = await context.newPage()
  page.on('pageerror', (e) => console.log(`    [${build} pageerror] ${e.message}`))
  await page.goto(url)
  const out = await page.evaluate(async ({ src, build, arg }) => {
    const { Queen } = await import(`/${build}/queen-edge.js`)
    return new Function('Queen', 'arg', `return (${src})(Queen, arg)`)(Queen, arg)
  }, { src: fn.toString(), build, arg })
  await page.close()
  return out
}

const name = `upgrade-${Date.now().toString(36)}`
try {
  const written = await inPage('base', async (Queen, name) => {
    const queen = await Queen.open({ name })
    const pushed = []
    for (let i = 0; i < 40; i++) {
      const queue = i % 2 ? 'a' : 'b'
      const [r] = await queen.queue(queue).partition('p' + (i % 3)).push({ data: { i } })
      pushed.push([queue, r.status])
    }
    // A forwarded request as another tab sends it: recorded with its answer.
    const recorded = await queen.transport.broker.handle('POST', '/api/v1/push', undefined,
      JSON.stringify({ items: [{ queue: 'a', partition: 'p0', payload: { i: 'recorded' } }] }), 'upgrade-req-1')
    const [acked] = await queen.queue('b').batch(1).wait(false).pop()
    await queen.ack(acked, true)
    await queen.queue('c').push({ data: { i: 'leased' } })
    const [leased] = await queen.queue('c').batch(1).wait(false).pop()
    await queen.close()
    return { pushed, recorded: recorded.status, acked: acked.data.i, leased: leased.data.i }
  }, name)
  check(written.pushed.every(([, s]) => s === 'queued') && written.recorded >= 200 && written.recorded < 300, 'the base build wrote its messages', written)

  const read = await inPage('new', async (Queen, name) => {
    const queen = await Queen.open({ name })
    const role = queen.role
    const out = {}
    for (const queue of ['a', 'b', 'c']) {
      const got = []
      for (;;) {
        const batch = await queen.queue(queue).batch(100).wait(false).pop()
        if (batch.length === 0) break
        got.push(...batch.map((m) => m.data.i))
        await queen.ack(batch, true)
      }
      out[queue] = got
    }
    // The recorded request's retry is answered from its record, not run again.
    const retry = await queen.transport.broker.handle('POST', '/api/v1/push', undefined,
      JSON.stringify({ items: [{ queue: 'a', partition: 'p0', payload: { i: 'recorded' } }] }), 'upgrade-req-1')
    const after = await queen.queue('a').batch(100).wait(false).pop()
    const epoch = queen.transport.broker.epoch
    await queen.close()
    return { role, out, retry: retry.status, countA: after.length, epoch }
  }, name)
  // Not acknowledged and not leased by the base build: everything but its acked and its leased message.
  const expectA = [...Array(20).keys()].map((k) => 2 * k + 1)
  const expectB = [...Array(20).keys()].map((k) => 2 * k).filter((i) => i !== written.acked)
  const sorted = (xs) => xs.filter((x) => typeof x === 'number').sort((x, y) => x - y)
  check(read.role === 'writer', 'the new build opens the database as the writer', read.role)
  check(JSON.stringify(sorted(read.out.a)) === JSON.stringify(expectA) && read.out.a.includes('recorded'),
    'queue a: every message, with the recorded push', read.out.a)
  check(written.leased === 'leased' && read.out.c.length === 0, 'queue c: its message is still leased by the base build\'s pop', read.out.c)
  check(JSON.stringify(sorted(read.out.b)) === JSON.stringify(expectB),
    'queue b: every message but the one the base build acknowledged', read.out.b)
  check(read.retry === written.recorded && read.countA === 0, 'the recorded request is answered from its record, not pushed again',
    { retry: read.retry, countA: read.countA })
  check(read.epoch >= 3, 'the epoch is the database version (3 or more)', read.epoch)

  const refused = await inPage('base', async (Queen, name) => {
    try {
      await Queen.open({ name })
      return 'opened'
    } catch (e) {
      return { code: e.code, message: e.message }
    }
  }, name)
  check(refused.code === 'newer_format' && /newer queen-edge/.test(refused.message),
    'the base build facing the upgraded database: newer_format, "written by a newer queen-edge"', refused)
} finally {
  await browser.close()
  server.close()
}
process.exit(failures ? 1 : 0)
