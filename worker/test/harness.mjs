// Starts and stops the Worker in real workerd for the worker tests: bare workerd through scripts/serve (the
// default, `startWorker`), or `wrangler dev` (`startWrangler`, or QE_WORKER_RUNTIME=wrangler for startWorker).
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Whether process `pid` still runs: it exists and is not a zombie (exited, not yet reaped). */
export function isRunning(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * The workerd process under `pid` (scripts/serve's pid): a grandchild, since scripts/serve runs workerd under
 * a guard (scripts/guard.sh). Throws when there is none.
 */
export function workerdUnder(pid) {
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    let tasks = [];
    try { tasks = readdirSync(`/proc/${p}/task`); } catch { continue; }
    for (const t of tasks) {
      let kids = [];
      try { kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number); } catch { /* gone */ }
      for (const c of kids) {
        try { if (readFileSync(`/proc/${c}/comm`, 'utf8').trim() === 'workerd') return c; } catch { /* gone */ }
        stack.push(c);
      }
    }
  }
  throw new Error(`no workerd under pid ${pid}`);
}

/** A fresh temporary directory for `--persist-to`; removed by the returned `cleanup`. */
export function tempPersistDir() {
  const dir = mkdtempSync(join(tmpdir(), 'queen-edge-state-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Runs `wrangler dev` on the repository's wrangler.toml (free ports for the server and the inspector) and waits
 * until GET /health answers
 * `readyStatus` (200 unless a test expects a broker that refuses to start).
 * `vars` are passed as `--var K:V`. Returns { url, stop, logs }.
 * QE_SHARDS=N runs the Worker with `SHARDS=N` unless `vars` sets SHARDS (the tiers' sharded run).
 */
export async function startWrangler(options = {}) {
  return onFreshPortsWhileTaken(() => startWranglerOnce(options));
}

async function startWranglerOnce({ persistTo, vars = {}, readyTimeoutMs = 240_000, readyStatus = 200 } = {}) {
  vars = withShards(vars);
  const port = await freePort();
  // Wrangler's inspector port too: its default (9229) is taken whenever another wrangler dev runs.
  const inspectorPort = await freePort();
  const args = [
    'dev', '--ip', '127.0.0.1', '--port', String(port), '--inspector-port', String(inspectorPort),
    '--persist-to', persistTo,
    '--show-interactive-dev-session=false',
    '--log-level', 'warn',
  ];
  for (const [k, v] of Object.entries(vars)) args.push('--var', `${k}:${v}`);
  const wrangler = join(ROOT, 'node_modules', '.bin', 'wrangler');
  const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' };
  return spawnAndWait({ command: wrangler, args, env, port, name: 'wrangler dev', readyTimeoutMs, readyStatus });
}

/**
 * Runs the Worker on bare workerd through `scripts/serve` (no wrangler, no inspector port) on a free port with
 * its Durable Object state in `persistTo`, and waits until GET /health answers. `vars` are passed as
 * `--var K:V`; the environment's API_TOKEN* and `.dev.vars` are kept out. scripts/serve and workerd share a
 * process group of their own: `stop()` signals the group. `extraArgs` go to scripts/serve. Returns
 * { url, stop, logs, pid } (pid: scripts/serve's).
 * With QE_WORKER_RUNTIME=wrangler (or `runtime: 'wrangler'`) this is startWrangler.
 * QE_SHARDS=N runs the Worker with `SHARDS=N` unless `vars` sets SHARDS (the tiers' sharded run).
 */
export async function startWorker({ persistTo, vars = {}, readyTimeoutMs = 240_000, extraArgs = [], readyStatus = 200,
  runtime = process.env.QE_WORKER_RUNTIME || 'workerd' } = {}) {
  vars = withShards(vars);
  if (runtime === 'wrangler') return startWrangler({ persistTo, vars, readyTimeoutMs, readyStatus });
  if (runtime !== 'workerd') throw new Error(`QE_WORKER_RUNTIME must be workerd or wrangler, not ${runtime}`);
  return onFreshPortsWhileTaken(() => startServeOnce({ persistTo, vars, readyTimeoutMs, extraArgs, readyStatus }));
}

async function startServeOnce({ persistTo, vars, readyTimeoutMs, extraArgs, readyStatus }) {
  const port = await freePort();
  // --no-build: the tiers run scripts/build-worker first, and the tests need no page module (scripts/build-js).
  const args = [join(ROOT, 'scripts', 'serve'), '--no-build', '--port', String(port), '--state', persistTo];
  for (const [k, v] of Object.entries(vars)) args.push('--var', `${k}:${v}`);
  args.push(...extraArgs);
  const env = { ...process.env, QE_DEV_VARS: '/dev/null', QE_HOST: '127.0.0.1' };
  for (const k of ['API_TOKEN', 'API_TOKEN_READ_WRITE', 'API_TOKEN_READ_ONLY', 'PORT', 'QE_STATE_DIR']) delete env[k];
  return spawnAndWait({ command: 'bash', args, env, port, name: 'scripts/serve', readyTimeoutMs, readyStatus });
}

/** `vars` with SHARDS from QE_SHARDS when it is set and `vars` has none. */
function withShards(vars) {
  return process.env.QE_SHARDS && !('SHARDS' in vars) ? { ...vars, SHARDS: process.env.QE_SHARDS } : vars;
}

/** Starts a server attempts at most, when it fails to start. */
const START_ATTEMPTS = 3;

/**
 * Runs `start` (which picks its ports with freePort) again on new ports while the server it starts exits at
 * once because an address was taken: a port freePort found free can be taken by another tier's server
 * before ours binds it (the tiers run side by side). Any other failure is thrown as it is.
 */
async function onFreshPortsWhileTaken(start) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (e) {
      if (attempt >= START_ATTEMPTS || !/exited early/.test(e.message) || !/address already in use/i.test(e.message)) throw e;
      console.error(`[harness] a port was taken while the server started (attempt ${attempt}); again on new ports`);
    }
  }
}

/** Spawns `command` in its own process group and waits for GET /health on `port`. */
async function spawnAndWait({ command, args, env, port, name, readyTimeoutMs, readyStatus = 200 }) {
  const child = spawn(command, args, {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // own process group, so stop() ends workerd too
  });
  let logs = '';
  child.stdout.on('data', (d) => { logs += d; });
  child.stderr.on('data', (d) => { logs += d; });
  let exited = null;
  const exitPromise = new Promise((resolve) => child.on('exit', (code, signal) => {
    exited = { code, signal };
    resolve(exited);
  }));

  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (exited) return exited;
    try { process.kill(-child.pid, 'SIGTERM'); } catch { /* already gone */ }
    const timer = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }, 10_000);
    const result = await exitPromise;
    clearTimeout(timer);
    return result;
  };

  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited) throw new Error(`${name} exited early (${JSON.stringify(exited)}):\n${logs}`);
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) });
      if (res.status === readyStatus) break;
    } catch (e) {
      // Not listening yet; anything but a refused or reset connection (a bug here) stops the wait.
      if (!(e instanceof TypeError) && e?.name !== 'TimeoutError') throw e;
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${name} not healthy after ${readyTimeoutMs} ms:\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, stop, logs: () => logs, pid: child.pid };
}

/** fetch + JSON body, with the status attached. */
export async function getJson(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(120_000) });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { nonJson: text }; }
  return { status: res.status, headers: res.headers, body };
}

/** The fetch init of a JSON POST of `body` (for `getJson(url, post(body))`). */
export const post = (body) => ({ method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
