// The page test's flow, run once per broker mode: configure a queue, push (with JSON validation), watch
// the simulator fail a message until it is dead-lettered, replay it, consume it, dead-letter two more and
// delete them as a selection; then check the phone-sized layout and the keyboard entry point.
// Screenshots go to `shots`. Every step says what it waits for, so a failure reads as a sentence.

import { text, until } from './helpers.mjs';

const QUEUE = 'page-demo';
const GROUP = 'workers';

async function laneValue(page, key) {
  return text(page, `.lane[data-group="${GROUP}"] [data-k="${key}"]`);
}

async function queueRow(page) {
  const cells = await page.locator(`#queue-table tbody tr:has(button[data-queue="${QUEUE}"]) td`).allTextContents();
  // [namespace/task, partitions, messages, pending, in flight]
  return { messages: Number(cells[2]), pending: Number(cells[3]) };
}

export async function runFlow(page, { label, url, shots, log = console.log }) {
  let n = 0;
  const shot = async (name, opts = {}) => {
    n += 1;
    const file = `${shots}/${label}-${String(n).padStart(2, '0')}-${name}.png`;
    await page.screenshot({ path: file, fullPage: true, ...opts });
    log(`  screenshot ${file}`);
  };
  const step = (s) => log(`  [${label}] ${s}`);

  step(`open ${url}`);
  await page.goto(url);
  await until('the page to say it is connected', async () => (await text(page, '#connection-state')).startsWith('Connected'), 30_000);
  await until('the refresh state to say Live', async () => (await text(page, '#refresh-state')).startsWith('Live'));
  await page.selectOption('#refresh-interval', '500');
  await until('the activity view to ask for a queue and the broker chart to say nothing was measured yet', async () =>
    (await text(page, '#activity-view')).includes('Choose a queue to see its activity') &&
    (await text(page, '#broker-picture .empty')).includes('No traffic measured in the last hour'));
  await shot('connected');

  step('the encryption option is not offered as if it worked: this broker has no key, and the form says so');
  await until('the encryption checkbox to be disabled with its reason', async () =>
    (await page.locator('#configure-form input[name=encryptionEnabled]').isDisabled()) &&
    (await text(page, '#cfg-encryptionEnabled-hint')).includes('no encryption key'));

  step('configure the queue (retry limit 1, no retry delay)');
  await page.fill('#cfg-queue', QUEUE);
  await page.fill('#cfg-leaseTime', '30');
  await page.fill('#cfg-retryLimit', '1');
  await page.fill('#cfg-retryDelay', '0');
  await page.click('#configure-form button[type=submit]');
  await until('the configure form to confirm', async () => (await text(page, '#configure-msg')).includes('saved'));
  await until('the queue to be listed', async () => (await page.locator(`#queue-table button[data-queue="${QUEUE}"]`).count()) === 1);
  await page.click(`#queue-table button[data-queue="${QUEUE}"]`);
  await until('the options to show retry limit 1', async () => (await text(page, '#queue-detail details.options')).includes('Retry limit1'));

  step('the JSON editor refuses invalid JSON');
  await page.fill('#push-queue', QUEUE);
  await page.fill('#push-payload', '{"order": 1,');
  await until('the editor to say the JSON is invalid', async () => (await text(page, '#push-json-msg')).includes('not valid JSON'));
  if ((await page.getAttribute('#push-payload', 'aria-invalid')) !== 'true') throw new Error('invalid JSON did not set aria-invalid on the editor');
  await page.click('#push-form button[type=submit]');
  await until('the push form to ask for a fix', async () => (await text(page, '#push-msg')).includes('Fix the payload'));
  await shot('invalid-json');

  step('push one message');
  await page.fill('#push-payload', '{"order": 1, "note": "hello"}');
  await until('the editor to accept the JSON', async () => (await text(page, '#push-json-msg')) === 'Valid JSON.');
  await page.click('#push-form button[type=submit]');
  await until('the push to be confirmed', async () => (await text(page, '#push-msg')).includes('Pushed 1 message'));
  await until('the queue to count 1 message', async () => (await queueRow(page)).messages === 1);
  await until('the message browser to show the payload', async () => (await text(page, '#messages-table')).includes('"order":1'));

  step('simulate a consumer that always fails, until the message is dead-lettered');
  await page.fill('#sim-queue', QUEUE);
  await page.fill('#sim-group', GROUP);
  await page.fill('#sim-consumers', '1');
  await page.fill('#sim-batch', '1');
  await page.fill('#sim-handling', '1500');
  await page.fill('#sim-failure', '100');
  await page.selectOption('#sim-mode', 'failed');
  await page.click('#sim-start');
  await until('the lane to show a live lease', async () => (await text(page, `.lane[data-group="${GROUP}"] [data-role=lane-state]`)) === 'Leased');
  await until('the lease countdown to run', async () => /^in \d/.test(await laneValue(page, 'expires')));
  await shot('leased');
  await until('the lane to show one retry used of one', async () => (await laneValue(page, 'retries')).startsWith('1 of 1'));
  await shot('retry-used');
  await until('a dead letter to appear', async () => (await page.locator('#dlq-table tbody tr').count()) === 1, 30_000);
  const dlqRow = await text(page, '#dlq-table tbody tr');
  if (!dlqRow.includes('Simulated failure')) throw new Error(`the dead letter does not show the error: ${dlqRow}`);
  if (!dlqRow.includes(GROUP)) throw new Error(`the dead letter does not show its group: ${dlqRow}`);
  await until('the simulator to count the dead letter', async () => (await text(page, '#sim-dlq-count')) === '1');
  await page.click('#sim-stop');
  await until('the lane cursor to move past the dead letter', async () => (await laneValue(page, 'committed')) === '0' && (await laneValue(page, 'backlog')) === '0 messages');
  await until('the queue totals to count a dead letter', async () => (await text(page, '#queue-detail .totals')).includes('1 dead letters'));
  await shot('dead-lettered');

  step("open the message's trace events (the simulator traces each delivery, as msg.trace does)");
  await until('the message to count its two trace events', async () =>
    (await text(page, '#messages-table button[data-traces]')) === '2 events');
  await page.click('#messages-table button[data-traces]');
  await until('the two failed deliveries to be listed', async () => (await page.locator('#messages-table ol.traces li').count()) === 2);
  const traces = await text(page, '#messages-table ol.traces');
  if (!traces.includes('error') || !traces.includes('simulator') || !traces.includes(GROUP)) {
    throw new Error(`the trace events do not show their type, name and group: ${traces}`);
  }
  await shot('traces');
  await page.click('#messages-table button[data-traces]');
  await until('the trace events to close', async () => (await page.locator('#messages-table ol.traces').count()) === 0);

  step('replay the dead letter');
  await page.click('#dlq-table tbody tr button:has-text("Replay")');
  await until('the dead-letter list to empty', async () => (await page.locator('#dlq-empty').count()) === 1);
  await until('the confirmation', async () => (await text(page, '#alert-text')).includes('Replayed 1 dead letter'));
  await until('the queue to count 2 messages', async () => (await queueRow(page)).messages === 2);
  await until('the lane backlog to be 1 again', async () => (await laneValue(page, 'backlog')) === '1 message');
  await shot('replayed');

  step('consume the replayed message without failures');
  await page.fill('#sim-handling', '100');
  await page.fill('#sim-failure', '0');
  await page.click('#sim-start');
  await until('the lane to commit offset 1', async () => (await laneValue(page, 'committed')) === '1' && (await laneValue(page, 'backlog')) === '0 messages');
  await page.click('#sim-stop');
  await shot('consumed');

  step('dead-letter two more and delete them as a selection');
  await page.fill('#push-count', '2');
  await page.fill('#push-payload', '{"order": "bulk-$i"}');
  await page.click('#push-form button[type=submit]');
  await until('the push of 2 to be confirmed', async () => (await text(page, '#push-msg')).includes('Pushed 2 messages'));
  await page.fill('#sim-handling', '100');
  await page.fill('#sim-failure', '100');
  await page.click('#sim-start');
  await until('two dead letters', async () => (await page.locator('#dlq-table tbody tr').count()) === 2, 30_000);
  await page.click('#sim-stop');
  await page.check('#dlq-all');
  await until('the bulk button to count 2', async () => (await text(page, 'button[data-focus="dlq-delete-sel"]')) === 'Delete selected (2)');
  await shot('selected');
  await page.click('button[data-focus="dlq-delete-sel"]');
  await until('the dead-letter list to empty again', async () => (await page.locator('#dlq-empty').count()) === 1);
  await until('the confirmation of the delete', async () => (await text(page, '#alert-text')).includes('Deleted 2 dead letters'));

  step('pause and resume the refresh');
  await page.click('#refresh-toggle');
  await until('the refresh state to say Paused', async () => (await text(page, '#refresh-state')).startsWith('Paused'));
  await page.click('#refresh-toggle');
  await until('the refresh state to say Live again', async () => (await text(page, '#refresh-state')).startsWith('Live'));

  step('keyboard: the first Tab reaches the skip link, the queue buttons are focusable');
  await page.reload();
  await until('the page to reconnect after a reload', async () => (await text(page, '#connection-state')).startsWith('Connected'), 30_000);
  await page.keyboard.press('Tab');
  const first = await page.evaluate(() => document.activeElement?.textContent?.trim());
  if (first !== 'Skip to content') throw new Error(`the first Tab stop is "${first}", not the skip link`);
  await page.focus(`#queue-table button[data-queue="${QUEUE}"]`);
  await page.keyboard.press('Enter');

  step('phone-sized screen (375 px)');
  await page.setViewportSize({ width: 375, height: 812 });
  await page.waitForTimeout(600);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  if (overflow > 1) throw new Error(`at 375 px the page scrolls sideways by ${overflow} px`);
  await shot('phone');
  await page.setViewportSize({ width: 1280, height: 900 });
}
