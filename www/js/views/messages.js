// The message browser of one partition: offset, transactionId, created time, payload, where each
// message stands for a chosen consumer group (committed, leased, waiting), and the trace events
// consumers recorded about it (`msg.trace(...)`, GET /traces/:partitionId/:transactionId), opened per
// message.
import { h, replaceKeepingFocus, scroller, timeCell, payloadCell } from '../dom.js';
import { store, QUEUE_MODE, MESSAGE_PAGE } from '../state.js';

let last = '';
let kick = () => {};

export function initMessages(refreshNow) {
  kick = refreshNow;
}

export function renderMessages(s) {
  const sig = JSON.stringify([s.conn?.label, s.selected, s.partition, s.msgGroup, s.msgOffset, s.messages, s.detail?.partitions,
    s.deliveries, s.traces]);
  if (sig === last) return;
  last = sig;
  replaceKeepingFocus(document.getElementById('messages-view'), view(s));
}

function view(s) {
  if (!s.detail) return h('p', { class: 'muted' }, 'Choose a queue to browse its messages.');
  const parts = s.detail.partitions || [];
  const p = parts.find((x) => x.name === s.partition);
  if (!p) return h('p', { class: 'muted' }, 'This queue has no partitions yet.');
  const laneGroups = (p.lanes || []).map((l) => l.consumerGroup);
  const groups = [...new Set([QUEUE_MODE, ...laneGroups])];
  // Show a group that has read this partition unless the user chose one.
  const group = laneGroups.includes(s.msgGroup) || (s.msgGroupChosen && groups.includes(s.msgGroup)) ? s.msgGroup : (laneGroups[0] ?? QUEUE_MODE);
  const laneOf = (p.lanes || []).find((l) => l.consumerGroup === group);
  const first = p.firstRetainedOffset ?? 0;
  const next = p.nextOffset ?? 0;
  const shownFirst = s.messages[0]?.offset;
  const controls = h('div', { class: 'row controls' },
    h('label', { class: 'inline' }, 'Partition ',
      h('select', { dataset: { focus: 'msg-partition' }, onchange: (e) => { store.set({ partition: e.target.value, msgOffset: null }); kick(); } },
        parts.map((x) => h('option', { value: x.name, selected: x.name === p.name }, x.name)))),
    h('label', { class: 'inline' }, 'Cursor of ',
      h('select', { dataset: { focus: 'msg-group' }, onchange: (e) => store.set({ msgGroup: e.target.value, msgGroupChosen: true }) },
        groups.map((g) => h('option', { value: g, selected: g === group }, g === QUEUE_MODE ? 'queue mode' : g)))),
    h('span', { class: 'pager' },
      h('button', { type: 'button', class: 'small', dataset: { focus: 'msg-older' }, disabled: shownFirst === undefined || shownFirst <= first,
        onclick: () => { store.set({ msgOffset: Math.max(first, (shownFirst ?? first) - MESSAGE_PAGE) }); kick(); } }, 'Older'),
      h('button', { type: 'button', class: 'small', dataset: { focus: 'msg-newer' }, disabled: s.msgOffset === null,
        onclick: () => {
          const to = (shownFirst ?? first) + MESSAGE_PAGE;
          store.set({ msgOffset: to + MESSAGE_PAGE >= next ? null : to }); kick();
        } }, 'Newer'),
      h('span', { class: 'muted' }, s.msgOffset === null ? 'following the newest' : 'paged')));
  if (!s.messages.length) return [controls, h('p', { class: 'empty' }, 'No messages retained in this partition.')];
  const now = Date.now();
  const leased = laneOf?.leaseId && Date.parse(laneOf.leaseExpiresAt) > now;
  const where = (m) => {
    if (!laneOf) return ['waiting', 'not read yet'];
    if (m.offset <= laneOf.committedOffset) return ['done', 'committed'];
    if (leased && laneOf.batchEnd !== null && m.offset <= laneOf.batchEnd) return ['leased', 'leased'];
    return ['waiting', 'waiting'];
  };
  const rows = [...s.messages].reverse().flatMap((m) => {
    const [cls, label] = where(m);
    const key = traceKey(m);
    const open = s.traces?.key === key;
    const count = m.traceCount ?? 0;
    const row = h('tr', { class: cls },
      h('td', { class: 'num' }, m.offset),
      h('td', {}, h('span', { class: `badge ${cls}` }, label)),
      h('td', {}, h('code', { class: 'id', title: m.transactionId }, m.transactionId)),
      h('td', {}, timeCell(m.createdAt)),
      h('td', {}, payloadCell(m.payload ?? m.data)),
      h('td', {}, count
        ? h('button', { type: 'button', class: 'small', 'aria-expanded': open ? 'true' : 'false', dataset: { focus: `traces-${key}`, traces: m.transactionId },
          onclick: () => toggleTraces(m) }, `${count} ${count === 1 ? 'event' : 'events'}`)
        : h('span', { class: 'muted' }, '—')));
    return open ? [row, traceRow(s.traces)] : [row];
  });
  return [controls,
    scroller('Messages, newest first', h('table', { class: 'grid', id: 'messages-table' },
      h('caption', { class: 'sr-only' }, `Messages of partition ${p.name}, newest first`),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', class: 'num' }, 'Offset'), h('th', { scope: 'col' }, 'For this group'),
        h('th', { scope: 'col' }, 'Transaction id'), h('th', { scope: 'col' }, 'Created'), h('th', { scope: 'col' }, 'Payload'),
        h('th', { scope: 'col' }, 'Traces'))),
      h('tbody', {}, rows)), 'messages'),
    deliveryLog(s, p)];
}

/** The partition's delivery attempts, newest first, when the queue keeps a delivery log. */
function deliveryLog(s, p) {
  const mode = s.detail.options?.deliveryLog;
  if (!mode || mode === 'off') return null;
  const rows = (s.deliveries || []).map((d) => h('tr', { class: d.outcome === 'completed' || d.outcome === 'auto_acked' ? 'done' : 'failed' },
    h('td', {}, timeCell(d.at)),
    h('td', {}, d.consumerGroup === QUEUE_MODE ? 'queue mode' : d.consumerGroup),
    h('td', { class: 'num' }, d.fromOffset === d.toOffset ? d.fromOffset : `${d.fromOffset}–${d.toOffset}`),
    h('td', { class: 'num' }, d.deliveryAttempt),
    h('td', {}, h('span', { class: 'badge' }, d.outcome.replace('_', ' '))),
    h('td', {}, d.error ?? '')));
  return h('section', { 'aria-label': 'Delivery log' },
    h('h4', {}, `Delivery log (${mode})`),
    rows.length
      ? scroller('Delivery attempts, newest first', h('table', { class: 'grid', id: 'deliveries-table' },
        h('caption', { class: 'sr-only' }, `Delivery attempts on partition ${p.name}, newest first`),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'When'), h('th', { scope: 'col' }, 'Group'), h('th', { scope: 'col', class: 'num' }, 'Offsets'),
          h('th', { scope: 'col', class: 'num' }, 'Attempt'), h('th', { scope: 'col' }, 'Outcome'), h('th', { scope: 'col' }, 'Error'))),
        h('tbody', {}, rows)), 'deliveries')
      : h('p', { class: 'muted' }, 'No delivery attempt recorded on this partition yet.'));
}

const traceKey = (m) => `${m.partitionId}/${m.transactionId}`;

/** Opens (loading them) or closes the trace events of message `m`. */
async function toggleTraces(m) {
  const key = traceKey(m);
  if (store.state.traces?.key === key) {
    store.set({ traces: null });
    return;
  }
  const conn = store.state.conn;
  store.set({ traces: { key, events: null, error: null } });
  try {
    const { body } = await conn.request('GET', `/api/v1/traces/${encodeURIComponent(m.partitionId)}/${encodeURIComponent(m.transactionId)}`);
    if (store.state.traces?.key === key) store.set({ traces: { key, events: body?.traces || [], error: null } });
  } catch (e) {
    if (store.state.traces?.key === key) store.set({ traces: { key, events: [], error: e.message } });
  }
}

/** The row under a message listing its trace events, oldest first. */
function traceRow(t) {
  let content;
  if (t.error) content = h('p', { class: 'error' }, `Could not load the traces: ${t.error}`);
  else if (t.events === null) content = h('p', { class: 'muted' }, 'Loading traces…');
  else if (!t.events.length) content = h('p', { class: 'muted' }, 'No trace events (they go with their message).');
  else {
    content = h('ol', { class: 'traces', 'aria-label': 'Trace events, oldest first' },
      t.events.map((e) => h('li', { dataset: { trace: e.id } },
        timeCell(e.createdAt), ' ',
        h('span', { class: `badge ${e.eventType === 'error' ? 'error' : 'done'}` }, e.eventType), ' ',
        e.consumerGroup === QUEUE_MODE ? 'queue mode' : e.consumerGroup,
        (e.traceNames || []).length ? [' · ', h('code', {}, e.traceNames.join(', '))] : null, ' ',
        payloadCell(e.data))));
  }
  return h('tr', { class: 'trace-row' }, h('td', { colspan: '6' }, content));
}
