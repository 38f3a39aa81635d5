// worker/microtask.js, the `queueMicrotask` that scripts/build-worker injects into the Worker's bundle in place of
// workerd's (docs/decisions.md, "The microtask queue of the Worker's futures (session 23)"): the same contract
// (microtasks of the current turn, in order; an exception goes to `reportError`), and the built bundle calls it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { queueMicrotask as queueTask } from '../microtask.js';
import { ROOT } from './harness.mjs';

test('callbacks run as microtasks of the current turn, in the order queued', async () => {
  const seen = [];
  const timer = new Promise((resolve) => setTimeout(() => resolve(seen.push('timer')), 0));
  queueTask(() => seen.push('a'));
  queueMicrotask(() => seen.push('native'));
  queueTask(() => {
    seen.push('b');
    queueTask(() => seen.push('queued by b'));
  });
  seen.push('sync');
  await timer;
  assert.deepEqual(seen, ['sync', 'a', 'native', 'b', 'queued by b', 'timer']);
});

test('an exception goes to reportError, and later callbacks still run', async () => {
  const reported = [];
  const saved = globalThis.reportError;
  globalThis.reportError = (e) => reported.push(e);
  const unhandled = [];
  const onUnhandled = (e) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  try {
    const boom = new Error('boom');
    const seen = [];
    queueTask(() => {
      throw boom;
    });
    queueTask(() => seen.push('after'));
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.deepEqual(reported, [boom]);
    assert.deepEqual(seen, ['after']);
    assert.deepEqual(unhandled, [], 'no rejected promise left unhandled');
  } finally {
    globalThis.reportError = saved;
    process.off('unhandledRejection', onUnhandled);
  }
});

test("the built Worker's glue calls the injected queueMicrotask, never workerd's", () => {
  const bundle = readFileSync(join(ROOT, 'worker/build/index.js'), 'utf8');
  // The glue still reads the global's presence (`x.queueMicrotask`, a property); a call of the global by its own
  // name would be workerd's.
  assert.doesNotMatch(bundle, /(^|[^.\w$])queueMicrotask\(/, 'a free call of queueMicrotask is left in index.js');
  assert.match(bundle, /\.then\(\(\)=>\{try\{\w+\(\)\}catch\((\w+)\)\{reportError\(\1\)\}\}\)/, 'the injected function is in index.js');
});
