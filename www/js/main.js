// Wires the page: the connection form, the poller and its visible refresh state, the alert line, and the
// views. Each view re-renders itself from `store` when its data changes.
//
// Module map (plain ES modules, no build step), one job each:
//   transport.js   connect (Queen.open in the page / Queen.connect to a worker, from
//                  /vendor/queen-edge/queen-edge.js) and turn every failure into words (ApiError)
//   state.js       the shared state and loadAll(): the Queen HTTP reads the views need
//   poller.js      calls loadAll on a timer, one at a time, with back-off; reports the refresh phase
//   countdown.js   one ticker for every [data-until] countdown (leases, retry holds)
//   simulator.js   the simulated consumers (pop, hold, ack completed/failed or crash), no DOM
//   dom.js         element builder, focus-keeping re-render, formatters
//   activity.js    what the activity pictures draw, recorded from the broker's counters at each refresh
//   charts.js      plain SVG drawing: bars over time, lines of gauges, the lane timeline
//   views/*.js     queues + lanes, activity pictures, messages, dead letters (one by one, and by
//                  filter in dlq-bulk.js), forms (configure, push), simulator
import { connect, ApiError } from './transport.js';
import { Poller } from './poller.js';
import { store, loadAll } from './state.js';
import { startCountdowns } from './countdown.js';
import { renderQueues } from './views/queues.js';
import { renderMessages, initMessages } from './views/messages.js';
import { renderDlq, initDlq } from './views/dlq.js';
import { initDlqBulk, syncDlqBulk } from './views/dlq-bulk.js';
import { initForms, renderQueueNames } from './views/forms.js';
import { initSimulator, syncSimQueue, stopSimulator } from './views/simulator.js';
import { renderActivity, initActivity } from './views/activity.js';
import { ActivityRecorder } from './activity.js';

const $ = (id) => document.getElementById(id);
const SETTINGS_KEY = 'queen-edge-page:connection';

// ---- alert line (errors and confirmations in plain words) -------------------------------------------
function showAlert(text, kind = 'error') {
  $('alert-text').textContent = text;
  $('alert').className = `alert ${kind}`;
  $('alert').hidden = false;
}
function notify(text) {
  showAlert(text, 'info');
}
$('alert-close').addEventListener('click', () => { $('alert').hidden = true; });

// ---- refresh state ------------------------------------------------------------------------------------
let lastPhaseText = '';
function report({ phase, error, at, retryMs }) {
  const dot = $('refresh-dot');
  dot.className = `dot ${phase}`;
  let text;
  switch (phase) {
    case 'refreshing': text = lastPhaseText || 'Refreshing…'; break;
    case 'live': text = `Live: refreshing every ${poller.intervalMs / 1000} s`; break;
    case 'paused': text = 'Paused: press Resume to refresh again'; break;
    case 'failing': text = `Refresh failed: ${error?.message || error}. Trying again in ${Math.round(retryMs / 1000)} s.`; break;
    default: text = 'Not refreshing';
  }
  if (text !== lastPhaseText) {
    $('refresh-state').textContent = text;
    lastPhaseText = text;
  }
  if (at) $('refresh-time').textContent = `updated ${at.toLocaleTimeString([], { hour12: false })}`;
  document.body.dataset.refresh = phase;
}

const poller = new Poller(loadAll, report, Number($('refresh-interval').value));
const refresh = () => poller.kick();

$('refresh-interval').addEventListener('change', (e) => {
  poller.setInterval(Number(e.target.value));
  if (!poller.paused && store.state.conn) report({ phase: 'live' });
});
$('refresh-toggle').addEventListener('click', (e) => {
  const paused = !poller.paused;
  e.currentTarget.textContent = paused ? 'Resume' : 'Pause';
  e.currentTarget.setAttribute('aria-pressed', String(paused));
  poller.setPaused(paused);
});

// ---- connection ---------------------------------------------------------------------------------------
const form = $('connect-form');
function syncMode() {
  const mode = form.mode.value;
  for (const el of form.querySelectorAll('[data-mode]')) el.hidden = el.dataset.mode !== mode;
}
form.addEventListener('change', (e) => { if (e.target.name === 'mode') syncMode(); });

function initialSettings() {
  const params = new URLSearchParams(location.search);
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}'); } catch { /* ignore */ }
  const sameOrigin = location.protocol.startsWith('http') ? location.origin : '';
  return {
    mode: params.get('mode') || saved.mode || 'browser',
    db: params.get('db') || saved.db || 'queen-edge-page',
    url: params.get('url') || saved.url || sameOrigin,
  };
}

async function doConnect() {
  const settings = { mode: form.mode.value, db: form.db.value, url: form.url.value, token: form.token.value };
  const button = form.querySelector('button[type=submit]');
  button.disabled = true;
  $('connection-state').textContent = 'Connecting…';
  stopSimulator();
  poller.stop();
  store.state.conn?.close();
  store.set({ conn: null, queues: [], detail: null, dlq: [], messages: [], selected: null, partition: null,
    msgOffset: null, dlqGroup: '', dlqSelected: new Set(), activity: null, brokerSeries: null, history: null });
  try {
    const conn = await connect(settings);
    store.set({ conn, activity: new ActivityRecorder(Date.now()) });
    $('connection-state').textContent = `Connected to the ${conn.label}`;
    $('alert').hidden = true;
    try {
      localStorage.setItem(SETTINGS_KEY, JSON.stringify({ mode: settings.mode, db: settings.db, url: settings.url }));
    } catch { /* storage may be off */ }
    poller.paused = false;
    $('refresh-toggle').textContent = 'Pause';
    $('refresh-toggle').setAttribute('aria-pressed', 'false');
    poller.start();
  } catch (e) {
    $('connection-state').textContent = 'Not connected';
    showAlert(e instanceof ApiError ? e.message : `Could not connect: ${e?.message || e}`);
    report({ phase: 'stopped' });
  } finally {
    button.disabled = false;
  }
}
form.addEventListener('submit', (e) => { e.preventDefault(); doConnect(); });

// ---- views --------------------------------------------------------------------------------------------
initMessages(refresh);
initDlq({ refresh, notify, fail: (t) => showAlert(t) });
initDlqBulk({ refresh, notify });
initForms({ refresh, notify });
initSimulator({ refresh });
initActivity();
/** "Storage: 12.3 MB of 8.0 GB (0.2 %)": stored message bytes against the broker's quota. */
function renderStorage(storage) {
  const el = $('storage-state');
  if (!storage || typeof storage.storedBytes !== 'number') {
    el.textContent = '';
    return;
  }
  const mb = (n) => (n >= 1e9 ? `${(n / 1e9).toFixed(1)} GB` : `${(n / 1e6).toFixed(1)} MB`);
  const quota = storage.maxStoredBytes;
  el.textContent = quota
    ? `Storage: ${mb(storage.storedBytes)} of ${mb(quota)} (${((100 * storage.storedBytes) / quota).toFixed(1)} %)`
    : `Storage: ${mb(storage.storedBytes)} (no quota)`;
  el.classList.toggle('warn', Boolean(quota) && storage.storedBytes >= 0.9 * quota);
}

let selectionKey = '';
store.subscribe((s) => {
  // A new selection (queue, partition, group filter, page) is fetched at once, not at the next tick.
  const key = JSON.stringify([s.selected, s.partition, s.dlqGroup, s.msgOffset]);
  if (key !== selectionKey) {
    selectionKey = key;
    if (s.conn) refresh();
  }
  renderStorage(s.storage);
  renderQueueNames(s);
  renderQueues(s);
  renderActivity(s);
  renderMessages(s);
  renderDlq(s);
  syncDlqBulk(s);
  syncSimQueue(s);
});
startCountdowns();

// A failed promise anywhere shows up in plain words rather than only in the console.
window.addEventListener('unhandledrejection', (e) => {
  e.preventDefault();
  showAlert(e.reason?.message || String(e.reason));
});

const init = initialSettings();
form.mode.value = init.mode;
form.db.value = init.db;
form.url.value = init.url;
syncMode();
store.emit();
if (new URLSearchParams(location.search).get('connect') !== 'no') doConnect();
