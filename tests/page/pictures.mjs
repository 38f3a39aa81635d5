// The activity pictures, run once per broker mode after the main flow: push and pop through the API
// (the page's own connection, so the same broker in both modes), then read back what the charts drew
// (each bar and dot carries its value in data attributes) and compare it with the counts; nack a
// message past its retry budget and check that its lane's timeline shows the lease, the retry, the hold
// and the dead-lettering, and that a lease left to run out ends in an expiry. Then the same on a queue
// with `deliveryLog: all`, where the outcomes come from the log. Screenshots go to `shots`.

import { api, until } from './helpers.mjs';

const QUEUE = 'pictures';
const LOG_QUEUE = 'pictures-log';

/** Sum of `attr` over the elements matching `sel` (a data attribute, e.g. 'data-value'). */
async function sumOf(page, sel, attr = 'data-value') {
  return page.evaluate(([s, a]) => [...document.querySelectorAll(s)].reduce((n, e) => n + Number(e.getAttribute(a)), 0), [sel, attr]);
}

async function pop(page, queue, group, batch, extra = {}) {
  const q = new URLSearchParams({ batch: String(batch), wait: 'false', consumerGroup: group, subscriptionMode: 'all', ...extra });
  const res = await api(page, 'GET', `/api/v1/pop/queue/${queue}?${q}`);
  if (res.status !== 200) throw new Error(`pop on ${queue} for ${group} answered ${res.status}`);
  return res.body.messages;
}

async function ack(page, messages, status, group) {
  const acknowledgments = messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId,
    status, error: status === 'failed' ? 'picture test failure' : null }));
  const res = await api(page, 'POST', '/api/v1/ack/batch', { acknowledgments, consumerGroup: group });
  return res.body;
}

const row = (group) => `#lane-timeline g.lane-row[data-group="${group}"]`;

/** Nacks one message of `queue` for `group` until it is dead-lettered (retry limit 1), checking the timeline. */
async function nackPastBudget(page, queue, group, step) {
  step(`queue ${queue}: pop one message for group ${group}: the timeline shows its lease`);
  let [m] = await pop(page, queue, group, 1);
  await until('a lease bar on the lane', async () => (await page.locator(`${row(group)} rect[data-event=lease]`).count()) >= 1);
  step(`queue ${queue}: nack it (failed): a retry and a retry hold`);
  await ack(page, [m], 'failed', group);
  await until('a retry glyph on the lane', async () => (await sumOf(page, `${row(group)} g[data-event=retry]`, 'data-count')) === 1);
  await until('a retry hold bar on the lane', async () => (await page.locator(`${row(group)} rect[data-event=hold]`).count()) >= 1);
  step(`queue ${queue}: after the hold, pop it again and nack it: its retry budget is used, it is dead-lettered`);
  await until('the message to come back after its hold', async () => {
    const again = await pop(page, queue, group, 1).catch(() => []);
    if (again[0]) m = again[0];
    return again.length === 1;
  });
  if (m.retryCount !== undefined && m.retryCount !== 1) throw new Error(`the redelivery says retryCount ${m.retryCount}, not 1`);
  await until('a second lease bar on the lane', async () => (await page.locator(`${row(group)} rect[data-event=lease]`).count()) >= 2);
  const [result] = await ack(page, [m], 'failed', group);
  if (!result?.dlq) throw new Error(`the second failure was not dead-lettered: ${JSON.stringify(result)}`);
  await until('a dead-letter glyph on the lane', async () => (await page.locator(`${row(group)} g[data-event=dead-letter]`).count()) === 1);
  const retries = await sumOf(page, `${row(group)} g[data-event=retry]`, 'data-count');
  if (retries !== 1) throw new Error(`the lane shows ${retries} retries, not 1`);
}

export async function runPictures(page, { label, shots, log = console.log }) {
  const step = (s) => log(`  [${label}] pictures: ${s}`);
  const shot = async (name, selector = '#activity-panel') => {
    const file = `${shots}/${label}-pictures-${name}.png`;
    await page.locator(selector).screenshot({ path: file });
    log(`  screenshot ${file}`);
  };

  step('configure a queue (lease 30 s, retry limit 1, retry delay 1.5 s) and choose it');
  await api(page, 'POST', '/api/v1/configure', { queue: QUEUE, options: { leaseTime: 30, retryLimit: 1, retryDelay: 1500 } });
  await until('the queue to be listed', async () => (await page.locator(`#queue-table button[data-queue="${QUEUE}"]`).count()) === 1);
  await page.click(`#queue-table button[data-queue="${QUEUE}"]`);
  await until('the activity view to show the queue', async () => (await page.locator('#activity-view h3').textContent()).includes(QUEUE));
  await page.selectOption('#activity-window', '60000');
  await until('the throughput to start from zero', async () => (await page.getAttribute('#throughput-totals', 'data-pushed')) === '0');
  await until('the backlog picture to say no group has read yet', async () =>
    (await page.locator('#backlog-picture .empty').textContent()).includes('No consumer group'));
  await shot('empty');

  step('push 7 messages through the API: the pushed bars add up to 7');
  const items = Array.from({ length: 7 }, (_, i) => ({ queue: QUEUE, payload: { n: i } }));
  const pushed = await api(page, 'POST', '/api/v1/push', { items });
  if (pushed.status !== 201 && pushed.status !== 200) throw new Error(`push answered ${pushed.status}`);
  await until('pushed bars adding up to 7', async () => (await sumOf(page, '#throughput-chart rect[data-series=pushed]')) === 7);

  step('pop 5 for group g and ack them: delivered and acked bars add up to 5, the backlog of g is 2');
  const five = await pop(page, QUEUE, 'g', 5);
  if (five.length !== 5) throw new Error(`popped ${five.length}, not 5`);
  await ack(page, five, 'completed', 'g');
  await until('delivered bars adding up to 5', async () => (await sumOf(page, '#throughput-chart rect[data-series=delivered]')) === 5);
  await until('acked bars adding up to 5', async () => (await sumOf(page, '#throughput-chart rect[data-series=acked]')) === 5);
  await until('the backlog of g to be 2', async () => (await page.getAttribute('#backlog-legend li[data-group=g]', 'data-value')) === '2');
  const lastDot = await page.evaluate(() => {
    const dots = [...document.querySelectorAll('#backlog-chart circle[data-series=g]')];
    return dots.length ? Number(dots[dots.length - 1].dataset.value) : null;
  });
  if (lastDot !== 2) throw new Error(`the backlog line of g ends at ${lastDot}, not 2`);
  const failedBars = await sumOf(page, '#throughput-chart rect[data-series=failed]');
  if (failedBars !== 0) throw new Error(`failed bars add up to ${failedBars} with no failed ack`);
  await shot('throughput');

  await nackPastBudget(page, QUEUE, 'r', step);
  await until('failed bars adding up to 2', async () => (await sumOf(page, '#throughput-chart rect[data-series=failed]')) === 2);
  await shot('lane-timeline');

  step('pop one for group x with a 2 s lease and never ack it: the lease bar ends in an expiry');
  const [held] = await pop(page, QUEUE, 'x', 1, { leaseSeconds: '2' });
  if (!held) throw new Error('group x got nothing to hold');
  await until('a lease bar on lane x', async () => (await page.locator(`${row('x')} rect[data-event=lease]`).count()) === 1);
  await until('an expiry glyph on lane x', async () => (await page.locator(`${row('x')} g[data-event=expired]`).count()) === 1, 15_000);
  if ((await page.getAttribute(`${row('x')} rect[data-event=lease]`, 'data-end')) !== 'expired') throw new Error('the lease bar of x does not end as expired');
  await shot('lane-expiry');

  step('the broker chart draws what GET /status reports per minute');
  const status = (await api(page, 'GET', '/api/v1/status')).body;
  for (const [series, key] of [['pushed', 'pushed'], ['popped', 'popped'], ['acked', 'acked']]) {
    const want = status.throughput.reduce((n, p) => n + p[key], 0);
    await until(`broker ${series} bars adding up to ${want}`, async () => (await sumOf(page, `#broker-chart rect[data-series=${series}]`)) === want);
  }

  step('open the page in a second tab: throughput and backlog come from the broker’s history, so the past minutes are there at once');
  const history = (await api(page, 'GET', `/api/v1/status/queues/${QUEUE}/history`)).body;
  const measured = (k) => history.buckets.reduce((sum, b) => sum + b[k], 0);
  if (measured('pushed') !== 7 || measured('failed') !== 2) {
    throw new Error(`the broker's history counts ${measured('pushed')} pushed and ${measured('failed')} failed, not 7 and 2`);
  }
  // A second tab (in the browser mode it forwards to the tab holding the database, whose broker lives on:
  // reloading that tab would restart the broker, and the history with it, docs/decisions.md).
  const other = await page.context().newPage();
  const problems = [];
  other.on('console', (msg) => { if (msg.type() === 'error') problems.push(msg.text()); });
  other.on('pageerror', (err) => problems.push(err.message));
  try {
    await other.goto(page.url());
    await until('the second tab to be live', async () => (await other.locator('#refresh-state').textContent()).startsWith('Live'), 30_000);
    await until('the second tab to show the queue', async () => {
      if ((await other.locator('#activity-view h3').textContent()).includes(QUEUE)) return true;
      await other.click(`#queue-table button[data-queue="${QUEUE}"]`);
      return false;
    });
    await other.selectOption('#activity-window', '900000');
    await until('the pictures to say the broker measured them', async () =>
      (await other.getAttribute('#activity-source', 'data-source')) === 'broker');
    // A fresh page, which has sampled nothing older than its first refreshes: these totals are the broker's.
    for (const k of ['pushed', 'delivered', 'acked', 'failed']) {
      await until(`${k} bars adding up to the history's ${measured(k)} at once`, async () =>
        (await sumOf(other, `#throughput-chart rect[data-series=${k}]`)) === measured(k));
    }
    await until('the backlog of g to be 2 at once', async () => (await other.getAttribute('#backlog-legend li[data-group=g]', 'data-value')) === '2');
    const points = await other.locator('#backlog-chart circle[data-series=g]').count();
    if (points < 2) throw new Error(`the backlog line of g has ${points} points in a new tab: the past is missing`);
    const file = `${shots}/${label}-pictures-second-tab.png`;
    await other.locator('#activity-panel').screenshot({ path: file });
    log(`  screenshot ${file}`);
    if (problems.length) throw new Error(`the second tab logged errors: ${problems.join('; ')}`);
  } finally {
    await other.close();
  }

  step('a queue with a delivery log: the outcomes on its timeline come from the log');
  let configured;
  try {
    configured = await api(page, 'POST', '/api/v1/configure',
      { queue: LOG_QUEUE, options: { leaseTime: 30, retryLimit: 1, retryDelay: 1500, deliveryLog: 'all' } });
  } catch (e) {
    configured = { status: e.status, error: e.message };
  }
  const detail = configured.status < 300 ? (await api(page, 'GET', `/api/v1/resources/queues/${LOG_QUEUE}`).catch(() => null))?.body : null;
  if (detail?.options?.deliveryLog !== 'all') {
    throw new Error(`the queue with deliveryLog all was not configured (configure answered ${configured.status}` +
      `${configured.error ? `: ${configured.error}` : ''}; deliveryLog echoed as ${JSON.stringify(detail?.options?.deliveryLog)})`);
  }
  await api(page, 'POST', '/api/v1/push', { items: [{ queue: LOG_QUEUE, payload: { logged: true } }] });
  await until('the queue to be listed', async () => (await page.locator(`#queue-table button[data-queue="${LOG_QUEUE}"]`).count()) === 1);
  await page.click(`#queue-table button[data-queue="${LOG_QUEUE}"]`);
  await until('the activity view to show the queue', async () => (await page.locator('#activity-view h3').textContent()).includes(LOG_QUEUE));
  await nackPastBudget(page, LOG_QUEUE, 'r', step);
  const fromLog = await page.locator(`${row('r')} g[data-source=log]`).count();
  if (fromLog < 2) throw new Error(`only ${fromLog} timeline events come from the delivery log`);
  const logHolds = await page.locator(`${row('r')} rect[data-event=hold][data-source=log]`).count();
  if (logHolds < 1) throw new Error('the retry hold does not come from the delivery log');
  await shot('lane-timeline-log');
}
