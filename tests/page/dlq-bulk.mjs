// Dead letters by filter, run once per broker mode after the main flow: dead-letter 30 messages
// through the API (20 with a timeout error, 10 with a payload error), then in the page refuse bad filter
// values in words, preview the timeouts (the count and the oldest rows), confirm the replay, check that
// exactly those 20 came back and that replaying the same filter again adds nothing; then delete 300
// dead letters of another queue and watch the work go in two calls; then replay one group's rows of messages
// that two groups dead-lettered (one copy per message, both groups' rows gone, progress in selected rows).
// Screenshots go to `shots`.

import { api, text, until } from './helpers.mjs';

const REPLAY_QUEUE = 'bulk-replay';
const DELETE_QUEUE = 'bulk-delete';
const GROUPS_QUEUE = 'bulk-groups';

/** Pushes one message to each of `count` partitions of `queue` and dead-letters every one of them
 * (retry limit 0: the first failed ack files it), with the error `errorOf(i)`: in queue mode, or once by
 * each consumer group of `groups`. */
async function deadLetter(page, queue, count, errorOf, groups = [null]) {
  await api(page, 'POST', '/api/v1/configure', { queue, options: { leaseTime: 60, retryLimit: 0, retryDelay: 0 } });
  const items = Array.from({ length: count }, (_, i) => ({ queue, partition: `p${i}`, transactionId: `${queue}-${i}`, payload: { i } }));
  const pushed = await api(page, 'POST', '/api/v1/push', { items });
  if (pushed.status !== 201) throw new Error(`push to ${queue} answered ${pushed.status}`);
  for (const group of groups) {
    const as = group ? `&consumerGroup=${group}&subscriptionMode=all` : '';
    let filed = 0;
    for (;;) {
      const res = await api(page, 'GET', `/api/v1/pop/queue/${queue}?batch=64&partitions=64&wait=false${as}`);
      const messages = res.body?.messages ?? [];
      if (!messages.length) break;
      const acknowledgments = messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId,
        status: 'failed', error: errorOf(Number(m.transactionId.split('-').pop())) }));
      const acked = await api(page, 'POST', '/api/v1/ack/batch', { acknowledgments, ...(group ? { consumerGroup: group } : {}) });
      filed += acked.body.filter((r) => r.dlq).length;
    }
    if (filed !== count) throw new Error(`${filed} of ${count} messages of ${queue} were dead-lettered${group ? ` by ${group}` : ''}`);
  }
}

async function dlqCount(page, queue) {
  return ((await api(page, 'GET', `/api/v1/dlq?queue=${queue}&limit=1000`)).body.messages ?? []).length;
}

async function messageCount(page, queue) {
  const detail = (await api(page, 'GET', `/api/v1/resources/queues/${queue}`)).body;
  return detail.partitions.reduce((sum, p) => sum + p.nextOffset, 0);
}

export async function runDlqBulk(page, { label, shots, log = console.log }) {
  const step = (s) => log(`  [${label}] dead letters by filter: ${s}`);
  const shot = async (name) => {
    const file = `${shots}/${label}-dlq-bulk-${name}.png`;
    await page.locator('#dlq-panel').screenshot({ path: file });
    log(`  screenshot ${file}`);
  };
  const preview = async (action) => {
    await page.click(`#bulk-preview-${action}`);
  };

  step('dead-letter 30 messages through the API: 20 timeouts, 10 payload errors');
  await deadLetter(page, REPLAY_QUEUE, 30, (i) => (i < 20 ? `db timeout after 5 s (call ${i})` : `bad payload: missing id (item ${i})`));
  await until('the queue to be listed', async () => (await page.locator(`#queue-table button[data-queue="${REPLAY_QUEUE}"]`).count()) === 1);
  await until('the filter to take the selected queue', async () => {
    if ((await page.inputValue('#bulk-queue')) === REPLAY_QUEUE) return true;
    await page.click(`#queue-table button[data-queue="${REPLAY_QUEUE}"]`);
    return false;
  });
  await until('the dead-letter list to show 30', async () => (await page.locator('#dlq-table tbody tr').count()) === 30);

  step('bad filter values are refused in words: a limit of 0, from after to');
  await page.fill('#bulk-limit', '0');
  await preview('replay');
  await until('the page to refuse the limit', async () => (await text(page, '#bulk-msg')).includes('whole number of at least 1'));
  await page.fill('#bulk-limit', '');
  await page.fill('#bulk-from', '2030-01-02T00:00');
  await page.fill('#bulk-to', '2030-01-01T00:00');
  await preview('replay');
  await until('the page to refuse from after to', async () => (await text(page, '#bulk-msg')).includes('is later than “to”'));
  await shot('bad-filter');
  await page.fill('#bulk-from', '');
  await page.fill('#bulk-to', '');

  step('preview a replay of the timeouts: 20 match, the oldest 10 are shown, each a timeout');
  await page.fill('#bulk-error', 'timeout');
  await preview('replay');
  await until('the preview to count 20', async () => (await page.getAttribute('#bulk-preview', 'data-count')) === '20');
  if ((await text(page, '#bulk-count')) !== '20 dead letters') throw new Error(`the preview says "${await text(page, '#bulk-count')}"`);
  const sample = await page.locator('#bulk-sample tbody tr').allTextContents();
  if (sample.length !== 10) throw new Error(`the preview shows ${sample.length} rows, not the oldest 10`);
  const stray = sample.filter((row) => !row.includes('db timeout'));
  if (stray.length) throw new Error(`rows without the filtered error in the preview: ${stray.join(' | ')}`);
  const dry = (await api(page, 'POST', '/api/v1/dlq/replay', { queue: REPLAY_QUEUE, errorContains: 'timeout', dryRun: true })).body;
  if (dry.count !== 20) throw new Error(`the broker's own dry run counts ${dry.count}, not 20`);
  if ((await dlqCount(page, REPLAY_QUEUE)) !== 30) throw new Error('a preview changed the dead-letter queue');
  await shot('preview');

  step('confirm: the 20 are replayed, the 10 others stay');
  await page.click('#bulk-confirm');
  await until('the replay to finish', async () => (await page.getAttribute('#bulk-run', 'data-phase')) === 'done');
  const run = await page.evaluate(() => ({ ...document.getElementById('bulk-run').dataset }));
  if (run.done !== '20' || run.queued !== '20' || run.duplicates !== '0') throw new Error(`the replay reports ${JSON.stringify(run)}`);
  if (!(await text(page, '#bulk-result')).startsWith('Replayed 20 of 20')) throw new Error(`the result says "${await text(page, '#bulk-result')}"`);
  await until('the dead-letter list to show the 10 others', async () => (await page.locator('#dlq-table tbody tr').count()) === 10);
  const left = await page.locator('#dlq-table tbody tr').allTextContents();
  if (left.some((row) => row.includes('timeout'))) throw new Error('a timeout is still in the dead-letter queue');
  const afterFirst = await messageCount(page, REPLAY_QUEUE);
  if (afterFirst !== 50) throw new Error(`the queue holds ${afterFirst} messages after the replay, not 30 + 20`);
  const replayed = ((await api(page, 'GET', `/api/v1/messages?queue=${REPLAY_QUEUE}&limit=100`)).body.messages ?? [])
    .filter((m) => String(m.transactionId).startsWith('dlq:'));
  if (replayed.length !== 20) throw new Error(`${replayed.length} messages carry a dlq: transaction id, not 20`);
  await shot('replayed');

  step('replay the same filter again: nothing matches, nothing is added');
  await preview('replay');
  await until('the preview to find nothing', async () => (await page.locator('#bulk-none').count()) === 1);
  const again = (await api(page, 'POST', '/api/v1/dlq/replay', { queue: REPLAY_QUEUE, errorContains: 'timeout' })).body;
  if (again.replayed !== 0) throw new Error(`a second replay replayed ${again.replayed}`);
  if ((await messageCount(page, REPLAY_QUEUE)) !== afterFirst) throw new Error('a second replay added messages');

  step('300 dead letters of another queue: preview a delete, confirm, the work goes in two calls');
  await deadLetter(page, DELETE_QUEUE, 300, (i) => `failed item ${i}`);
  await page.fill('#bulk-queue', DELETE_QUEUE);
  await page.fill('#bulk-error', '');
  await preview('delete');
  await until('the preview to count 300', async () => (await page.getAttribute('#bulk-preview', 'data-count')) === '300');
  await shot('delete-preview');
  await page.click('#bulk-confirm');
  await until('the delete to finish', async () => (await page.getAttribute('#bulk-run', 'data-phase')) === 'done', 60_000);
  const del = await page.evaluate(() => ({ ...document.getElementById('bulk-run').dataset }));
  if (del.done !== '300' || del.calls !== '2') throw new Error(`the delete reports ${JSON.stringify(del)} (want 300 done in 2 calls)`);
  const bar = await page.evaluate(() => { const p = document.getElementById('bulk-progress'); return [p.value, p.max]; });
  if (bar[0] !== 300 || bar[1] !== 300) throw new Error(`the progress bar ends at ${bar[0]} of ${bar[1]}`);
  if ((await dlqCount(page, DELETE_QUEUE)) !== 0) throw new Error('dead letters of the deleted set are left');
  if ((await dlqCount(page, REPLAY_QUEUE)) !== 10) throw new Error('the delete touched another queue');
  await shot('deleted');

  step('260 messages dead-lettered by two groups (520 rows): replay g1\'s, one copy each, every row gone, in two calls');
  await deadLetter(page, GROUPS_QUEUE, 260, (i) => `rejected ${i}`, ['g1', 'g2']);
  await page.fill('#bulk-queue', GROUPS_QUEUE);
  await page.fill('#bulk-group', 'g1');
  await preview('replay');
  await until('the preview to count 260', async () => (await page.getAttribute('#bulk-preview', 'data-count')) === '260');
  await page.click('#bulk-confirm');
  await until('the replay to finish', async () => (await page.getAttribute('#bulk-run', 'data-phase')) === 'done', 60_000);
  const both = await page.evaluate(() => ({ ...document.getElementById('bulk-run').dataset }));
  // Progress counts the selected rows: counting the rows removed (twice as many) stopped after one call.
  if (both.done !== '260' || both.calls !== '2' || both.queued !== '260') {
    throw new Error(`the replay reports ${JSON.stringify(both)} (want 260 done in 2 calls, 260 pushed back)`);
  }
  if (!(await text(page, '#bulk-result')).includes('260 rows of other groups')) throw new Error(`the result says "${await text(page, '#bulk-result')}"`);
  if ((await dlqCount(page, GROUPS_QUEUE)) !== 0) throw new Error('rows of the replayed messages are left');
  if ((await messageCount(page, GROUPS_QUEUE)) !== 520) throw new Error('not one copy per message (want 260 + 260)');
  await page.fill('#bulk-group', '');
}
