// Dead letters by filter: choose them (queue, group, partition, error text, when they were
// dead-lettered, how many), preview what matches (POST /dlq/replay or /dlq/delete with dryRun: the
// count and the oldest few), confirm, then watch the work go: the page asks for the previewed rows in
// calls of CALL_ROWS, oldest first, and shows how many are done after each call (the broker itself works
// in chunks, so other requests are served meanwhile). A replay works by message: the newest row at a
// message's address is pushed back once as transactionId dlq:<row id>, and every row there leaves the
// dead-letter queue (other groups' rows for that message too, since the copy reaches every group), so a
// second replay of the same filter finds nothing. Progress counts the selected rows (`selected`).
import { h, n, replaceKeepingFocus, timeCell } from '../dom.js';
import { store, QUEUE_MODE } from '../state.js';

/** Rows one call asks the broker for: a large set shows its progress call by call. */
export const CALL_ROWS = 250;

let ctx = { refresh: async () => {}, notify: () => {} };
/** idle | previewing | preview | running | done */
let run = { phase: 'idle' };
let queueTouched = false;

const $ = (id) => document.getElementById(id);
const verb = (action) => (action === 'replay' ? 'Replay' : 'Delete');
const done = (action) => (action === 'replay' ? 'Replayed' : 'Deleted');
const label = (g) => (g === QUEUE_MODE ? 'queue mode' : g);

export function initDlqBulk(c) {
  ctx = c;
  $('dlq-bulk-view').replaceChildren(form(), h('div', { id: 'dlq-bulk-out', 'aria-live': 'polite' }));
  draw();
}

/** Keeps the queue field on the selected queue until someone types in it, and offers the known groups. */
export function syncDlqBulk(s) {
  const queue = $('bulk-queue');
  if (queue && !queueTouched && document.activeElement !== queue && queue.value !== (s.selected ?? '')) queue.value = s.selected ?? '';
  const list = $('bulk-groups');
  if (!list) return;
  const groups = [QUEUE_MODE, ...new Set([...(s.detail?.partitions ?? []).flatMap((p) => (p.lanes ?? []).map((l) => l.consumerGroup)),
    ...s.dlq.map((d) => d.consumerGroup)])].filter((g, i, all) => all.indexOf(g) === i);
  const key = groups.join('\n');
  if (list.dataset.groups === key) return;
  list.dataset.groups = key;
  list.replaceChildren(...groups.map((g) => h('option', { value: g }, label(g))));
}

function field(id, text, input, hint) {
  return h('div', { class: 'field' }, h('label', { for: id }, text), input,
    hint ? h('small', { class: 'hint', id: `${id}-hint` }, hint) : null);
}

function form() {
  const f = h('form', { id: 'dlq-bulk-form', novalidate: true, 'aria-describedby': 'bulk-msg' },
    h('h3', {}, 'Replay or delete by filter'),
    h('p', { class: 'hint' }, 'Every field is optional: an empty one matches anything. Preview first: nothing changes until you confirm.'),
    h('div', { class: 'pair four' },
      field('bulk-queue', 'Queue', h('input', { id: 'bulk-queue', name: 'queue', autocomplete: 'off', list: 'queue-names', placeholder: 'all queues',
        oninput: () => { queueTouched = true; } })),
      field('bulk-group', 'Consumer group', h('input', { id: 'bulk-group', name: 'consumerGroup', autocomplete: 'off', list: 'bulk-groups', placeholder: 'all groups' }),
        `${QUEUE_MODE} is queue mode.`),
      field('bulk-partition', 'Partition', h('input', { id: 'bulk-partition', name: 'partition', autocomplete: 'off', placeholder: 'all partitions' })),
      field('bulk-error', 'Error contains', h('input', { id: 'bulk-error', name: 'errorContains', autocomplete: 'off', placeholder: 'any error' }))),
    h('div', { class: 'pair three' },
      field('bulk-from', 'Dead-lettered from', h('input', { id: 'bulk-from', name: 'from', type: 'datetime-local', step: '1' }), 'Your local time.'),
      field('bulk-to', 'Dead-lettered to', h('input', { id: 'bulk-to', name: 'to', type: 'datetime-local', step: '1' })),
      field('bulk-limit', 'At most', h('input', { id: 'bulk-limit', name: 'limit', type: 'number', min: '1', step: '1', inputmode: 'numeric', placeholder: 'no limit' }),
        'Oldest first.')),
    h('datalist', { id: 'bulk-groups' }),
    h('div', { class: 'row controls' },
      h('button', { type: 'submit', id: 'bulk-preview-replay', value: 'replay' }, 'Preview replay'),
      h('button', { type: 'submit', id: 'bulk-preview-delete', value: 'delete', class: 'danger' }, 'Preview delete')),
    h('p', { class: 'form-msg', id: 'bulk-msg', role: 'alert' }));
  f.addEventListener('submit', (e) => {
    e.preventDefault();
    preview(e.submitter?.value === 'delete' ? 'delete' : 'replay');
  });
  // A preview is of the filter it was made with: changing the filter asks for a new one.
  f.addEventListener('input', () => {
    if (run.phase === 'preview') {
      run = { phase: 'idle' };
      say('The filter changed: preview again.');
      draw();
    }
  });
  return f;
}

function say(text, bad = false) {
  const msg = $('bulk-msg');
  msg.textContent = text;
  msg.classList.toggle('bad', bad);
}

/** The filter in the form as the broker's body, or `{error}` in words. */
export function readFilter(f) {
  const filter = {};
  for (const key of ['queue', 'consumerGroup', 'partition']) {
    const v = f.elements[key].value.trim();
    if (v) filter[key] = v;
  }
  if (f.elements.errorContains.value) filter.errorContains = f.elements.errorContains.value;
  for (const key of ['from', 'to']) {
    const raw = f.elements[key].value;
    if (!raw) continue;
    const t = new Date(raw);
    if (Number.isNaN(t.getTime())) return { error: `“${raw}” is not a date and time for “${key}”.` };
    filter[key] = t.toISOString();
  }
  if (filter.from && filter.to && filter.from > filter.to) {
    return { error: '“Dead-lettered from” is later than “to”: no dead letter can match. Swap them or clear one.' };
  }
  const limit = f.elements.limit.value.trim();
  if (limit) {
    if (!/^\d+$/.test(limit) || Number(limit) < 1) return { error: `“At most” must be a whole number of at least 1, or empty for no limit (got “${limit}”).` };
    filter.limit = Number(limit);
  }
  return { filter };
}

async function preview(action) {
  const conn = store.state.conn;
  if (!conn || run.phase === 'running' || run.phase === 'previewing') return;
  const { filter, error } = readFilter($('dlq-bulk-form'));
  if (error) {
    say(error, true);
    return;
  }
  say('');
  run = { phase: 'previewing', action, filter };
  draw();
  try {
    const { body } = await conn.request('POST', `/api/v1/dlq/${action}`, { ...filter, dryRun: true });
    if (conn !== store.state.conn) return;
    run = { phase: 'preview', action, filter, count: body.count, sample: body.sample ?? [] };
  } catch (e) {
    run = { phase: 'idle' };
    say(e.message, true);
  }
  draw();
}

async function confirm() {
  const conn = store.state.conn;
  if (!conn || run.phase !== 'preview') return;
  const { action, filter, count } = run;
  run = { phase: 'running', action, filter, total: count, done: 0, removed: 0, calls: 0, queued: 0, duplicates: 0, stop: false };
  draw();
  const r = run;
  try {
    // At most the previewed count, oldest first: rows dead-lettered after the preview are newer, so
    // they come only after every previewed row that is still there.
    while (r.done < r.total && !r.stop) {
      const limit = Math.min(CALL_ROWS, r.total - r.done);
      const { body } = await conn.request('POST', `/api/v1/dlq/${action}`, { ...filter, limit });
      const removed = action === 'replay' ? body.replayed : body.deleted;
      const got = body.selected ?? removed;
      r.calls += 1;
      r.done += got;
      r.removed += removed;
      r.queued += body.queued ?? 0;
      r.duplicates += body.duplicates ?? 0;
      draw();
      if (got < limit) break; // nothing more matches
    }
    r.phase = 'done';
  } catch (e) {
    r.phase = 'done';
    r.error = e.message;
  }
  draw();
  const what = `${done(action)} ${n('dead letter', r.done)}`;
  if (r.error) say(`${what}, then the broker refused: ${r.error}`, true);
  else ctx.notify(`${what}${action === 'replay' ? ': pushed back to the end of their partitions' : ''}.`);
  await ctx.refresh();
}

function draw() {
  const out = $('dlq-bulk-out');
  if (!out) return;
  for (const b of document.querySelectorAll('#dlq-bulk-form button')) b.disabled = run.phase === 'running' || run.phase === 'previewing';
  replaceKeepingFocus(out, result());
}

function describe(filter) {
  const parts = [];
  parts.push(filter.queue ? `queue ${filter.queue}` : 'every queue');
  if (filter.consumerGroup) parts.push(`group ${label(filter.consumerGroup)}`);
  if (filter.partition) parts.push(`partition ${filter.partition}`);
  if (filter.errorContains) parts.push(`error containing “${filter.errorContains}”`);
  if (filter.from) parts.push(`from ${new Date(filter.from).toLocaleString()}`);
  if (filter.to) parts.push(`to ${new Date(filter.to).toLocaleString()}`);
  if (filter.limit) parts.push(`at most ${filter.limit}`);
  return parts.join(', ');
}

function result() {
  switch (run.phase) {
    case 'previewing':
      return h('p', { class: 'muted' }, 'Counting…');
    case 'preview': {
      const { action, count, sample, filter } = run;
      if (!count) return h('p', { class: 'empty', id: 'bulk-none', dataset: { count: 0 } }, `No dead letters match (${describe(filter)}).`);
      return h('div', { id: 'bulk-preview', dataset: { action, count } },
        h('p', {}, h('strong', { id: 'bulk-count' }, n('dead letter', count)), ` match (${describe(filter)}). `,
          sample.length < count ? `The oldest ${sample.length}:` : 'They are:'),
        h('table', { class: 'grid', id: 'bulk-sample' },
          h('caption', { class: 'sr-only' }, 'The oldest matching dead letters'),
          h('thead', {}, h('tr', {}, ['Dead-lettered', 'Queue', 'Group', 'Partition', 'Error'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, sample.map((d) => h('tr', { dataset: { id: d.id } },
            h('td', {}, timeCell(d.failedAt)), h('td', {}, d.queue), h('td', {}, label(d.consumerGroup)),
            h('td', {}, d.partition, d.offset !== undefined ? h('span', { class: 'muted' }, ` @${d.offset}`) : null),
            h('td', { class: 'error-text' }, d.errorMessage || '—'))))),
        h('div', { class: 'row controls' },
          h('button', { type: 'button', id: 'bulk-confirm', class: action === 'delete' ? 'danger' : 'primary', dataset: { focus: 'bulk-confirm' },
            onclick: confirm }, `${verb(action)} ${n('dead letter', count)}`),
          h('button', { type: 'button', id: 'bulk-cancel', dataset: { focus: 'bulk-cancel' },
            onclick: () => { run = { phase: 'idle' }; draw(); } }, 'Cancel')),
        action === 'delete' ? h('p', { class: 'hint' }, 'Deleting cannot be undone.') : null);
    }
    case 'running':
    case 'done': {
      const r = run;
      const data = { action: r.action, done: r.done, total: r.total, calls: r.calls, queued: r.queued, duplicates: r.duplicates };
      const line = r.phase === 'running'
        ? `${r.action === 'replay' ? 'Replaying' : 'Deleting'}: ${r.done} of ${r.total} done (${n('call', r.calls)} so far).`
        : `${done(r.action)} ${r.done} of ${r.total} in ${n('call', r.calls)}` +
          (r.action === 'replay' ? `: ${r.queued} pushed back, ${r.duplicates} already there (duplicates, nothing added).` : '.') +
          (r.removed > r.done ? ` ${n('row', r.removed - r.done)} of other groups for the same messages went too (one copy reaches every group).` : '') +
          (r.stop ? ' Stopped before the end.' : '') + (r.done < r.total && !r.stop && !r.error ? ' The others were no longer there.' : '');
      return h('div', { id: 'bulk-run', dataset: { ...data, phase: r.phase } },
        h('progress', { id: 'bulk-progress', max: String(Math.max(1, r.total)), value: String(r.done), 'aria-label': `${done(r.action)} so far` }),
        h('p', { id: 'bulk-result' }, line),
        r.phase === 'running'
          ? h('button', { type: 'button', id: 'bulk-stop', dataset: { focus: 'bulk-stop' }, onclick: () => { r.stop = true; draw(); }, disabled: r.stop },
            r.stop ? 'Stopping after this call…' : 'Stop after this call')
          : null);
    }
    default:
      return null;
  }
}
