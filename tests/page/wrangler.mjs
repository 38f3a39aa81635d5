// Starts the real worker with `wrangler dev` (workerd) on a free port with a temporary state folder, through
// the same harness the worker tier uses (worker/test/harness.mjs), and removes the state folder on stop.
import { startWrangler, tempPersistDir } from '../../worker/test/harness.mjs';

/** Returns {url, stop, logs}. Throws with wrangler's output when it does not become healthy. */
export async function startWorker(_root, { readyTimeoutMs = 240_000 } = {}) {
  const state = tempPersistDir();
  try {
    const worker = await startWrangler({ persistTo: state.dir, readyTimeoutMs });
    return {
      url: worker.url,
      logs: worker.logs,
      stop: async () => {
        await worker.stop();
        state.cleanup();
      },
    };
  } catch (e) {
    state.cleanup();
    throw e;
  }
}
