// scripts/serve: the broker self-hosted on bare workerd. Starts the script itself (not through startWorker) on a
// free port and a fresh state directory: /health, the page through the ASSETS binding, push/pop/ack, vars and
// a .dev.vars secret, persistence across a restart, and that SIGTERM (to the script alone) and Ctrl-C (SIGINT
// to the process group, as a terminal sends it) leave no process behind.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, freePort, tempPersistDir, getJson, isRunning } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

/** Pids of the live descendants of `pid` (children, grandchildren...). */
function descendants(pid) {
  const out = [];
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    let kids = [];
    for (const task of safeReaddir(`/proc/${p}/task`)) {
      try {
        kids.push(...readFileSync(`/proc/${p}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
      } catch { /* gone */ }
    }
    kids = kids.filter(isRunning);
    out.push(...kids);
    stack.push(...kids);
  }
  return out;
}
function safeReaddir(dir) { try { return readdirSync(dir); } catch { return []; } }
function comm(pid) { try { return readFileSync(`/proc/${pid}/comm`, 'utf8').trim(); } catch { return '?'; } }

/** Starts scripts/serve and waits for its URL; `health` is the status /health must answer then. */
async function serve({ args = [], env = {}, health: healthStatus = 200 } = {}) {
  const port = await freePort();
  const child = spawn('bash', [join(ROOT, 'scripts', 'serve'), '--no-build', ...args], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), QE_STATE_DIR: state.dir, QE_DEV_VARS: '/dev/null', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  while (!out.includes(`${url}/api/v1`)) {
    assert.ok(Date.now() < deadline, `scripts/serve did not print its URL:\n${out}`);
    assert.ok(child.exitCode === null, `scripts/serve exited:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const health = await getJson(`${url}/health`);
  assert.equal(health.status, healthStatus, 'the URL is printed only once /health answers');
  const workerd = descendants(child.pid).filter((p) => comm(p) === 'workerd');
  assert.equal(workerd.length, 1, `one workerd under scripts/serve: ${descendants(child.pid).map(comm)}`);
  return { url, child, exited, output: () => out };
}

const post = (url, body, headers = {}) => getJson(url, {
  method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body),
});

test('scripts/serve: health, page, push/pop/ack, restart keeps messages, SIGTERM and Ctrl-C leave nothing', { timeout: 240_000 }, async () => {
  let s = await serve({ args: ['--var', 'DEFAULT_SUBSCRIPTION_MODE:all'] });
  try {
    const health = await getJson(`${s.url}/health`);
    assert.equal(health.body.status, 'healthy', JSON.stringify(health.body));

    // The page, as the [assets] directory serves it on Cloudflare.
    const page = await fetch(`${s.url}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type'), /^text\/html/);
    assert.equal(await page.text(), readFileSync(join(ROOT, 'www', 'index.html'), 'utf8'));
    const css = await fetch(`${s.url}/app.css`);
    assert.equal(css.status, 200);
    assert.match(css.headers.get('content-type'), /^text\/css/);
    await css.arrayBuffer();
    const js = await fetch(`${s.url}/js/main.js`);
    assert.match(js.headers.get('content-type'), /^text\/javascript/);
    await js.arrayBuffer();
    const missing = await fetch(`${s.url}/no-such-file.js`);
    assert.equal(missing.status, 404);
    await missing.arrayBuffer();

    const push = await post(`${s.url}/api/v1/push`, {
      items: [1, 2, 3].map((n) => ({ queue: 'serve', partition: 'p', transactionId: `s-${n}`, payload: { n } })),
    });
    assert.equal(push.status, 201, JSON.stringify(push.body));
    assert.deepEqual(push.body.map((r) => r.status), ['queued', 'queued', 'queued']);
    const pop = await getJson(`${s.url}/api/v1/pop/queue/serve?batch=1&wait=false`);
    assert.equal(pop.status, 200, JSON.stringify(pop.body));
    assert.deepEqual(pop.body.messages.map((m) => m.data), [{ n: 1 }]);
    const ack = await post(`${s.url}/api/v1/ack/batch`, {
      acknowledgments: pop.body.messages.map((m) => ({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
      })),
    });
    assert.equal(ack.status, 200);
    assert.ok(ack.body.every((r) => r.success), JSON.stringify(ack.body));
  } finally {
    // SIGTERM to the script alone (as a service manager sends it): its trap must end workerd.
    const workerd = descendants(s.child.pid).filter((p) => comm(p) === 'workerd');
    s.child.kill('SIGTERM');
    const exit = await s.exited;
    assert.equal(exit.code, 143, `scripts/serve exit after SIGTERM: ${JSON.stringify(exit)}\n${s.output()}`);
    for (const p of workerd) assert.ok(!isRunning(p), `workerd ${p} survived SIGTERM of scripts/serve`);
  }

  // Restart on the same state directory, with an admin token from a .dev.vars file.
  const devVars = join(state.dir, '..', `queen-edge-devvars-${process.pid}`);
  writeFileSync(devVars, '# test\nAPI_TOKEN="serve-test-token"\n');
  s = await serve({ env: { QE_DEV_VARS: devVars } });
  try {
    const anon = await getJson(`${s.url}/api/v1/pop/queue/serve?batch=10&wait=false`);
    assert.equal(anon.status, 401, `no token with API_TOKEN set: ${anon.status}`);
    const auth = { Authorization: 'Bearer serve-test-token' };
    const pop = await getJson(`${s.url}/api/v1/pop/queue/serve?batch=10&wait=false`, { headers: auth });
    assert.equal(pop.status, 200, JSON.stringify(pop.body));
    // n=1 was acked before the restart; n=2 and n=3 survived it.
    assert.deepEqual(pop.body.messages.map((m) => m.data), [{ n: 2 }, { n: 3 }]);
  } finally {
    // Ctrl-C in a terminal: SIGINT to the whole foreground process group.
    const workerd = descendants(s.child.pid).filter((p) => comm(p) === 'workerd');
    process.kill(-s.child.pid, 'SIGINT');
    const exit = await s.exited;
    assert.ok(exit.code === 130 || exit.signal === 'SIGINT', `exit after Ctrl-C: ${JSON.stringify(exit)}`);
    for (const p of workerd) assert.ok(!isRunning(p), `workerd ${p} survived Ctrl-C`);
    try { (await import('node:fs')).rmSync(devVars); } catch { /* gone */ }
  }
});

test('scripts/serve and scripts/dev refuse a port another server listens on, naming it, and start nothing', { timeout: 60_000 }, async () => {
  const { createServer } = await import('node:net');
  const other = createServer((socket) => socket.end());
  const port = await new Promise((resolve) => other.listen(0, '127.0.0.1', () => resolve(other.address().port)));
  try {
    for (const script of [['serve', '--no-build'], ['dev']]) {
      const child = spawn('bash', [join(ROOT, 'scripts', script[0]), ...script.slice(1)], {
        cwd: ROOT,
        env: { ...process.env, PORT: String(port), QE_STATE_DIR: state.dir, QE_DEV_VARS: '/dev/null' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d) => { out += d; });
      child.stderr.on('data', (d) => { out += d; });
      const exit = await new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
      assert.equal(exit.code, 1, `scripts/${script[0]} on a taken port: ${JSON.stringify(exit)}\n${out}`);
      assert.match(out, new RegExp(`port ${port} is already in use`), `scripts/${script[0]} names the port:\n${out}`);
      assert.doesNotMatch(out, /is running/, `scripts/${script[0]} did not report running:\n${out}`);
      assert.deepEqual(descendants(child.pid), [], `scripts/${script[0]} left nothing behind`);
    }
  } finally {
    await new Promise((resolve) => other.close(resolve));
  }
});

test('scripts/serve killed with SIGKILL (no trap runs): its workerd ends too and the port is free again', { timeout: 120_000 }, async () => {
  const s = await serve();
  const workerd = descendants(s.child.pid).filter((p) => comm(p) === 'workerd');
  assert.equal(workerd.length, 1);
  // The generated config's directory, from workerd's command line.
  const config = readFileSync(`/proc/${workerd[0]}/cmdline`, 'utf8').split('\0').find((a) => a.endsWith('workerd.capnp'));
  assert.ok(config && existsSync(config), `workerd runs a generated config: ${config}`);
  s.child.kill('SIGKILL'); // the script alone, not its process group
  const exit = await s.exited;
  assert.equal(exit.signal, 'SIGKILL');
  const deadline = Date.now() + 15_000;
  while ((workerd.some(isRunning) || existsSync(config)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.ok(!workerd.some(isRunning), `workerd ${workerd} outlived scripts/serve killed with SIGKILL`);
  assert.ok(!existsSync(join(config, '..')), `the generated config's directory is removed too: ${config}`);
  await assert.rejects(fetch(`${s.url}/health`, { signal: AbortSignal.timeout(5_000) }), TypeError, 'nothing answers on the port');
});

test('scripts/serve: secrets reach workerd through its environment, never the generated config', { timeout: 60_000 }, async () => {
  const devVars = join(state.dir, 'secret.dev.vars');
  writeFileSync(devVars, 'API_TOKEN=tok-from-dev-vars=xy\nQUEEN_ENCRYPTION_KEY=' + 'ab'.repeat(32) + '\n');
  const run = spawnSync('bash', [join(ROOT, 'scripts', 'serve'), '--build-dir', join(ROOT, 'worker', 'build'),
    '--state', join(state.dir, 'not-yet-made'), '--print-config', '--var', 'JWT_SECRET:jwt-from-var'],
  { encoding: 'utf8', env: { ...process.env, QE_DEV_VARS: devVars } });
  assert.equal(run.status, 0, run.stderr);
  for (const secret of ['tok-from-dev-vars=xy', 'ab'.repeat(32), 'jwt-from-var']) {
    assert.ok(!run.stdout.includes(secret), `the config holds no secret value (${secret})`);
  }
  for (const name of ['API_TOKEN', 'QUEEN_ENCRYPTION_KEY', 'JWT_SECRET']) {
    assert.match(run.stdout, new RegExp(`name = "${name}", fromEnvironment = "QE_SECRET_${name}"`), `${name} is bound from the environment`);
  }
  assert.doesNotMatch(run.stderr, /base64|invalid input/, `the secrets decode cleanly:\n${run.stderr}`);
});

test('scripts/serve with a setting the broker cannot read: it says why and keeps serving the 503s', { timeout: 120_000 }, async () => {
  const s = await serve({ args: ['--var', 'DEFAULT_TIMEOUT:abc'], health: 503 });
  try {
    assert.match(s.output(), /\[serve\] the broker cannot start: DEFAULT_TIMEOUT is "abc"; it takes a whole number/);
    const health = await getJson(`${s.url}/health`);
    assert.match(health.body.error, /DEFAULT_TIMEOUT/);
    const push = await getJson(`${s.url}/api/v1/push`, { method: 'POST', body: '{"items":[]}', headers: { 'Content-Type': 'application/json' } });
    assert.equal(push.status, 503);
    assert.match(push.body.error, /broker unavailable: DEFAULT_TIMEOUT/);
  } finally {
    process.kill(-s.child.pid, 'SIGTERM');
    await s.exited;
  }
});

test('scripts/serve: COMMIT_SHARING is on for state on a disk, off on tmpfs, and .dev.vars or --var overrides it', { timeout: 60_000 }, async (t) => {
  const { execFileSync } = await import('node:child_process');
  // The value in the generated config, and the reason serve logs for it.
  const sharing = (state, { devVars = join(ROOT, 'no-such.dev.vars'), more = [] } = {}) => {
    const run = spawnSync('bash', [join(ROOT, 'scripts', 'serve'), '--build-dir', join(ROOT, 'worker', 'build'),
      '--state', join(state, 'not-yet-made'), '--print-config', ...more],
    { encoding: 'utf8', env: { ...process.env, QE_DEV_VARS: devVars } });
    assert.equal(run.status, 0, run.stderr);
    const value = run.stdout.match(/name = "COMMIT_SHARING", text = "([^"]*)"/)[1];
    const logged = run.stderr.match(/\[serve\] COMMIT_SHARING=(\S+) \((.*)\)\n/);
    assert.ok(logged, `serve logs its choice:\n${run.stderr}`);
    assert.equal(logged[1], value, 'the log names the value in the config');
    return { value, why: logged[2] };
  };
  // The file system type as GNU stat names it: a second reading of what serve reads from /proc/mounts.
  const fileSystem = (dir) => execFileSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' }).trim();
  const onTmp = tempPersistDir();
  after(() => onTmp.cleanup());
  const dirs = [onTmp.dir, join(ROOT, 'target'), '/dev/shm'].filter((d) => existsSync(d));
  const seen = new Set();
  for (const dir of dirs) {
    const kind = fileSystem(dir);
    const memory = ['tmpfs', 'ramfs'].includes(kind);
    const picked = sharing(dir);
    assert.equal(picked.value, memory ? 'off' : 'on', `state under ${dir} (${kind})`);
    // stat and /proc/mounts name tmpfs alike; ext4 is "ext2/ext3" to stat.
    const named = /^the state directory is on (\S+)$/.exec(picked.why);
    assert.ok(named && (!memory || named[1] === kind), `the reason names the file system: ${picked.why}`);
    seen.add(memory ? 'off' : 'on');
    for (const value of ['off', 'on', 'auto']) {
      assert.deepEqual(sharing(dir, { more: ['--var', `COMMIT_SHARING:${value}`] }), { value, why: '--var' });
    }
  }
  if (seen.size < 2) t.diagnostic(`only ${[...seen]} was picked here: no directory of the other kind (${dirs.join(', ')})`);
  // .dev.vars wins over the file system's pick, and --var over .dev.vars.
  const devVars = join(onTmp.dir, 'sharing.dev.vars');
  writeFileSync(devVars, 'COMMIT_SHARING=auto\n');
  assert.deepEqual(sharing(onTmp.dir, { devVars }), { value: 'auto', why: devVars });
  assert.deepEqual(sharing(join(ROOT, 'target'), { devVars, more: ['--var', 'COMMIT_SHARING:off'] }), { value: 'off', why: '--var' });
});
