// Starts the naive one-row-per-message Durable Object queue (naive.js beside this file) on the workerd binary
// the project pins, with its SQLite state in `stateDir`, and waits until it answers /health. The baseline of
// bench/worker-bench.mjs and bench/worker-ab.mjs.
import { join } from 'node:path';
import { ROOT } from '../../worker/test/harness.mjs';
import { startJsDurableObject } from '../js-do.mjs';

/**
 * The naive queue as a broker of the benchmarks: `{ name, port, pid, stop }`; `request` is bench/load.mjs's
 * requester, `v8Flags` go to workerd's config (bench/js-do.mjs).
 */
export async function startNaive(stateDir, request, name = 'naive DO queue', v8Flags = []) {
  const naive = await startJsDurableObject({
    file: join(ROOT, 'bench', 'naive-do', 'naive.js'),
    className: 'NaiveQueue',
    binding: 'NAIVE',
    stateDir,
    v8Flags,
    ready: async (port) => (await request(port, 'GET', '/health')).status === 200,
  });
  return { name, ...naive };
}
