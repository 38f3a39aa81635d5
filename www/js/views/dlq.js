// The dead-letter queue of the selected queue, per consumer group: error, retry count, payload; replay or
// delete one at a time or the selected ones.
import { h, replaceKeepingFocus, scroller, timeCell, payloadCell, n } from '../dom.js';
import { store, QUEUE_MODE } from '../state.js';

const enc = encodeURIComponent;
let last = '';
let ctx = { refresh: async () => {}, notify: () => {}, fail: () => {} };
let busy = false;

export function initDlq(c) {
  ctx = c;
}

export function renderDlq(s) {
  const sig = JSON.stringify([s.conn?.label, s.selected, s.dlqGroup, s.dlq, [...s.dlqSelected], busy, s.detail ? groupsOf(s.detail) : []]);
  if (sig === last) return;
  last = sig;
  replaceKeepingFocus(document.getElementById('dlq-view'), view(s));
}

function groupsOf(d) {
  return [...new Set((d.partitions || []).flatMap((p) => (p.lanes || []).map((l) => l.consumerGroup)))].sort();
}

function label(g) {
  return g === QUEUE_MODE ? 'queue mode' : g;
}

function view(s) {
  if (!s.detail) return h('p', { class: 'muted' }, 'Choose a queue to see its dead letters.');
  const groups = [...new Set([...groupsOf(s.detail), ...s.dlq.map((d) => d.consumerGroup)])].sort();
  const sel = s.dlqSelected;
  const all = s.dlq.length > 0 && s.dlq.every((d) => sel.has(d.id));
  const chosen = s.dlq.filter((d) => sel.has(d.id));
  const controls = h('div', { class: 'row controls' },
    h('label', { class: 'inline' }, 'Group ',
      h('select', { dataset: { focus: 'dlq-group' }, onchange: (e) => { store.set({ dlqGroup: e.target.value, dlqSelected: new Set() }); ctx.refresh(); } },
        h('option', { value: '', selected: s.dlqGroup === '' }, 'all groups'),
        groups.map((g) => h('option', { value: g, selected: g === s.dlqGroup }, label(g))))),
    h('button', { type: 'button', class: 'small', dataset: { focus: 'dlq-replay-sel' }, disabled: busy || !chosen.length,
      onclick: () => act('replay', chosen) }, `Replay selected (${chosen.length})`),
    h('button', { type: 'button', class: 'small danger', dataset: { focus: 'dlq-delete-sel' }, disabled: busy || !chosen.length,
      onclick: () => act('delete', chosen) }, `Delete selected (${chosen.length})`));
  const count = h('span', { class: 'muted', id: 'dlq-count' }, s.dlq.length ? `${n('dead letter', s.dlq.length)}, newest first.` : '');
  if (!s.dlq.length) {
    return [controls, h('p', { class: 'empty', id: 'dlq-empty' }, 'No dead letters. Messages land here when a group runs out of retries.')];
  }
  const rows = s.dlq.map((d) => h('tr', { dataset: { id: d.id } },
    h('td', {}, h('input', { type: 'checkbox', checked: sel.has(d.id), dataset: { focus: `dlq-sel:${d.id}` },
      'aria-label': `Select dead letter at offset ${d.offset ?? '?'} (${d.transactionId})`,
      onchange: (e) => {
        const next = new Set(store.state.dlqSelected);
        if (e.target.checked) next.add(d.id); else next.delete(d.id);
        store.set({ dlqSelected: next });
      } })),
    h('td', {}, timeCell(d.failedAt)),
    h('td', {}, label(d.consumerGroup)),
    h('td', {}, d.partition, d.offset !== undefined ? h('span', { class: 'muted' }, ` @${d.offset}`) : null),
    h('td', { class: 'error-text' }, d.errorMessage || h('span', { class: 'muted' }, '—')),
    h('td', { class: 'num' }, d.retryCount),
    h('td', {}, payloadCell(d.data)),
    h('td', { class: 'actions' },
      h('button', { type: 'button', class: 'small', disabled: busy, dataset: { focus: `dlq-replay:${d.id}` },
        'aria-label': `Replay dead letter at offset ${d.offset ?? '?'}`, onclick: () => act('replay', [d]) }, 'Replay'),
      h('button', { type: 'button', class: 'small danger', disabled: busy, dataset: { focus: `dlq-delete:${d.id}` },
        'aria-label': `Delete dead letter at offset ${d.offset ?? '?'}`, onclick: () => act('delete', [d]) }, 'Delete'))));
  const selectAll = h('label', { class: 'check' }, h('input', { type: 'checkbox', id: 'dlq-all', checked: all, dataset: { focus: 'dlq-all' },
    onchange: (e) => store.set({ dlqSelected: e.target.checked ? new Set(s.dlq.map((d) => d.id)) : new Set() }) }), ' Select all');
  return [controls, h('div', { class: 'row' }, selectAll, count),
    scroller('Dead letters', h('table', { class: 'grid', id: 'dlq-table' },
      h('caption', { class: 'sr-only' }, 'Dead letters, newest first'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Select'),
        h('th', { scope: 'col' }, 'Failed'), h('th', { scope: 'col' }, 'Group'), h('th', { scope: 'col' }, 'Partition'),
        h('th', { scope: 'col' }, 'Error'), h('th', { scope: 'col', class: 'num' }, 'Retries'), h('th', { scope: 'col' }, 'Payload'),
        h('th', { scope: 'col' }, 'Actions'))),
      h('tbody', {}, rows)), 'dlq')];
}

/** Replays or deletes dead letters one by one and says what happened. */
async function act(kind, rows) {
  const conn = store.state.conn;
  if (!conn || busy || !rows.length) return;
  busy = true;
  store.emit();
  let done = 0;
  const problems = [];
  for (const d of rows) {
    try {
      if (kind === 'replay') await conn.request('POST', `/api/v1/dlq/${enc(d.id)}/replay`, {});
      else await conn.request('DELETE', `/api/v1/messages/${enc(d.partitionId)}/${enc(d.transactionId)}`);
      done += 1;
    } catch (e) {
      problems.push(e.message);
    }
  }
  busy = false;
  store.set({ dlqSelected: new Set() });
  const verb = kind === 'replay' ? 'Replayed' : 'Deleted';
  if (done) ctx.notify(`${verb} ${n('dead letter', done)}${kind === 'replay' ? ': pushed back to the end of their partition' : ''}.`);
  if (problems.length) ctx.fail(`${problems.length} of ${rows.length} could not be ${kind === 'replay' ? 'replayed' : 'deleted'}: ${problems[0]}`);
  await ctx.refresh();
}
