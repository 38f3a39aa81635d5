// The queue list and the selected queue's options, partitions and lanes (one lane per partition and
// consumer group: cursor, backlog, lease with a live countdown, retry budget, redeliveries, retry hold).
import { h, replaceKeepingFocus, scroller, timeCell, shortId, n } from '../dom.js';
import { store, QUEUE_MODE, leaseHolders } from '../state.js';
import { refreshCountdowns } from '../countdown.js';

const listEl = () => document.getElementById('queue-list');
const detailEl = () => document.getElementById('queue-detail');
let lastList = '';
let lastDetail = '';

export function renderQueues(s) {
  const listSig = JSON.stringify([s.conn?.label, s.queues, s.selected]);
  if (listSig !== lastList) {
    lastList = listSig;
    replaceKeepingFocus(listEl(), queueList(s));
  }
  // Lane phases depend on the clock too (a lease expires with no new data), so they join the signature.
  const detailSig = JSON.stringify([s.detail, s.dlq.length, phases(s.detail)]);
  if (detailSig !== lastDetail) {
    lastDetail = detailSig;
    replaceKeepingFocus(detailEl(), s.detail ? queueDetail(s.detail) : []);
    refreshCountdowns();
  }
}

function phases(d) {
  const now = Date.now();
  return (d?.partitions || []).flatMap((p) => (p.lanes || []).map((l) =>
    `${l.leaseId && Date.parse(l.leaseExpiresAt) > now ? 'L' : ''}${l.holdUntil && Date.parse(l.holdUntil) > now ? 'H' : ''}`)).join(',');
}

function queueList(s) {
  if (!s.conn) return h('p', { class: 'muted' }, 'Connect to a broker to see its queues.');
  if (!s.queues.length) {
    return h('p', { class: 'empty' }, 'No queues yet. Configure one below, or push a message: a push creates its queue.');
  }
  const rows = s.queues.map((q) => h('tr', { 'aria-current': q.name === s.selected ? 'true' : null },
    h('th', { scope: 'row' }, h('button', {
      type: 'button', class: 'link', dataset: { focus: `q:${q.name}`, queue: q.name },
      'aria-pressed': q.name === s.selected ? 'true' : 'false',
      onclick: () => store.set({ selected: q.name, partition: null, msgOffset: null, dlqGroup: '', dlqSelected: new Set() }),
    }, q.name === '' ? '(empty name)' : q.name)),
    h('td', {}, [q.namespace, q.task].filter(Boolean).join(' / ') || h('span', { class: 'muted' }, '—')),
    h('td', { class: 'num' }, q.partitions),
    h('td', { class: 'num' }, q.messages?.total ?? 0),
    h('td', { class: 'num' }, q.messages?.pending ?? 0),
    h('td', { class: 'num' }, q.messages?.processing ?? 0)));
  return [scroller('Queue list', h('table', { class: 'grid', id: 'queue-table' },
    h('caption', { class: 'sr-only' }, 'Queues. Choose one to see its partitions and lanes.'),
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Queue'), h('th', { scope: 'col' }, 'Namespace / task'),
      h('th', { scope: 'col', class: 'num' }, 'Partitions'), h('th', { scope: 'col', class: 'num' }, 'Messages'),
      h('th', { scope: 'col', class: 'num' }, 'Pending'), h('th', { scope: 'col', class: 'num' }, 'In flight'))),
    h('tbody', {}, rows)), 'queues'),
    h('p', { class: 'hint' }, 'Pending and in flight count the queue-mode group; each consumer group’s own backlog is in its lane below.')];
}

const OPTION_LABELS = [
  ['leaseTime', 'Lease', (v) => `${v} s`],
  ['retryLimit', 'Retry limit', (v) => v],
  ['retryDelay', 'Retry delay', (v) => `${v} ms`],
  ['deadLetterQueue', 'Dead-letter queue', (v, o) => (v || o.dlqAfterMaxRetries ? 'on' : 'off (exhausted messages are dropped)')],
  ['delayedProcessing', 'Delayed processing', (v) => `${v} s`],
  ['windowBuffer', 'Window buffer', (v) => `${v} s`],
  ['priority', 'Priority', (v) => v],
  ['ttl', 'TTL', (v) => `${v} s`],
  ['maxSize', 'Max size', (v) => v],
  ['retentionEnabled', 'Retention', (v, o) => (v ? `on: ${o.retentionSeconds} s, completed ${o.completedRetentionSeconds} s` : 'off')],
  ['maxWaitTimeSeconds', 'Max wait (eviction)', (v) => (v ? `${v} s` : 'off')],
  ['encryptionEnabled', 'Encryption', (v) => (v ? 'on' : 'off')],
];

function queueDetail(d) {
  const o = d.options || {};
  const t = d.totals || {};
  return h('article', { class: 'detail', 'aria-labelledby': 'detail-h' },
    h('h3', { id: 'detail-h' }, 'Queue ', h('q', {}, d.name)),
    h('p', { class: 'totals' },
      stat('messages', t.total), stat('pending', t.pending), stat('in flight', t.processing),
      stat('completed', t.completed), stat('dead letters', t.deadLetter, t.deadLetter ? 'warn' : '')),
    h('details', { class: 'options' },
      h('summary', {}, 'Options'),
      h('dl', { class: 'kv' }, OPTION_LABELS.filter(([k]) => k in o).flatMap(([k, label, f]) => [h('dt', {}, label), h('dd', {}, String(f(o[k], o)))]))),
    (d.partitions || []).map((p) => partition(d, p, o)));
}

function stat(label, value, cls = '') {
  return h('span', { class: `stat ${cls}` }, h('strong', {}, value ?? 0), ` ${label}`);
}

function partition(d, p, o) {
  const count = p.stats?.total ?? 0;
  const range = p.nextOffset > p.firstRetainedOffset ? `offsets ${p.firstRetainedOffset}–${p.nextOffset - 1}` : 'empty';
  return h('section', { class: 'partition', 'aria-label': `Partition ${p.name}` },
    h('h4', {}, 'Partition ', h('q', {}, p.name), ' ', h('span', { class: 'muted' }, `${n('message', count)}, ${range}`)),
    h('div', { class: 'row' },
      h('button', { type: 'button', class: 'small', dataset: { focus: `browse:${p.name}` },
        onclick: () => {
          store.set({ partition: p.name, msgOffset: null });
          document.getElementById('messages-h').scrollIntoView({ block: 'start' });
          document.getElementById('messages-view').querySelector('select, button')?.focus({ preventScroll: true });
        } }, 'Browse messages'),
      p.stats?.deadLetter ? h('span', { class: 'badge warn' }, `${n('dead letter', p.stats.deadLetter)}`) : null),
    (p.lanes || []).length
      ? h('ul', { class: 'lanes', 'aria-label': `Lanes of partition ${p.name}` }, p.lanes.map((l) => h('li', {}, lane(l, o))))
      : h('p', { class: 'muted' }, 'No consumer group has read this partition yet.'));
}

function groupName(g) {
  return g === QUEUE_MODE ? 'queue mode' : g;
}

/** One lane as a card. */
export function lane(l, o) {
  const now = Date.now();
  const expires = l.leaseExpiresAt ? Date.parse(l.leaseExpiresAt) : null;
  const hold = l.holdUntil ? Date.parse(l.holdUntil) : null;
  const leased = l.leaseId && expires && expires > now;
  const held = hold && hold > now;
  const stateLabel = leased ? 'Leased' : held ? 'Held for retry' : l.backlog > 0 ? 'Ready' : 'Caught up';
  const stateCls = leased ? 'leased' : held ? 'held' : l.backlog > 0 ? 'ready' : 'idle';
  const limit = o.retryLimit ?? 0;
  const leaseMs = (o.leaseTime || 60) * 1000;
  const span = l.batchEnd !== null && l.batchEnd !== undefined && leased ? `${l.committedOffset + 1}–${l.batchEnd}` : null;
  return h('article', { class: `lane ${stateCls}`, dataset: { group: l.consumerGroup } },
    h('header', {},
      h('h5', {}, groupName(l.consumerGroup)),
      h('span', { class: `badge ${stateCls}`, dataset: { role: 'lane-state' } }, stateLabel)),
    h('dl', { class: 'kv lane-kv' },
      h('dt', {}, 'Committed offset'), h('dd', { dataset: { k: 'committed' } }, l.committedOffset < 0 ? 'none yet' : l.committedOffset),
      h('dt', {}, 'Backlog'), h('dd', { dataset: { k: 'backlog' } }, n('message', l.backlog)),
      h('dt', {}, 'Lease holder'), h('dd', { dataset: { k: 'lease' } }, leased
        ? [leaseHolders.has(l.leaseId) ? `${leaseHolders.get(l.leaseId)}, ` : '', 'lease ', shortId(l.leaseId)]
        : h('span', { class: 'muted' }, 'none')),
      h('dt', {}, 'Lease expires'), h('dd', { dataset: { k: 'expires' } }, leased
        ? [h('span', { dataset: { until: expires, after: 'expired, free at next pop', before: 'in ' } }), ' ',
          h('progress', { max: '1', value: '1', dataset: { until: expires, span: leaseMs }, 'aria-label': 'Lease time left' })]
        : h('span', { class: 'muted' }, '—')),
      h('dt', {}, 'Leased span'), h('dd', {}, span ? `offsets ${span}` : h('span', { class: 'muted' }, '—')),
      h('dt', {}, 'Retries used'), h('dd', { dataset: { k: 'retries' } },
        `${l.retryCount} of ${limit}`, ' ',
        h('meter', { min: '0', max: String(Math.max(limit, 1)), value: String(Math.min(l.retryCount, Math.max(limit, 1))),
          low: String(Math.max(limit, 1) * 0.5), high: String(Math.max(limit, 1) * 0.99), optimum: '0', 'aria-label': 'Retry budget used' })),
      h('dt', {}, 'Redeliveries'), h('dd', { dataset: { k: 'attempts' } }, l.attemptCount),
      h('dt', {}, o.retryBackoff ? 'Retry hold (backoff)' : 'Retry hold'), h('dd', { dataset: { k: 'hold' } }, held
        ? h('span', { dataset: { until: hold, after: 'over', before: 'for ' } })
        : h('span', { class: 'muted' }, 'none')),
      ...(l.quarantinedOffset === undefined ? [] : [
        h('dt', {}, 'Quarantine'),
        h('dd', { dataset: { k: 'quarantine' } },
          `offset ${l.quarantinedOffset} is delivered alone; ${l.expiryStreak ?? 0} of ${o.reclaimLimit ?? '?'} lease expiries before it is dead-lettered`),
      ])));
}

export { timeCell };
