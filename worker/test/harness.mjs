// Starts and stops `wrangler dev` (real workerd) for the worker tests.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
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

/** A fresh temporary directory for `--persist-to`; removed by the returned `cleanup`. */
export function tempPersistDir() {
  const dir = mkdtempSync(join(tmpdir(), 'queen-edge-state-'));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Runs `wrangler dev` on the repository's wrangler.toml and waits until GET /health answers
 * `readyStatus` (200 unless a test expects a broker that refuses to start).
 * `vars` are passed as `--var K:V`. Returns { url, stop, logs }.
 */
export async function startWrangler({ persistTo, vars = {}, readyTimeoutMs = 240_000, readyStatus = 200 } = {}) {
  const port = await freePort();
  const args = [
    'dev', '--ip', '127.0.0.1', '--port', String(port),
    '--persist-to', persistTo,
    '--show-interactive-dev-session=false',
    '--log-level', 'warn',
  ];
  for (const [k, v] of Object.entries(vars)) args.push('--var', `${k}:${v}`);
  const wrangler = join(ROOT, 'node_modules', '.bin', 'wrangler');
  const child = spawn(wrangler, args, {
    cwd: ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
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
    if (exited) throw new Error(`wrangler dev exited early (${JSON.stringify(exited)}):\n${logs}`);
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) });
      if (res.status === readyStatus) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`wrangler dev not healthy after ${readyTimeoutMs} ms:\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { url, stop, logs: () => logs };
}

/** fetch + JSON body, with the status attached. */
export async function getJson(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(120_000) });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { nonJson: text }; }
  return { status: res.status, headers: res.headers, body };
}
