// The npm tarball holds exactly what users need (run by scripts/test.d/55-npm-package):
//   - the file list is exactly EXPECTED (no sources, tests, Rust, scripts);
//   - its package.json is publishable (no `private`, no `scripts` / `devDependencies`), ESM, Apache-2.0,
//     and every `exports` target is in the tarball, the wasm files included;
//   - the shipped bundle and wasm are byte-identical to js/dist (what the other tiers tested);
//   - LICENSE is the Apache-2.0 text, README.md is the npm README (js/README.md).
//
//   node tests/js/npm-pack-check.mjs path/to/queen-edge-x.y.z.tgz

import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { ROOT } from './harness.mjs'

const tgz = process.argv[2]
if (!tgz) throw new Error('usage: node tests/js/npm-pack-check.mjs <tarball>')

const EXPECTED = [
  'LICENSE',
  'README.md',
  'js/dist/queen-edge.js',
  'js/dist/queen-edge.js.map',
  'js/dist/bridge.js',
  'js/dist/bridge.js.map',
  'js/dist/queen_edge_bg.wasm',
  'js/dist/queen_edge_views.js',
  'js/dist/queen_edge_views.js.map',
  'js/dist/queen_edge_views_bg.wasm',
  'js/index.d.ts',
  'package.json'
]

let failures = 0
const check = (ok, what) => {
  if (ok) console.log('  ok    ' + what)
  else {
    failures++
    console.log('  FAIL  ' + what)
  }
}

const listed = execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).split('\n').filter(Boolean)
const files = listed.map((f) => f.replace(/^package\//, '')).sort()
const missing = EXPECTED.filter((f) => !files.includes(f))
const extra = files.filter((f) => !EXPECTED.includes(f))
check(missing.length === 0 && extra.length === 0,
  `tarball holds exactly ${EXPECTED.length} files` +
  (missing.length ? `; missing: ${missing.join(', ')}` : '') + (extra.length ? `; extra: ${extra.join(', ')}` : ''))

const dir = mkdtempSync(join(tmpdir(), 'queen-edge-pack-'))
try {
  execFileSync('tar', ['-xzf', tgz, '-C', dir])
  const pkgDir = join(dir, 'package')
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
  const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
  check(pkg.name === 'queen-edge' && pkg.version === root.version, `name and version: ${pkg.name}@${pkg.version}`)
  check(!('private' in pkg), 'publishable: no "private"')
  check(!pkg.scripts && !pkg.devDependencies, 'no scripts or devDependencies (repository tooling)')
  check(!pkg.dependencies || Object.keys(pkg.dependencies).length === 0, 'no runtime dependencies')
  check(pkg.license === 'Apache-2.0', 'license Apache-2.0')
  check(pkg.type === 'module', 'type: module')
  check(pkg.types === './js/index.d.ts' && pkg.exports['.'].types === './js/index.d.ts', 'types declared (top level and exports ".")')

  // Every exports target exists; the wasm files are exported by name.
  const targets = []
  const walk = (value) => {
    if (typeof value === 'string') targets.push(value)
    else if (value && typeof value === 'object') Object.values(value).forEach(walk)
  }
  walk(pkg.exports)
  const unresolved = targets.filter((t) => !(t.includes('*') ? existsSync(join(pkgDir, t.slice(0, t.indexOf('*')))) : existsSync(join(pkgDir, t))))
  check(unresolved.length === 0, `every exports target is in the tarball${unresolved.length ? ': missing ' + unresolved.join(', ') : ''}`)
  check(pkg.exports['./queen_edge_bg.wasm'] === './js/dist/queen_edge_bg.wasm' &&
    pkg.exports['./queen_edge_views_bg.wasm'] === './js/dist/queen_edge_views_bg.wasm',
  'exports include the wasm files (queen-edge/queen_edge_bg.wasm, queen-edge/queen_edge_views_bg.wasm)')

  const same = ['js/dist/queen-edge.js', 'js/dist/bridge.js', 'js/dist/queen_edge_bg.wasm', 'js/dist/queen_edge_views.js', 'js/dist/queen_edge_views_bg.wasm', 'js/index.d.ts']
    .filter((f) => !readFileSync(join(pkgDir, f)).equals(readFileSync(join(ROOT, f))))
  check(same.length === 0, `bundle, wasm and types are the tested build${same.length ? ' (differ: ' + same.join(', ') + ')' : ''}`)

  const license = readFileSync(join(pkgDir, 'LICENSE'), 'utf8')
  check(/Apache License\s+Version 2\.0, January 2004/.test(license) && license.includes('END OF TERMS AND CONDITIONS'),
    'LICENSE is the full Apache-2.0 text')
  const readme = readFileSync(join(pkgDir, 'README.md'), 'utf8')
  check(readme === readFileSync(join(ROOT, 'js/README.md'), 'utf8'), 'README.md is the npm README (js/README.md)')
  for (const topic of ['npm install queen-edge', 'Queen.open', 'consume(', 'serveQueen', 'Queen.connect', 'optimizeDeps', 'webpack', 'esbuild', 'wasmUrl', 'gzipped']) {
    check(readme.includes(topic), `README covers ${topic}`)
  }
  // The size the README states is the size of what ships (gzip -9 of bundle + wasm, as tests/js/bench.mjs
  // measures it), within 3 KB, so the figure cannot go stale by much.
  const gz = (f) => gzipSync(readFileSync(join(pkgDir, f)), { level: 9 }).length / 1024
  const total = gz('js/dist/queen-edge.js') + gz('js/dist/queen_edge_bg.wasm')
  const stated = readme.match(/downloads for `Queen\.open`: \*\*(\d+(?:\.\d+)?) KB gzipped\*\*/)
  check(stated && Math.abs(Number(stated[1]) - total) <= 3,
    `README's download size (${stated ? stated[1] : 'not found'} KB gzipped) matches the package's (${total.toFixed(1)} KB)`)
  console.log(`        tarball: ${tgz} (${(statSync(tgz).size / 1024).toFixed(1)} KB)`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}

if (failures) {
  console.log(`npm package: ${failures} check(s) failed`)
  process.exit(1)
}
console.log('npm package: all checks passed')
