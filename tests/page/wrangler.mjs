// Starts the real worker with `wrangler dev` (workerd) on a free port with a temporary state folder, the
// same way scripts/test.d/70-worker does, and waits until /health answers.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function freePort() {
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

/** Returns {url, stop, logs}. Throws with wrangler's output when it does not become healthy. */
export async function startWorker(root, { readyTimeoutMs = 240_000 } = {}) {
  const persist = mkdtempSync(join(tmpdir(), 'queen-edge-page-'));
  const port = await freePort();
  const args = ['dev', '--ip', '127.0.0.1', '--port', String(port), '--persist-to', persist,
    '--show-interactive-dev-session=false', '--log-level', 'warn'];
  const child = spawn(join(root, 'node_modules', '.bin', 'wrangler'), args, {
    cwd: root,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // own process group: stopping it ends workerd too
  });
  let logs = '';
  child.stdout.on('data', (d) => { logs += d; });
  child.stderr.on('data', (d) => { logs += d; });
  let exited = null;
  const exit = new Promise((resolve) => child.on('exit', (code, signal) => { exited = { code, signal }; resolve(exited); }));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (!exited) {
      try { process.kill(-child.pid, 'SIGTERM'); } catch { /* gone */ }
      const t = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }, 10_000);
      await exit;
      clearTimeout(t);
    }
    rmSync(persist, { recursive: true, force: true });
  };
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`wrangler dev exited before it became healthy (${JSON.stringify(exited)}):\n${logs}`);
    }
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
      if (res.status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`wrangler dev was not healthy after ${readyTimeoutMs} ms (it runs scripts/build-worker first` +
        ` when worker/build is stale: build it before, as scripts/test.d/60-page-playwright does). Output:\n${logs || '(none)'}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { url, stop, logs: () => logs };
}
