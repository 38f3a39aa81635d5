// The activity pictures of the selected queue: throughput (pushed, delivered, acked, failed) and each
// group's backlog over the last minutes, a timeline per lane (leases, retry holds, retries,
// dead-lettering), and the broker's own per-minute series over the last hour (GET /status). Throughput
// and backlog come from the broker's history of the queue (history.js), so they show the minutes before
// the page opened; from a broker without one, from what the page samples at each refresh (activity.js).
// The timeline comes from activity.js. charts.js draws.
import { h, replaceKeepingFocus, n } from '../dom.js';
import { store, QUEUE_MODE } from '../state.js';
import { bucketThroughput, throughputTotals } from '../activity.js';
import { historyThroughput, historyBacklog } from '../history.js';
import { barChart, lineChart, timeline } from '../charts.js';

const WINDOWS = [[60_000, '1 min'], [5 * 60_000, '5 min'], [15 * 60_000, '15 min']];
const BUCKETS = 30;
const SERIES = [
  { key: 'pushed', label: 'Pushed', cls: 's-pushed' },
  { key: 'delivered', label: 'Delivered', cls: 's-delivered' },
  { key: 'acked', label: 'Acked', cls: 's-acked' },
  { key: 'failed', label: 'Failed acks', cls: 's-failed' },
];
const BROKER_SERIES = [
  { key: 'pushed', label: 'Pushed', cls: 's-pushed' },
  { key: 'popped', label: 'Delivered', cls: 's-delivered' },
  { key: 'acked', label: 'Acked', cls: 's-acked' },
  { key: 'failed', label: 'Failed acks', cls: 's-failed' },
];

let windowMs = 5 * 60_000;
let last = '';
/** Most lane rows drawn; lanes with something in the window come first. */
const MAX_ROWS = 40;

/** Redraws at the new width when the window is resized (the charts are drawn in pixels). */
export function initActivity() {
  let timer = null;
  window.addEventListener('resize', () => {
    clearTimeout(timer);
    timer = setTimeout(() => renderActivity(store.state), 150);
  });
}

const el = () => document.getElementById('activity-view');
const groupLabel = (g) => (g === QUEUE_MODE ? 'queue mode' : g);

export function renderActivity(s) {
  const width = el().clientWidth || 600;
  const sig = JSON.stringify([s.conn?.label, s.selected, s.loadedAt, windowMs, width]);
  if (sig === last) return;
  last = sig;
  replaceKeepingFocus(el(), view(s, Math.max(260, width)));
}

function view(s, width) {
  if (!s.conn) return h('p', { class: 'muted' }, 'Connect to a broker to see its activity.');
  const broker = brokerPicture(s, width);
  if (!s.detail) return [h('p', { class: 'muted' }, 'Choose a queue to see its activity.'), broker];
  const rec = s.activity?.of(s.detail.name) ?? null;
  if (s.history?.queue !== s.detail.name) s = { ...s, history: null };
  const end = s.loadedAt || Date.now();
  const from = end - windowMs;
  return [
    h('div', { class: 'row controls' },
      h('h3', { class: 'activity-h' }, 'Queue ', h('q', {}, s.detail.name), ', last ', WINDOWS.find(([ms]) => ms === windowMs)[1]),
      h('label', { class: 'inline' }, 'Show the last ',
        h('select', { id: 'activity-window', dataset: { focus: 'activity-window' },
          onchange: (e) => { windowMs = Number(e.target.value); renderActivity(store.state); } },
        WINDOWS.map(([ms, text]) => h('option', { value: ms, selected: ms === windowMs }, text))))),
    source(s.history, rec),
    // Throughput and backlog side by side when there is room.
    h('div', { class: `pictures${width >= 1000 ? ' two' : ''}` },
      throughputPicture(rec, s.history, windowMs, end, width >= 1000 ? Math.floor((width - 16) / 2) : width),
      backlogPicture(rec, s.history, s.detail, from, end, width >= 1000 ? Math.floor((width - 16) / 2) : width)),
    lanePicture(rec, s.detail, from, end, width),
    broker,
  ];
}

function legend(series, extra = []) {
  return h('ul', { class: 'legend', 'aria-hidden': 'true' },
    series.map((x) => h('li', {}, h('span', { class: `swatch ${x.cls}` }), x.label)), extra);
}

const clock = (t) => h('time', { datetime: new Date(t).toISOString() }, new Date(t).toLocaleTimeString([], { hour12: false }));

/** Where the throughput and backlog come from, in words (and `data-source` for the page test). */
function source(history, rec) {
  if (history) {
    const since = history.measuredSince ? Date.parse(history.measuredSince) : null;
    return h('p', { class: 'hint', id: 'activity-source', dataset: { source: 'broker', since: since ?? '' } },
      `Measured by the broker in ${history.bucketSeconds} s buckets`,
      since ? [' since ', clock(since)] : ': nothing yet, no command has run since it started',
      '. It keeps the last 15 minutes of every queue in memory, so a restart starts them again.');
  }
  return h('p', { class: 'hint', id: 'activity-source', dataset: { source: 'page' } },
    'This broker keeps no history of its queues: sampled from its counters at each refresh since ',
    rec?.since ? clock(rec.since) : 'now', ': the page keeps the last 15 minutes while it is open.');
}

/** Bars on whole buckets (they do not shift between refreshes), the last one holding `now`. */
function throughputPicture(rec, history, span, now, width) {
  let buckets;
  let totals;
  let end;
  let per;
  let collecting;
  if (history) {
    const t = historyThroughput(history, span, BUCKETS);
    ({ buckets, totals, end } = t);
    per = Math.round(t.step / 1000);
    collecting = history.buckets.length === 0;
  } else {
    const step = span / BUCKETS;
    end = (Math.floor(now / step) + 1) * step;
    const from = end - span;
    buckets = bucketThroughput(rec, from, end, BUCKETS);
    totals = throughputTotals(rec, from, end);
    per = Math.round((end - from) / BUCKETS / 1000);
    collecting = !rec || rec.throughput.length === 0;
  }
  const summary = `${n('message', totals.pushed)} pushed, ${totals.delivered} delivered, ${totals.acked} acked, ${totals.failed} failed`;
  let body;
  if (collecting) {
    body = h('p', { class: 'empty' }, history
      ? 'Nothing measured yet: the broker starts measuring at its first command after it starts.'
      : 'Collecting: bars appear from the next refresh on, as messages are pushed, delivered and acked.');
  } else {
    body = [barChart({ buckets, series: SERIES, width, end, id: 'throughput-chart',
      label: `Messages of this queue per ${per} s: ${summary}` }),
    totals.pushed + totals.delivered + totals.acked + totals.failed === 0
      ? h('p', { class: 'muted' }, 'No traffic in this window.') : null];
  }
  return h('figure', { class: 'picture', id: 'throughput-picture' },
    h('figcaption', {}, h('strong', {}, 'Throughput'), ` (messages per ${per} s, all groups)`),
    body,
    h('p', { class: 'totals-line', id: 'throughput-totals', dataset: totals }, summary, '.'),
    legend(SERIES));
}

function backlogPicture(rec, history, detail, from, end, width) {
  const reading = (detail.partitions || []).flatMap((p) => (p.lanes || []).map((l) => l.consumerGroup));
  const measured = history ? historyBacklog(history, from, end) : null;
  const groups = [...new Set([...reading, ...Object.keys(measured ?? {})])].sort();
  let body;
  if (!groups.length) {
    body = h('p', { class: 'empty' }, 'No consumer group has read this queue yet: the backlog is counted per group, from its cursor.');
  } else {
    const lines = groups.map((g, i) => ({
      key: g, label: groupLabel(g), cls: `c${i % 6}`,
      points: measured ? measured[g] ?? []
        : (rec?.backlog ?? []).filter((b) => g in b.groups).map((b) => ({ t: b.t, v: b.groups[g] })),
    }));
    const now = lines.map((l) => `${l.label}: ${l.points[l.points.length - 1]?.v ?? 0}`).join(', ');
    body = [lineChart({ lines, from, end, width, id: 'backlog-chart', gapMs: Math.max(15_000, (end - from) / BUCKETS), label: `Backlog per group (messages after its cursor). Now ${now}` }),
      h('ul', { class: 'legend', id: 'backlog-legend' }, lines.map((l) => h('li', { dataset: { group: l.key, value: l.points[l.points.length - 1]?.v ?? 0 } },
        h('span', { class: `swatch ${l.cls}` }), `${l.label}: ${n('message', l.points[l.points.length - 1]?.v ?? 0)}`)))];
  }
  return h('figure', { class: 'picture', id: 'backlog-picture' },
    h('figcaption', {}, h('strong', {}, 'Backlog'), ' (messages after each group’s cursor)'), body);
}

function lanePicture(rec, detail, from, end, width) {
  const logged = detail.options?.deliveryLog && detail.options.deliveryLog !== 'off';
  const keys = [];
  for (const p of detail.partitions || []) for (const l of p.lanes || []) keys.push([p.name, l.consumerGroup]);
  // Lanes the broker no longer shows (a deleted group) keep their row while they have something to show.
  for (const t of rec?.tracks.values() ?? []) {
    if (!keys.some(([p, g]) => p === t.partition && g === t.group) && (t.events.length || t.leases.length)) keys.push([t.partition, t.group]);
  }
  const many = (detail.partitions || []).length > 1;
  const all = keys.map(([p, g]) => {
    const t = rec?.tracks.get(`${p}\u0000${g}`);
    return { key: `${p}/${g}`, partition: p, group: g, label: many ? `${p} · ${groupLabel(g)}` : groupLabel(g),
      leases: t?.leases ?? [], holds: t?.holds ?? [], events: t?.events ?? [] };
  });
  const busy = (r) => r.leases.some((x) => x.to >= from) || r.holds.some((x) => x.to >= from) || r.events.some((x) => x.t >= from);
  const rows = [...all.filter(busy), ...all.filter((r) => !busy(r))].slice(0, MAX_ROWS);
  const source = logged
    ? `Outcomes from the queue’s delivery log (deliveryLog: ${detail.options.deliveryLog}); leases as each refresh saw them.`
    : 'From each lane’s state at each refresh (leases, holds, failed-ack counts) and the dead-letter queue; a lease shorter than a refresh can fall between two.';
  let body;
  if (!rows.length) body = h('p', { class: 'empty' }, 'No lanes yet: a lane appears when a consumer group first reads a partition.');
  else {
    body = timeline({ rows, from, end, width, id: 'lane-timeline',
      label: `Lane timeline: ${rows.map((r) => `${r.label}: ${r.leases.length} leases, ${r.events.filter((e) => e.kind === 'retry').length} retries, ` +
        `${r.events.filter((e) => e.kind === 'dead-letter').length} dead-lettered`).join('; ')}` });
  }
  return h('figure', { class: 'picture wide', id: 'lane-picture' },
    h('figcaption', {}, h('strong', {}, 'Lane timeline'), ' (one row per partition and group)'),
    body,
    rows.length ? h('ul', { class: 'legend', 'aria-hidden': 'true' },
      h('li', {}, h('span', { class: 'swatch lease' }), 'lease'), h('li', {}, h('span', { class: 'swatch hold' }), 'retry hold'),
      h('li', {}, h('span', { class: 'glyph retry' }, '◆'), 'failed, retried'), h('li', {}, h('span', { class: 'glyph dead-letter' }, '✕'), 'dead-lettered'),
      h('li', {}, h('span', { class: 'glyph expired' }, '○'), 'lease expired'),
      logged ? h('li', {}, h('span', { class: 'glyph completed' }, '|'), 'completed') : null) : null,
    all.length > rows.length ? h('p', { class: 'hint', id: 'lanes-not-shown' },
      `${n('more lane', all.length - rows.length)} not shown (the quietest in this window).`) : null,
    rows.length ? h('p', { class: 'hint' }, source) : null);
}

function brokerPicture(s, width) {
  const series = s.brokerSeries;
  let body;
  if (!series) {
    body = h('p', { class: 'muted' }, 'This broker does not report a per-minute series (GET /api/v1/status has no throughput).');
  } else {
    const end = Math.floor((s.loadedAt || Date.now()) / 60_000) * 60_000 + 60_000;
    const from = end - 60 * 60_000;
    const byMinute = new Map(series.map((p) => [Date.parse(p.timestamp), p]));
    const buckets = Array.from({ length: 60 }, (_, i) => {
      const t = from + i * 60_000;
      const p = byMinute.get(t) ?? {};
      return { from: t, to: t + 60_000, pushed: p.pushed ?? 0, popped: p.popped ?? 0, acked: p.acked ?? 0, failed: p.failed ?? 0 };
    });
    const total = (k) => buckets.reduce((a, b) => a + b[k], 0);
    const summary = `${total('pushed')} pushed, ${total('popped')} delivered, ${total('acked')} acked, ${total('failed')} failed`;
    body = series.length
      ? [barChart({ buckets, series: BROKER_SERIES, width, end, id: 'broker-chart', label: `All queues per minute, last hour: ${summary}` }),
        h('p', { class: 'totals-line', id: 'broker-totals' }, summary, '.'), legend(BROKER_SERIES)]
      : h('p', { class: 'empty' }, 'No traffic measured in the last hour. The broker keeps this series in memory: it starts empty when the broker starts.');
  }
  return h('figure', { class: 'picture wide', id: 'broker-picture' },
    h('figcaption', {}, h('strong', {}, 'All queues, last hour'), ' (messages per minute, measured by the broker)'), body);
}
