// What the worker benchmarks share: a keep-alive HTTP client for a local port, the CPU time of a process, the
// push and pop+ack load, a broker's storage counters, the arithmetic of alternating rounds, and `perf` records.
import http from 'node:http';
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, readdirSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * A request function over `connections` keep-alive sockets to 127.0.0.1:
 * `request(port, method, path, body)` resolves to `{ status, body }` (body as text); `request.close()` ends
 * the sockets.
 */
export function requester(connections) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
  // A kept-alive socket that the server closed while it sat idle fails the next request sent on it with
  // ECONNRESET before the server read it. workerd closes a connection idle for about 15 s (one broker's
  // connections wait that long while the others are measured); when the close arrives while this process is
  // busy (touchFreeMemory blocks it for seconds), the pool still holds every closed socket, and a request
  // sent again through the pool meets the next one. So it is sent again once on a connection of its own, as
  // Node's http documentation advises for `request.reusedSocket`.
  const request = (port, method, path, body, retried = false) =>
    new Promise((resolve, reject) => {
      const headers = body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {};
      const options = { host: '127.0.0.1', port, method, path, agent: retried ? false : agent, headers };
      const req = http.request(options, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      });
      req.on('error', (e) => {
        if (!retried && req.reusedSocket && e.code === 'ECONNRESET') {
          resolve(request(port, method, path, body, true));
        } else {
          reject(new Error(`${method} 127.0.0.1:${port}${path}${retried ? ' (sent again)' : ''}: ${e.message}`, { cause: e }));
        }
      });
      req.end(body);
    });
  request.close = () => agent.destroy();
  return request;
}

/**
 * Memory the kernel may hand to the brokers' files, touched before a measurement: writes `mb` MiB to a file in
 * /dev/shm and deletes it. Returns the seconds it took (0 when `mb` is 0).
 *
 * Why (docs/decisions.md, "A growing database on a fresh VM (session 23)"): on this machine, a Firecracker VM,
 * the first write to a page of memory the guest has not touched lately is slow (a fault taken on the host,
 * invisible to the guest and charged to whatever touched the page). A broker whose database file grows (queen-edge keeps consumed messages until retention, as
 * Queen does) meets such pages at every checkpoint; the naive queue deletes what is acked and its next
 * pushes reuse those pages. Freed pages go to the front of the kernel's free lists, so touching some just
 * before a measurement measures both as a server whose memory is in use would run. Set `mb` to 0 to measure
 * the VM as it is.
 */
export function touchFreeMemory(mb) {
  if (!(mb > 0)) return 0;
  const t0 = performance.now();
  const path = `/dev/shm/queen-edge-touch-${process.pid}`;
  const chunk = Buffer.alloc(1 << 20, 1);
  const fd = openSync(path, 'w');
  try {
    for (let i = 0; i < mb; i++) writeSync(fd, chunk);
  } finally {
    closeSync(fd);
    unlinkSync(path);
  }
  return (performance.now() - t0) / 1000;
}

/** CPU time (ns) of process `pid`, all its threads, from /proc/PID/task/TID/schedstat. */
export function cpuNs(pid) {
  let total = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try { total += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]); } catch { /* gone */ }
  }
  return total;
}

/**
 * The load of the worker benchmarks over `request` (a `requester`): `connections` clients, `partitions`
 * partitions, payloads of `payloadBytes` as JSON text. A broker `b` is `{ name, port, pid }`; each run returns
 * `{ messages, elapsed, msgsPerSec, cpuUsPerMsg, latencies }` (workerd CPU of `b.pid` over the run, per message;
 * `latencies`: each request's time in ms). An answer other than the expected status throws.
 * - `push(b, queue, batch, seconds)`: each client sends `batch` messages to one partition (round robin) per
 *   request, for `seconds`.
 * - `popAck(b, queue, batch, available, seconds)`: each client pops `batch` queue-wide (`wait=false`) and acks
 *   what it got in one `/ack/batch`, until `available` messages are acked or `seconds` pass; an empty pop
 *   waits 1 ms. Its result adds `empty` (empty pops) and `drained` (all `available` acked in time); its
 *   `latencies` hold the pops' and the acks' alike.
 */
export function loadDriver({ request, connections, partitions, payloadBytes }) {
  const payload = (n) => {
    const base = JSON.stringify({ n, pad: '' }).length;
    return { n, pad: 'x'.repeat(Math.max(0, payloadBytes - base)) };
  };
  const measure = async (b, fn) => {
    const latencies = [];
    const timed = async (...args) => {
      const t = performance.now();
      const res = await request(...args);
      latencies.push(performance.now() - t);
      return res;
    };
    const cpu0 = cpuNs(b.pid);
    const t0 = performance.now();
    const r = await fn(timed);
    const elapsed = (performance.now() - t0) / 1000;
    const cpu = cpuNs(b.pid) - cpu0;
    return { ...r, elapsed, msgsPerSec: r.messages / elapsed, cpuUsPerMsg: cpu / 1000 / Math.max(1, r.messages), latencies };
  };
  const clients = (fn) => Promise.all(Array.from({ length: connections }, fn));

  const push = (b, queue, batch, seconds) => measure(b, async (timed) => {
    let n = 0;
    let reqNo = 0;
    let messages = 0;
    const deadline = performance.now() + seconds * 1000;
    await clients(async () => {
      while (performance.now() < deadline) {
        const partition = `p${reqNo++ % partitions}`;
        const items = [];
        for (let k = 0; k < batch; k++) {
          const i = n++;
          items.push({ queue, partition, transactionId: `${queue}-${i}`, payload: payload(i) });
        }
        const res = await timed(b.port, 'POST', '/api/v1/push', JSON.stringify({ items }));
        if (res.status !== 201) throw new Error(`${b.name} push ${res.status}: ${res.body.slice(0, 200)}`);
        messages += batch;
      }
    });
    return { messages };
  });

  const popAck = (b, queue, batch, available, seconds) => measure(b, async (timed) => {
    let messages = 0;
    let empty = 0;
    const deadline = performance.now() + seconds * 1000;
    await clients(async () => {
      while (performance.now() < deadline && messages < available) {
        const pop = await timed(b.port, 'GET', `/api/v1/pop/queue/${queue}?batch=${batch}&wait=false`);
        if (pop.status === 204) {
          empty++;
          await new Promise((r) => setTimeout(r, 1));
          continue;
        }
        if (pop.status !== 200) throw new Error(`${b.name} pop ${pop.status}: ${pop.body.slice(0, 200)}`);
        const acknowledgments = JSON.parse(pop.body).messages.map((m) => ({
          transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
        }));
        const ack = await timed(b.port, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments }));
        if (ack.status !== 200) throw new Error(`${b.name} ack ${ack.status}: ${ack.body.slice(0, 200)}`);
        messages += JSON.parse(ack.body).filter((r) => r.success).length;
      }
    });
    return { messages, empty, drained: messages >= available };
  });

  return { push, popAck };
}

/**
 * `run()`'s result (a `loadDriver` run on broker `b`) with what `b`'s storage counters (`GET /api/v1/status`,
 * `storage`) moved by meanwhile: `rowsPerMsg`, rows written per message, and `commitsPer100`, Durable Object
 * commits per 100 messages (null for a broker that does not count commits: the naive queue commits once per
 * request). The counters are read outside the run, so their requests are not in its CPU time.
 */
export async function withStorage(request, b, run) {
  const counters = async () => JSON.parse((await request(b.port, 'GET', '/api/v1/status')).body).storage;
  const s0 = await counters();
  const r = await run();
  const s1 = await counters();
  const m = Math.max(1, r.messages);
  return {
    ...r,
    rowsPerMsg: (s1.rowsWritten - s0.rowsWritten) / m,
    commitsPer100: s0.commits === undefined ? null : (100 * (s1.commits - s0.commits)) / m,
  };
}

// ---------------------------------------------------------------- rounds
/** The order in which `items` take their turn in round `round`: rotated by one each round, so that in
 * alternating rounds each goes first (and after each of the others) alike. */
export const roundOrder = (items, round) => items.map((_, i) => items[(i + round) % items.length]);

/** The median of `xs` (of an even count, the mean of the middle two). */
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
};

/** The `p`-th percentile of `xs` (nearest rank), or null for none. */
export const percentile = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** Paired rounds of two brokers: the median of the per-round ratios `a[i] / b[i]`, and in how many rounds `a`
 * was ahead (`higherIsBetter`: a above b; otherwise a below b). */
export function pairedRatio(a, b, higherIsBetter = true) {
  const ratios = a.map((x, i) => x / b[i]);
  return { ratio: median(ratios), ahead: ratios.filter((r) => (higherIsBetter ? r > 1 : r < 1)).length, rounds: ratios.length };
}

/**
 * The builds named by `--build NAME=DIR` arguments (at least one), each `{ name, dir, vars, v8Flags }` with `dir` absolute;
 * `--var NAME:VAR=VALUE` (repeatable) sets a Worker variable for build NAME only (scripts/serve's `--var`), so one
 * build directory can run under several names with different settings, e.g. `--build off=DIR --var
 * off:COMMIT_SHARING=off --build on=DIR --var on:COMMIT_SHARING=on`. With `{ v8Flags: true }` (a tool that
 * passes them to its workerd), `--v8-flag NAME:FLAG` (repeatable) adds a V8 flag to build NAME's `v8Flags`; a tool
 * that does not refuses the option rather than ignore it.
 */
export function buildsFromArgs(argv, { v8Flags: takesV8Flags = false } = {}) {
  const builds = argv.flatMap((a, i) => (a === '--build' ? [argv[i + 1]] : [])).map((b) => {
    const at = b.indexOf('=');
    if (at < 1) throw new Error(`--build wants NAME=DIR, got ${b}`);
    return { name: b.slice(0, at), dir: resolve(b.slice(at + 1)), vars: {}, v8Flags: [] };
  });
  if (!builds.length) throw new Error('give at least one --build NAME=DIR');
  for (const v of argv.flatMap((a, i) => (a === '--var' ? [argv[i + 1]] : []))) {
    const m = /^([^:]+):([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(v ?? '');
    if (!m) throw new Error(`--var wants NAME:VAR=VALUE, got ${v}`);
    const build = builds.find((b) => b.name === m[1]);
    if (!build) throw new Error(`--var ${v}: no --build named ${m[1]}`);
    build.vars[m[2]] = m[3];
  }
  for (const f of argv.flatMap((a, i) => (a === '--v8-flag' ? [argv[i + 1]] : []))) {
    if (!takesV8Flags) throw new Error('this tool does not take --v8-flag (bench/worker-ab.mjs does)');
    const at = (f ?? '').indexOf(':');
    const build = builds.find((b) => b.name === f?.slice(0, at));
    if (at < 1 || !build) throw new Error(`--v8-flag wants NAME:FLAG with NAME a --build, got ${f}`);
    build.v8Flags.push(f.slice(at + 1));
  }
  return builds;
}

/** A client of workerd's V8 inspector at `addr` (`scripts/serve --inspector`): `send(method, params)` answers
 * with the result of one DevTools protocol call; `target` names the isolate it attached to. */
export async function inspector(addr) {
  const list = await (await fetch(`http://${addr}/json`)).json();
  const target = list.find((t) => t.id === 'main' || /\/main$/.test(t.webSocketDebuggerUrl)) ?? list[0];
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let id = 0;
  const pending = new Map();
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.id && pending.has(msg.id)) {
      const { resolve, reject } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) reject(new Error(JSON.stringify(msg.error)));
      else resolve(msg.result);
    }
  };
  const send = (method, params = {}) => new Promise((resolve, reject) => {
    const n = ++id;
    pending.set(n, { resolve, reject });
    ws.send(JSON.stringify({ id: n, method, params }));
  });
  return { send, close: () => ws.close(), target: target.id ?? target.title };
}

/**
 * Runs `fn` while `perf record` (with `perfArgs`, e.g. `['-F', '1999', '-g']`) records process `pid` into
 * `data`; resolves to what `fn` resolved to once perf has written its file. Throws when perf fails.
 */
export async function whilePerfRecords(pid, perfArgs, data, fn) {
  const perf = spawn('perf', ['record', ...perfArgs, '-p', String(pid), '-o', data], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  perf.stderr.on('data', (c) => { err += c; });
  const exited = new Promise((r) => perf.on('exit', r));
  await new Promise((r) => setTimeout(r, 300)); // perf attaches
  let result;
  try {
    result = await fn();
  } finally {
    perf.kill('SIGINT');
  }
  const code = await exited;
  if (code !== 0 && code !== null) throw new Error(`perf record exited ${code}: ${err}`);
  return result;
}

/**
 * `whilePerfRecords` with the sampling the perf tools use (1999 Hz, call graphs) into `DIR/NAME.perf.data`, then
 * its samples as `perf script` text in `DIR/NAME.txt` (thread, period, address, symbol: what
 * bench/worker-perf-split.py reads). Resolves to `fn`'s result and the text's path.
 */
export async function perfScriptWhile(pid, dir, name, fn) {
  const data = join(dir, `${name}.perf.data`);
  const result = await whilePerfRecords(pid, ['-F', '1999', '-g'], data, fn);
  const text = join(dir, `${name}.txt`);
  writeFileSync(text, execFileSync('perf', ['script', '-F', 'tid,period,ip,sym', '-i', data], { maxBuffer: 1 << 30 }));
  return { result, text };
}
