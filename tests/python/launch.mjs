// Starts the real worker (bare workerd via scripts/serve) through worker/test/harness.mjs on a free port with a
// fresh temporary persist dir, runs one command with QUEEN_URL set to the worker's base URL, stops the
// worker and exits with the command's status. Wrangler's log is printed when the command fails.
//
//   node tests/python/launch.mjs [--var K:V]... -- <command> [args...]
import { spawn } from 'node:child_process';
import { startWorker, tempPersistDir } from '../../worker/test/harness.mjs';

const argv = process.argv.slice(2);
const vars = {};
let i = 0;
for (; i < argv.length && argv[i] !== '--'; i++) {
  if (argv[i] === '--var') {
    const [k, ...v] = argv[++i].split(':');
    vars[k] = v.join(':');
  } else {
    console.error(`launch.mjs: unknown option ${argv[i]}`);
    process.exit(2);
  }
}
const cmd = argv.slice(i + 1);
if (cmd.length === 0) {
  console.error('usage: node tests/python/launch.mjs [--var K:V]... -- <command> [args...]');
  process.exit(2);
}

const persist = tempPersistDir();
let worker;
let code = 1;
try {
  const t0 = Date.now();
  worker = await startWorker({ persistTo: persist.dir, vars });
  console.log(`[launch] worker ready at ${worker.url} after ${Date.now() - t0} ms`);
  code = await new Promise((resolve) => {
    const child = spawn(cmd[0], cmd.slice(1), {
      stdio: 'inherit',
      env: { ...process.env, QUEEN_URL: worker.url },
    });
    child.on('error', (e) => { console.error(`[launch] cannot run ${cmd[0]}: ${e.message}`); resolve(127); });
    child.on('exit', (c, sig) => resolve(c ?? (sig ? 128 : 1)));
  });
  if (code !== 0) {
    console.error(`[launch] command failed with status ${code}; worker log follows`);
    console.error(worker.logs());
  }
} catch (e) {
  console.error(`[launch] ${e.stack || e}`);
  code = 1;
} finally {
  if (worker) await worker.stop();
  persist.cleanup();
}
process.exit(code);
