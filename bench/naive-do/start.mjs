// Starts the naive one-row-per-message Durable Object queue (naive.js beside this file) on the workerd binary
// the project pins, with its SQLite state in `stateDir`, and waits until it answers /health. The baseline of
// bench/worker-bench.mjs and bench/worker-ab.mjs.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { ROOT, freePort } from '../../worker/test/harness.mjs';

const WORKERD = join(ROOT, 'node_modules', '@cloudflare', 'workerd-linux-64', 'bin', 'workerd');

/** The naive queue as a broker of the benchmarks: `{ name, port, pid, stop }`; `request` is bench/load.mjs's requester. */
export async function startNaive(stateDir, request, name = 'naive DO queue') {
  const dir = mkdtempSync(join(os.tmpdir(), 'queen-edge-naive-'));
  copyFileSync(join(ROOT, 'bench', 'naive-do', 'naive.js'), join(dir, 'naive.js'));
  mkdirSync(stateDir, { recursive: true });
  const port = await freePort();
  writeFileSync(join(dir, 'naive.capnp'), `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (
      compatibilityDate = "2026-11-01",
      modules = [(name = "naive.js", esModule = embed "naive.js")],
      bindings = [(name = "NAIVE", durableObjectNamespace = "NaiveQueue")],
      durableObjectNamespaces = [(className = "NaiveQueue", uniqueKey = "naive-NaiveQueue", enableSql = true)],
      durableObjectStorage = (localDisk = "disk"),
    )),
    (name = "disk", disk = (path = ${JSON.stringify(stateDir)}, writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
`);
  const child = spawn(WORKERD, ['serve', join(dir, 'naive.capnp'), '--experimental'], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((r) => child.on('exit', r));
  for (let i = 0; ; i++) {
    try { if ((await request(port, 'GET', '/health')).status === 200) break; } catch { /* not yet */ }
    if (i > 300) {
      child.kill('SIGKILL');
      throw new Error('naive queue not healthy');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    name, port, pid: child.pid,
    stop: async () => { child.kill('SIGTERM'); await exited; rmSync(dir, { recursive: true, force: true }); },
  };
}
