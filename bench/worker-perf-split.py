#!/usr/bin/env python3
"""Splits workerd's CPU per request by component, for queen-edge's Worker and the naive queue side by side.

Input: the text of `perf script -F tid,period,ip,sym` (demangled) for each workerd process, recorded with
`perf record -g -p PID` while a client drives one kind of request, workerd started with V8's perf map
(`v8Flags = ["--perf-basic-prof"]` in its config, so JS and wasm frames are named), and that process's
workerd CPU per message over the same load (e.g. bench/load.mjs's `cpuNs` before and after). Each sample is
put in exactly one component (the first rule below that matches its stack), and a component's CPU per
message is its share of the samples times the CPU per message: the rows of a column add up to its total.

    python3 bench/worker-perf-split.py ours.txt=US_PER_MSG naive.txt=US_PER_MSG [--dump COMPONENT]
    python3 bench/worker-perf-split.py --sql ours.txt=US_PER_MSG

`--sql` splits the first file's samples another way, for queen-edge's Worker only: by where the SQL runs
(inside `DoStore::get`, inside a commit's statements `DoStore::run`, workerd's implicit transaction commit,
segment decoding `load_segment`, the rest) and within each by what the leaf is (SQLite reading a whole
overflowing row during a b-tree seek, `accessPayload`; other SQLite; wasm; the rest).

The last column is the first file's figure minus the last file's. Below the table, the pace check: the
rows of workerd's per-request layers (`SAME_WORK`: the hop, HTTP, the turn machinery, the incoming `Request`,
the kernel) do the same work per request whichever broker answers, so with as many requests per message
their sums agree when the processes were measured at the same pace; when the machine's load moved between
the measurements they do not, and each total is also given scaled to the first column's pace.

`--dump` prints the most frequent leaf frames of one component in the first file, to see what a row holds.
How the rules read the frames: a wasm function is a `JS:` frame whose name ends in `-turbofan` or `-liftoff`
(V8's perf map names wasm functions by their Rust symbols); the JS of the bundle (worker/build/index.js, one file of three minified lines) is
told apart by line and function name, so the patterns for the entry handler and the wasm-bindgen glue
follow scripts/build-worker's output and need checking when that changes (`--dump`).
"""
import collections
import re
import sys

WASM_PARTS = [
    ('wasm: core (queen_edge::core)', r'queen_edge::core::|queen_edge::segment|miniz|deflate|crc32|adler'),
    ('wasm: JSON + http layer (serde_json, queen_edge::http, fmt)',
     r'serde|queen_edge::http|itoa|ryu|fmt::|::fmt|Formatter'),
    ('wasm: engine (commands, group commit)', r'queen_edge::engine'),
    ('wasm: worker crate (serve, do_store, run_now, respond)',
     r'queen_edge_worker|worker::|worker_sys|wasm_bindgen|js_sys|broker_serve|entryPrecheck'),
    ('wasm: alloc (dlmalloc, Vec, memcpy)',
     r'dlmalloc|alloc::|alloc\[|RawVec|memcpy|memset|memmove|compiler_builtins|hashbrown|core::'),
]


def stacks(path):
    """Yields each sample's frames, leaf first, as symbol names."""
    frames = None
    with open(path, errors='replace') as f:
        for line in f:
            if not line.strip():
                if frames:
                    yield frames
                frames = None
            elif frames is None:
                frames = []  # the sample's header line (tid, period)
            else:
                parts = line.strip().split(None, 1)
                frames.append(parts[1] if len(parts) > 1 else parts[0])
    if frames:
        yield frames


# workerd's per-request layers: the same work per request whichever broker answers (see `main`).
SAME_WORK = [
    'hop: stub.fetch, idFromName, get (entry side)',
    'HTTP parse and serialise (hyper, kj-http)',
    'request and turn machinery (IoContext, entrypoints, locks, gates)',
    'incoming Request and Headers objects',
    'kernel (network, epoll, futex, faults)',
]


def is_js(frame):
    return frame.startswith('JS:')


def is_wasm(frame):
    return (is_js(frame) and not re.search(r'wasm-to-js|js-to-wasm', frame)
            and bool(re.search(r'-(turbofan|liftoff)\s*$', frame)
                     or re.match(r'JS:(broker_serve|entryPrecheck|wasm-function)', frame)))


def component(st):
    """The one component a sample's stack (leaf first) belongs to."""
    s = ' | '.join(st)
    if re.search(r'v8::internal::(Heap::|Scavenger|MarkCompact|MinorMarkSweep|Sweeper|ArrayBufferSweeper|'
                 r'ConcurrentMarking|MarkingVisitor|GCTracer|IncrementalMarking|GlobalHandles|MinorMS|'
                 r'ParallelWeakHandles)|cppgc::internal', s):
        return 'GC (V8 and cppgc, wherever it is triggered)'
    if re.search(r'v8::internal::compiler::|v8::internal::maglev::|v8::internal::baseline::|'
                 r'wasm::(Liftoff|TurboFan|.*Compil)|CompileJob|Compiler::Compile', s):
        return 'JIT (V8 compiling JS, and the wasm tiering up to TurboFan)'
    if re.search(r'sqlite3|vdbeCommit|ActorSqlite::commitImpl', s):
        return 'SQLite engine (statement, implicit transaction begin and commit)'
    if re.search(r'SqlStorage::|ActorSqlite', s):
        return 'SQL binding C++ (exec, Cursor objects, bindings)'
    if re.search(r'Fetcher::fetch|fetchImpl|DurableObjectNamespace::|ActorChannel|ActorIdFactory|DurableObjectId', s):
        return 'hop: stub.fetch, idFromName, get (entry side)'
    if re.search(r'Body::(arrayBuffer|json|text)|readAllBytes|readAllText', s):
        return 'request body read (arrayBuffer, json)'
    if re.search(r'JSON::Parse|JsonParse|JsonStringify|JSON::Stringify|JsonParser|JsonStringifier', s):
        return 'JS JSON (parse, stringify)'
    if (re.search(r'Response::constructor|Headers::constructor|api::Response::Response|Response::json', s)
            and not re.search('ServiceWorkerGlobalScope::request|makeHttpResponse', s)):
        return 'Response and Headers built in JS'
    if re.search(r'Response::send', s):
        return 'Response::send (headers copied out)'
    if re.search(r'makeHttpResponse|handleHttpResponse', s):
        return "subrequest's Response object (entry side)"
    if re.search(r'ServiceWorkerGlobalScope::request', s) and not any(is_js(f) for f in st):
        return 'incoming Request and Headers objects'
    if is_wasm(st[0]):
        for name, pattern in WASM_PARTS:
            if re.search(pattern, st[0]):
                return name
        return 'wasm: other'
    for frame in st:  # the nearest JS frame above a native leaf
        if is_js(frame):
            if is_wasm(frame):
                return 'wasm: host calls (other)'
            if re.search(r"__wbg_|__wbindgen|'?serve index\.js:1:|wasm-to-js|js-to-wasm|index\.js:1:", frame):
                return 'wasm-bindgen JS glue (strings in and out, imports)'
            if re.search(r'index\.js:2:', frame):
                return 'entry JS (handler, header getters)'
            if re.search(r'serveObjectRequest|toResponse|index\.js:3:', frame):
                return 'object JS (serveObjectRequest, toResponse)'
            if re.search(r'naive\.js', frame):
                return 'naive JS (its fetch handlers)'
            return 'microtasks, promise reactions, other JS'
    if re.search(r'RunMicrotasks|Microtask|PromiseReaction', s):
        return 'microtasks, promise reactions, other JS'
    if re.match(r'^[a-z_0-9.]+$', st[0]):
        return 'kernel (network, epoll, futex, faults)'
    if re.search(r'hyper|kj::HttpServer|kj::.*Http|HttpHeaders|http::header|HeaderMap', s):
        return 'HTTP parse and serialise (hyper, kj-http)'
    if re.search(r'IoContext|IncomingRequest|WorkerEntrypoint|worker_start_request|InputGate|OutputGate|'
                 r'Worker::Lock|AsyncLock|Worker::Actor|ActorContainer|TraceScope|AsyncContextFrame', s):
        return 'request and turn machinery (IoContext, entrypoints, locks, gates)'
    if re.search(r'kj::|kj_rs|tokio|futures|mio', s):
        return 'event loops (kj, tokio)'
    return 'other workerd C++'


def sql_split(path, us):
    """Prints the `--sql` split of one file (see the module documentation)."""
    counts = collections.Counter()
    total = 0
    for st in stacks(path):
        total += 1
        s = ' | '.join(st)
        if 'Store>::get' in s:
            where = 'DoStore::get (segment reads)'
        elif 'DoStore::run' in s:
            where = "DoStore::run (a commit's statements)"
        elif re.search(r'vdbeCommit|ActorSqlite::commitImpl', s):
            where = 'implicit transaction commit'
        elif 'load_segment' in s:
            where = 'load_segment (decoding a segment read back)'
        else:
            where = 'the rest'
        if 'accessPayload' in s:
            what = 'accessPayload (whole overflowing rows read by seeks)'
        elif 'sqlite3' in s:
            what = 'other SQLite'
        elif is_wasm(st[0]):
            what = 'wasm'
        else:
            what = 'other'
        counts[(where, what)] += 1
    print(f'| where | leaf | share | {path} us/msg |')
    print('|---|---|---:|---:|')
    for (where, what), n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f'| {where} | {what} | {n / total * 100:.1f} % | {n / total * us:.2f} |')


def main(argv):
    if argv[:1] == ['--sql'] and len(argv) == 2:
        path, _, us = argv[1].rpartition('=')
        sql_split(path, float(us))
        return
    dump = None
    if '--dump' in argv:
        i = argv.index('--dump')
        dump = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if not argv:
        sys.exit(__doc__)
    runs = []
    for arg in argv:
        path, _, us = arg.rpartition('=')
        if not path:
            sys.exit(f'want FILE=US_PER_MSG, got {arg}')
        counts = collections.Counter(component(st) for st in stacks(path))
        runs.append((path, sum(counts.values()), counts, float(us)))
    if dump:
        leaves = collections.Counter(' <- '.join(f.strip()[:70] for f in st[:4])
                                     for st in stacks(runs[0][0]) if component(st) == dump)
        for frames, n in leaves.most_common(30):
            print(n, frames)
        return

    def per_msg(run, name):
        _, samples, counts, us = run
        return counts[name] / samples * us

    names = sorted(set().union(*(r[2] for r in runs)),
                   key=lambda n: -(per_msg(runs[0], n) - per_msg(runs[-1], n)))
    print('| component | ' + ' | '.join(f'{r[0]} us/msg' for r in runs) + ' | difference |')
    print('|---|' + '---:|' * (len(runs) + 1))
    for name in names:
        v = [per_msg(r, name) for r in runs]
        print(f'| {name} | ' + ' | '.join(f'{x:.1f}' for x in v) + f' | {v[0] - v[-1]:+.1f} |')
    print('| total | ' + ' | '.join(f'{r[3]:.1f}' for r in runs) + f' | {runs[0][3] - runs[-1][3]:+.1f} |')
    print('samples: ' + ', '.join(f'{r[0]} {r[1]}' for r in runs))
    # The rows of workerd's own per-request layers do the same work for every broker driven by the same
    # load (as many requests per message): a column whose rows sum far from the first's ran slower or faster
    # per unit of work (the machine's load moved between the measurements), and its total is scaled to the
    # first column's pace for a comparison.
    if len(runs) > 1:
        same = [sum(per_msg(r, name) for name in SAME_WORK) for r in runs]
        print(f'workerd per-request layers ({", ".join(n.split(" (")[0] for n in SAME_WORK)}), the same work '
              'per request in every column: ' + ', '.join(f'{r[0]} {x:.1f}' for r, x in zip(runs, same)) + ' us/msg')
        if all(same):
            print('totals at the first column\'s pace (total x first column\'s layers / own layers): '
                  + ', '.join(f'{r[0]} {r[3] * same[0] / x:.1f} (x{same[0] / x:.2f})' for r, x in zip(runs, same)))
    # Wasm still running as Liftoff (baseline) code is slower than after its tier-up: how far it had got.
    for path, _, _, _ in runs:
        tiers = collections.Counter(m.group(1) for st in stacks(path) if is_wasm(st[0])
                                    for m in [re.search(r'-(turbofan|liftoff)\s*$', st[0])] if m)
        if tiers:
            print(f'{path}: wasm leaf samples in Liftoff code {tiers["liftoff"]}, in TurboFan code {tiers["turbofan"]}')


if __name__ == '__main__':
    main(sys.argv[1:])
