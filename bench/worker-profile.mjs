// Where a push and a pop+ack spend their time inside the Broker Durable Object (100-message requests, and
// 1-message requests for the fixed per-request cost):
// scripts/bench-worker --profile runs this. It serves the built Worker (worker/build; its wasm keeps its name
// section, so V8 reports Rust function names) on bare workerd with the V8 inspector on (scripts/serve
// --inspector), takes a V8 CPU profile (sampling every 100 us) of
// the workerd isolate while one client sends 100-message requests one after another, and sorts every sample
// into a phase by the functions on its stack. Writes a markdown section to --out.
//
//   node bench/worker-profile.mjs [--out FILE] [--build-dir DIR (serve another build of the Worker)]
//   QE_PROFILE_REQUESTS=200 (per profile of 100-message requests; 1-message requests run 5 times as many)
//   QE_PROFILE_SAVE=DIR (also write the .cpuprofile files: DevTools opens them)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { freePort, startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { cpuNs, inspector, requester } from './load.mjs';

const argv = process.argv.slice(2);
const OUT = argv.includes('--out') ? argv[argv.indexOf('--out') + 1] : null;
const GIVEN_BUILD = argv.includes('--build-dir') ? argv[argv.indexOf('--build-dir') + 1] : null;
const REQUESTS = Number(process.env.QE_PROFILE_REQUESTS || 200);
const INTERVAL_US = Number(process.env.QE_PROFILE_INTERVAL_US || 100);
// (batch, payload bytes) per profile: the 100-message requests of issue 11, then 1-message requests, whose
// cost is the fixed per-request part.
// QE_PROFILE_CASES=100:64,1:64 picks others.
const CASES = (process.env.QE_PROFILE_CASES || '100:64,100:1024,1:64').split(',').map((c) => c.split(':').map(Number));

// ---------------------------------------------------------------- load
const request = requester(1);
function payload(size, n) {
  const base = JSON.stringify({ n, pad: '' }).length;
  return { n, pad: 'x'.repeat(Math.max(0, size - base)) };
}

// ---------------------------------------------------------------- phases
// A sample belongs to the first phase below (in this order) that has a frame on the sample's stack: so
// allocation inside parsing counts as parsing, and SQLite statements run from a commit count as the commit.
// Markers match V8's function names: Rust symbols from the wasm name section, the glue's JS names, and the
// runtime's own JS-visible builtins (Response, Headers, transactionSync...).
const PHASES = [
  ['deflate (segment compression, miniz_oxide)', /^miniz_oxide::deflate|miniz_oxide::deflate::/],
  ['inflate (segment decode, miniz_oxide)', /^miniz_oxide::inflate|miniz_oxide::inflate::/],
  ['SQLite commit (DoStore: one statement, or transactionSync + statements)', /DoStore::run(_in_transaction)?::|DoStore.*commit|^transactionSync$/],
  ['SQLite reads (DoStore scans)', /queen_edge_worker::do_store::|queen_edge_worker::do_layout::/],
  ['parse request JSON (http::wire, serde_json::de)', /queen_edge::http::wire::|serde_json::de::|serde_json::value::de::/],
  ['build reply JSON (http::render, serde_json::ser)', /queen_edge::http::render::|serde_json::ser::|serde_json::value::ser::|queen_edge::http::error::json_response|queen_edge::http::handlers::ack_answer/],
  ['drop serde_json::Value trees', /drop_in_place<serde_json::value::Value>/],
  ['core apply (core::*, engine: state, segments, records)', /queen_edge::core::|queen_edge::engine::/],
  ['entry Worker (settings, precheck, forward to the object: entry_precheck, forward_to_object)', /queen_edge_worker::fetch::|queen_edge_worker::entry::|queen_edge_worker::sync_auth::|_worker_fetch::fetch|fetch_fetch_glue|new_with_opt_readable_stream|^fetch$/],
  ['object reply as a workerd Response (respond: Headers, body copy, new Response)', /worker::response::|queen_edge_worker::respond::|queen_edge_worker::frame::|queen_edge_worker::broker::api_response|worker::headers::|^toResponse$|^Response$|^Headers$|^append$|^set$|^has$/],
  ['read request into Rust (url, headers, body)', /queen_edge_worker::broker::read_request|worker::request::|^arrayBuffer$|^bytes$|^get$/],
  ['HTTP layer, rest (route, auth, query)', /queen_edge::http::/],
  ['async glue (Rust futures <-> JS promises)', /js_sys::futures|wasm_bindgen_futures::|queen_edge_worker::run_now::|wasm_bindgen::convert::closures|queueMicrotask/],
  ['allocator, rest (malloc/free)', /dlmalloc|__rdl_|__rust_alloc|__rust_dealloc|__rust_realloc|RawVec/],
  ['object class, rest (worker/shim.js: request parts, the serve call)', /^serveObjectRequest$|BrokerObject::serve/],
];

function analyse(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (id) => byId.get(id).callFrame.functionName || '(anonymous)';
  const phaseOf = new Map();
  const classify = (leaf) => {
    if (phaseOf.has(leaf)) return phaseOf.get(leaf);
    const stack = [];
    for (let cur = leaf; cur != null; cur = parent.get(cur)) stack.push(name(cur));
    let phase = null;
    const leafName = stack[0];
    if (leafName === '(program)') phase = 'workerd native, outside JS and wasm ((program))';
    else if (leafName === '(garbage collector)') phase = 'V8 garbage collector';
    else if (stack.length <= 2) phase = 'workerd native, no JS frame (HTTP, subrequest, I/O)';
    for (const [p, re] of PHASES) {
      if (phase) break;
      if (stack.some((n) => re.test(n))) phase = p;
    }
    phase ??= 'other JS/wasm';
    phaseOf.set(leaf, phase);
    return phase;
  };
  const selfByName = new Map();
  const phaseTime = new Map();
  let busy = 0;
  let alloc = 0;
  // Each sample counts as one unit, whatever the gap before the next: after a long gap (the thread was
  // preempted or waiting) V8 still records one sample, so counts follow CPU time where summed gaps follow the
  // wall clock.
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = 1;
    const id = profile.samples[i];
    const leaf = name(id);
    if (leaf === '(idle)') continue;
    busy += dt;
    const phase = classify(id);
    phaseTime.set(phase, (phaseTime.get(phase) ?? 0) + dt);
    selfByName.set(leaf, (selfByName.get(leaf) ?? 0) + dt);
    if (/dlmalloc|__rdl_|__rust_alloc|__rust_dealloc|__rust_realloc|RawVec|memcpy|memmove/.test(leaf)) alloc += dt;
  }
  return { busy, alloc, phaseTime, selfByName };
}

// ---------------------------------------------------------------- CPU of workerd (all threads, ns)

// ---------------------------------------------------------------- main
const inspectPort = await freePort();
// State on tmpfs when there is one: the profile is about CPU, not the disk.
const state = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'queen-edge-profile-state-'));
const w = await startWorker({ persistTo: state, extraArgs: [...(GIVEN_BUILD ? ['--build-dir', GIVEN_BUILD] : []), '--inspector', `127.0.0.1:${inspectPort}`] });
const port = Number(new URL(w.url).port);
const workerdPid = workerdUnder(w.pid);
// On a loaded machine the isolate thread and V8's sampler thread wait for a core, and samples get lost.
// Raising workerd's priority (every thread; QE_PROFILE_NICE, default -10, needs root; 0 to skip) keeps more.
const NICE = Number(process.env.QE_PROFILE_NICE ?? -10);
let reniced = false;
const renice = () => {
  if (NICE === 0) return;
  try {
    // Every thread, V8's sampler thread too (it exists once the profiler has started: call again then).
    for (const t of readdirSync(`/proc/${workerdPid}/task`)) execFileSync('renice', ['-n', String(NICE), '-p', t], { stdio: 'ignore' });
    reniced = true;
  } catch { console.log('[profile] could not renice workerd (not root?): fewer samples on a loaded machine'); }
};
renice();
const ins = await inspector(`127.0.0.1:${inspectPort}`);
const load0 = os.loadavg();
const results = [];
const stateFs = state.startsWith('/dev/shm') ? 'tmpfs' : 'disk';
try {
  await ins.send('Profiler.enable');
  await ins.send('Profiler.setSamplingInterval', { interval: INTERVAL_US });
  for (const [BATCH, size] of CASES) {
    const queue = `prof-${BATCH}-${size}`;
    const count = BATCH === 1 ? REQUESTS * 5 : REQUESTS;
    let n = 0;
    const pushBody = () => {
      const items = [];
      const partition = `p${Math.floor(n / BATCH) % 10}`;
      for (let k = 0; k < BATCH; k++) {
        const i = n++;
        items.push({ queue, partition, transactionId: `${queue}-${i}`, payload: payload(size, i) });
      }
      return JSON.stringify({ items });
    };
    const pushes = async (count) => {
      for (let i = 0; i < count; i++) {
        const r = await request(port, 'POST', '/api/v1/push', pushBody());
        if (r.status !== 201) throw new Error(`push ${r.status} ${r.body}`);
      }
    };
    const popAcks = async (count) => {
      for (let i = 0; i < count; i++) {
        const pop = await request(port, 'GET', `/api/v1/pop/queue/${queue}?batch=${BATCH}&wait=false`);
        if (pop.status !== 200) throw new Error(`pop ${pop.status} ${pop.body}`);
        const acknowledgments = JSON.parse(pop.body).messages.map((m) => ({
          transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
        }));
        const ack = await request(port, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments }));
        if (ack.status !== 200) throw new Error(`ack ${ack.status} ${ack.body}`);
      }
    };
    // The same sequence twice: once without the profiler (client wall time and workerd CPU per request), once
    // with it (where the time goes). Warm-up first: the object opens its engine, the JIT tiers up.
    await pushes(20);
    for (const [op, run] of [['push', pushes], ['pop+ack', popAcks]]) {
      const cpu0 = cpuNs(workerdPid);
      let t0 = performance.now();
      await run(count);
      const plainWall = (performance.now() - t0) / count;
      const plainCpu = (cpuNs(workerdPid) - cpu0) / 1e6 / count;
      await ins.send('Profiler.start');
      renice();
      const cpu1 = cpuNs(workerdPid);
      t0 = performance.now();
      await run(count);
      const profWall = (performance.now() - t0) / count;
      const profCpu = (cpuNs(workerdPid) - cpu1) / 1e6 / count;
      const { profile } = await ins.send('Profiler.stop');
      if (process.env.QE_PROFILE_SAVE) {
        writeFileSync(join(process.env.QE_PROFILE_SAVE, `${op === 'push' ? 'push' : 'popack'}-${BATCH}-${size}.cpuprofile`), JSON.stringify(profile));
      }
      results.push({ op, batch: BATCH, size, count, plainWall, plainCpu, profWall, profCpu, ...analyse(profile) });
      console.log(`[profile] ${op} batch ${BATCH} ${size} B: ${plainWall.toFixed(2)} ms per request at the client, workerd CPU `
        + `${plainCpu.toFixed(2)} ms per request (without the profiler; ${profWall.toFixed(2)} ms with it)`);
    }
  }
} finally {
  ins.close();
  await w.stop();
  request.close();
  rmSync(state, { recursive: true, force: true });
}
const load1 = os.loadavg();

// ---------------------------------------------------------------- markdown
const f2 = (v) => v.toFixed(2);
const md = [];
md.push('<!-- worker-profile:begin -->');
md.push('## Where the time goes inside the Durable Object (push and pop+ack, 100-message and 1-message requests)');
md.push('');
md.push(`Written by \`scripts/bench-worker --profile\`, measured ${new Date().toISOString().slice(0, 16)}Z (load average `
  + `${load0[0].toFixed(1)} at the start, ${load1[0].toFixed(1)} at the end, on 2 cores shared with other work). `
  + 'queen-edge on bare workerd (`scripts/serve`), one client sending requests one after another to '
  + `10 partitions, per batch and payload size: 20 warm-up pushes, then ${REQUESTS} pushes and ${REQUESTS} pop+ack pairs `
  + `of 100 messages (pop 100, ack them in one \`/ack/batch\`; ${REQUESTS * 5} of each for 1-message requests) without `
  + 'the profiler (client time and workerd CPU per request), then the same '
  + `again under a V8 CPU profile of the Worker's isolate (sampling every ${INTERVAL_US} us, through workerd's `
  + 'inspector: `scripts/serve --inspector`). The entry Worker and the Broker object run in that one isolate. The '
  + 'shipped wasm keeps its name section, so samples name Rust functions. Durable Object state on '
  + `${stateFs}${reniced ? `; workerd reniced to ${NICE} so that it is not preempted by other work` : ''}.`);
md.push('');
md.push('Each sample goes to the first phase of the list below that has a frame on its stack (so allocation '
  + 'inside parsing counts as parsing, SQLite statements run by a commit as the commit, a drop of the request\'s '
  + 'or reply\'s `serde_json::Value` tree outside those functions as "drop"). Native time that workerd spends '
  + 'inside a call from JS (a SQLite statement, `new Response`) counts for the caller\'s phase; time with no JS '
  + 'frame at all (HTTP parsing, the entry Worker\'s subrequest to the object, I/O) is "workerd native". The '
  + 'shares count samples, not the time between them: on this loaded machine the gap after a sample is often '
  + 'many intervals long (the thread was preempted), and V8 still records one sample for it, so summing the gaps '
  + 'would hand the wall clock to whichever frame happened to be on the stack. Samples V8 marks idle are left '
  + 'out, and workerd\'s work outside the isolate (other threads, much of the HTTP and commit work) is not '
  + 'sampled at all: the "non-idle samples per request" below, at one per 100 us, cover only part of the workerd '
  + 'CPU, so the shares describe the isolate\'s part (`perf` on workerd shows the rest: docs/decisions.md, "The '
  + 'Worker\'s request path, leaner"). "est. ms" = share x the workerd CPU per request measured without the '
  + 'profiler: it spreads all of that CPU over the sampled phases, so it overstates each (the sampler itself costs '
  + 'CPU too: compare the two CPU figures).');
md.push('');
for (const r of results) {
  md.push(`### ${r.op}, ${r.batch === 1 ? '1 message' : `${r.batch} messages`} per request, ${r.size}-byte payloads`);
  md.push('');
  md.push(`Without the profiler: ${f2(r.plainWall)} ms per request at the client, workerd CPU ${f2(r.plainCpu)} ms `
    + `per request (${f2((r.plainCpu * 1000) / r.batch)} us per message). With it: ${f2(r.profWall)} ms at the client, `
    + `workerd CPU ${f2(r.profCpu)} ms, ${(r.busy / r.count).toFixed(1)} non-idle samples per request.`);
  md.push('');
  md.push('| phase | share of non-idle samples | est. ms per request |');
  md.push('|---|---:|---:|');
  for (const [phase, t] of [...r.phaseTime.entries()].sort((a, b) => b[1] - a[1])) {
    md.push(`| ${phase} | ${((100 * t) / r.busy).toFixed(1)} % | ${f2((t / r.busy) * r.plainCpu)} |`);
  }
  md.push('');
  md.push(`malloc/free/memcpy self time across all phases: ${((100 * r.alloc) / r.busy).toFixed(1)} %. Top functions by `
    + 'self time: ' + [...r.selfByName.entries()].sort((a, b) => b[1] - a[1]).slice(0, 6)
    .map(([n, t]) => `\`${(n.length > 80 ? `${n.slice(0, 77)}...` : n).replace(/\|/g, '\\|')}\` ${((100 * t) / r.busy).toFixed(1)} %`).join(', ') + '.');
  md.push('');
}
md.push('<!-- worker-profile:end -->');
if (OUT) writeFileSync(OUT, md.join('\n'));
console.log(`\n${md.join('\n')}`);
