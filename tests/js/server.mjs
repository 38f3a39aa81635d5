// A static file server for the browser tests (no dependencies).
//
//   /vendor/queen-edge/*  -> www/vendor/queen-edge/ (the built bundle + wasm + source map, staged by
//                            scripts/build-js)
//   everything else       -> tests/js/fixtures/
//
// `startServer()` listens on 127.0.0.1 on a free port and resolves to { url, close }. Run directly
// (`node tests/js/server.mjs [port]`) to poke at the fixtures by hand.

import { createServer } from 'node:http'
import { readFile, stat } from 'node:fs/promises'
import { extname, join, normalize, resolve, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, '../..')
const MOUNTS = [
  ['/vendor/queen-edge/', join(root, 'www/vendor/queen-edge')],
  ['/', join(here, 'fixtures')]
]
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.map': 'application/json',
  '.ts': 'text/plain; charset=utf-8',
  '.css': 'text/css'
}

async function resolveFile(pathname) {
  for (const [prefix, dir] of MOUNTS) {
    if (!pathname.startsWith(prefix)) continue
    const rel = normalize(decodeURIComponent(pathname.slice(prefix.length)) || 'index.html')
    if (rel.startsWith('..')) return null
    let file = join(dir, rel)
    try {
      const s = await stat(file)
      if (s.isDirectory()) file = join(file, 'index.html')
      await stat(file)
      return file
    } catch {
      return null
    }
  }
  return null
}

export function startServer(port = 0) {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://localhost')
    const file = await resolveFile(url.pathname)
    const headers = {
      // Sandboxed (opaque-origin) frames in the tests load the module cross-origin.
      'Access-Control-Allow-Origin': '*',
      'Cache-Control': 'no-store'
    }
    if (!file) {
      res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' })
      res.end('not found: ' + url.pathname)
      return
    }
    const body = await readFile(file)
    res.writeHead(200, { ...headers, 'Content-Type': TYPES[extname(file)] || 'application/octet-stream' })
    res.end(body)
  })
  return new Promise((resolvePromise) => {
    server.listen(port, '127.0.0.1', () => {
      const { port: actual } = server.address()
      resolvePromise({
        url: `http://127.0.0.1:${actual}`,
        close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()) })
      })
    })
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { url } = await startServer(Number(process.argv[2] || 0))
  console.log('serving', url)
}
