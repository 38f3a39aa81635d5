// Serves one single-file JavaScript Durable Object class on the workerd binary the project pins: its own
// process and config, SQLite state in `stateDir`, one `localhost` port. The naive queue of the worker
// benchmarks (bench/naive-do/start.mjs) and the statement shapes of bench/do-sql-shapes.mjs run this way.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { basename, join } from 'node:path';
import { ROOT, freePort } from '../worker/test/harness.mjs';

const WORKERD = join(ROOT, 'node_modules', '@cloudflare', 'workerd-linux-64', 'bin', 'workerd');

/**
 * Starts workerd on `file` (an ES module whose default export routes to the class `className`, reached through
 * the binding `binding`) and waits until `ready(port)` resolves true, trying for 30 s. `v8Flags` go to the
 * config's `v8Flags` (e.g. `--perf-basic-prof` for `perf`).
 * Returns `{ port, pid, stop }`; `stop` ends workerd and removes its config (not `stateDir`).
 */
export async function startJsDurableObject({ file, className, binding, stateDir, ready, v8Flags = [] }) {
  const module = basename(file);
  const dir = mkdtempSync(join(os.tmpdir(), `queen-edge-${module.replace(/\.m?js$/, '')}-`));
  copyFileSync(file, join(dir, module));
  mkdirSync(stateDir, { recursive: true });
  const port = await freePort();
  writeFileSync(join(dir, 'config.capnp'), `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (
      compatibilityDate = "2026-11-01",
      modules = [(name = ${JSON.stringify(module)}, esModule = embed ${JSON.stringify(module)})],
      bindings = [(name = ${JSON.stringify(binding)}, durableObjectNamespace = ${JSON.stringify(className)})],
      durableObjectNamespaces = [(className = ${JSON.stringify(className)}, uniqueKey = "${binding.toLowerCase()}-${className}", enableSql = true)],
      durableObjectStorage = (localDisk = "disk"),
    )),
    (name = "disk", disk = (path = ${JSON.stringify(stateDir)}, writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],${v8Flags.length ? `
  v8Flags = [${v8Flags.map((f) => JSON.stringify(f)).join(', ')}],` : ''}
);
`);
  const child = spawn(WORKERD, ['serve', join(dir, 'config.capnp'), '--experimental'], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((r) => child.on('exit', r));
  const stop = async () => { child.kill('SIGTERM'); await exited; rmSync(dir, { recursive: true, force: true }); };
  for (let i = 0; ; i++) {
    try { if (await ready(port)) break; } catch { /* not yet */ }
    if (i > 300) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`${className} (${module}) on workerd did not become ready`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { port, pid: child.pid, stop };
}
