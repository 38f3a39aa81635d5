// What a push costs the disk on bare workerd: the pages each SQLite commit of queen-edge's Durable Object writes to
// its write-ahead log, by table, and (with --syscalls) the workerd process's system calls while it pushes
// (`perf trace -s`: fsync, pwrite64 and the rest, with their total time). Each build given runs alone on a fresh
// state directory on the disk (the temp dir), 8 connections push `--batch` messages of 64 bytes per request to 10
// partitions for --seconds (after --warm seconds not counted), then workerd is stopped (SIGSTOP) and its database
// and WAL are copied; the WAL's valid frames (those of the log's current salt: the commits since the last
// checkpoint) are read from their headers, and each page number is named by SQLite's `dbstat` over the copy
// (python3's sqlite3 module). So "frames per commit" counts whole 4 KB pages the commits wrote, the unit the log
// and its fsync pay for, where `rowsWritten` counts rows. Prints only; not part of scripts/test. --syscalls needs
// root (perf).
//
//   node bench/worker-wal.mjs --build NAME=DIR [--build NAME=DIR]... [--var NAME:VAR=VALUE]... [--batch 100]
//                             [--seconds 1] [--warm 2] [--syscalls]
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, loadDriver, requester } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILDS = buildsFromArgs(argv);
const BATCH = Number(opt('--batch', 100));
const SECONDS = Number(opt('--seconds', 1));
const WARM = Number(opt('--warm', 2));
const SYSCALLS = argv.includes('--syscalls');

// Reads the WAL's valid frames and names each frame's page by its table and page type (dbstat).
const FRAMES_BY_TABLE = String.raw`
import collections, shutil, sqlite3, struct, sys
db, wal_path = sys.argv[1], sys.argv[1] + '-wal'
wal = open(wal_path, 'rb').read()
_, _, page_size, _, salt1, salt2 = struct.unpack('>IIIIII', wal[:24])
frames, at = [], 32
while at + 24 + page_size <= len(wal):
    page, commit_size, s1, s2 = struct.unpack('>IIII', wal[at:at + 16])
    if (s1, s2) != (salt1, salt2):
        break
    frames.append((page, commit_size))
    at += 24 + page_size
commits = sum(1 for _, size in frames if size)
owner = {page: f'{name} {kind}' for name, page, kind in sqlite3.connect(db).execute('SELECT name, pageno, pagetype FROM dbstat')}
by = collections.Counter(owner.get(page, 'page 1 (header)' if page == 1 else 'free or other') for page, _ in frames)
print(f'  {len(frames)} frames in {commits} commits since the last checkpoint: {len(frames) / max(1, commits):.1f} frames per commit')
for name, n in by.most_common():
    print(f'  {n / max(1, commits):6.2f} per commit  {name}')
`;

const request = requester(8);
const { push } = loadDriver({ request, connections: 8, partitions: 10, payloadBytes: 64 });
const stateRoot = mkdtempSync(join(os.tmpdir(), 'queen-edge-wal-'));
try {
  for (const build of BUILDS) {
    const dir = join(stateRoot, build.name);
    const w = await startWorker({ persistTo: dir, vars: build.vars, runtime: 'workerd', extraArgs: ['--build-dir', build.dir] });
    const b = { name: build.name, port: Number(new URL(w.url).port), pid: workerdUnder(w.pid) };
    try {
      await push(b, 'warm', BATCH, WARM);
      let traced = null;
      if (SYSCALLS) {
        const out = join(stateRoot, `${build.name}.syscalls.txt`);
        const tracer = spawn('perf', ['trace', '-s', '-o', out, '-p', String(b.pid), '--', 'sleep', String(SECONDS)], { stdio: 'ignore' });
        traced = { out, exited: new Promise((resolve) => tracer.on('exit', resolve)) };
      }
      const r = await push(b, 'measured', BATCH, SECONDS);
      process.kill(b.pid, 'SIGSTOP');
      const files = execFileSync('find', [dir, '-name', '*.sqlite']).toString().trim().split('\n');
      const db = files.filter((f) => !f.endsWith('metadata.sqlite')).sort((x, y) => statSync(y).size - statSync(x).size)[0];
      const copy = join(mkdtempSync(join(stateRoot, 'copy-')), 'object.sqlite');
      copyFileSync(db, copy);
      copyFileSync(`${db}-wal`, `${copy}-wal`);
      process.kill(b.pid, 'SIGCONT');
      console.log(`${build.name}: push batch ${BATCH}, ${r.msgsPerSec.toFixed(0)} msg/s, ${(r.msgsPerSec / BATCH).toFixed(0)} requests/s `
        + `(${SYSCALLS ? 'under perf trace' : 'untraced'})`);
      process.stdout.write(execFileSync('python3', ['-c', FRAMES_BY_TABLE, copy]));
      if (traced) {
        await traced.exited;
        console.log(`  system calls of workerd during ${SECONDS} s of it (perf trace -s):`);
        console.log(execFileSync('grep', ['-E', '^ +(fsync|fdatasync|pwrite64|pread64|fcntl|writev|recvfrom|epoll_wait) ', traced.out]).toString()
          .trimEnd().split('\n').map((l) => `  ${l.trim()}`).join('\n'));
      }
    } finally {
      await w.stop();
    }
  }
} finally {
  request.close();
  for (const d of readdirSync(stateRoot)) execFileSync('rm', ['-rf', join(stateRoot, d)]);
}
