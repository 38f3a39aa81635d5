// The simulator's form, one card per consumer (state, lease, counters) and a short event log.
import { h, replaceKeepingFocus, shortId } from '../dom.js';
import { refreshCountdowns } from '../countdown.js';
import { store } from '../state.js';
import { Simulator } from '../simulator.js';

let sim;
let form;
let out;
let scheduled = false;
let logOpen = true;

export function initSimulator({ refresh }) {
  const leaseSecondsOf = (queue) => (store.state.detail?.name === queue ? store.state.detail.options?.leaseTime ?? null : null);
  sim = new Simulator(() => store.state.conn, () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; renderSim(); });
  }, leaseSecondsOf);
  const num = (id, label, value, min, max, hint) => h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, type: 'number', value: String(value), min: String(min), max: String(max), step: '1', inputmode: 'numeric', required: true,
      'aria-describedby': hint ? `${id}-hint` : null }),
    hint ? h('small', { class: 'hint', id: `${id}-hint` }, hint) : null);
  const msg = h('p', { class: 'form-msg', role: 'status', 'aria-live': 'polite', id: 'sim-msg' });
  form = h('form', { id: 'sim-form', novalidate: true },
    h('div', { class: 'pair' },
      h('div', { class: 'field' }, h('label', { for: 'sim-queue' }, 'Queue'),
        h('input', { id: 'sim-queue', required: true, autocomplete: 'off', list: 'queue-names' })),
      h('div', { class: 'field' }, h('label', { for: 'sim-group' }, 'Consumer group'),
        h('input', { id: 'sim-group', autocomplete: 'off', placeholder: 'empty = queue mode', 'aria-describedby': 'sim-group-hint' }),
        h('small', { class: 'hint', id: 'sim-group-hint' }, 'Leave empty for queue mode (one shared group).'))),
    h('div', { class: 'pair four' },
      num('sim-consumers', 'Consumers', 2, 1, 20),
      num('sim-batch', 'Batch size', 1, 1, 100),
      num('sim-handling', 'Handling time (ms)', 800, 0, 600000),
      num('sim-failure', 'Failure rate (%)', 20, 0, 100)),
    h('div', { class: 'pair' },
      h('div', { class: 'field' }, h('label', { for: 'sim-mode' }, 'A failure is'),
        h('select', { id: 'sim-mode' },
          h('option', { value: 'failed' }, 'a failed ack (uses the retry budget, then dead-letters)'),
          h('option', { value: 'crash' }, 'a crash (no ack: the lease expires, no budget used)'))),
      num('sim-lease', 'Lease override (s)', 0, 0, 3600, '0 = the queue’s lease time.')),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', id: 'sim-oldest', checked: true }),
      ' A new group starts from the oldest message (otherwise only new messages)'),
    h('div', { class: 'row' },
      h('button', { type: 'submit', id: 'sim-start' }, 'Start'),
      h('button', { type: 'button', id: 'sim-stop', onclick: () => { sim.stop(); say(msg, 'Stopped.'); refresh(); } }, 'Stop')),
    msg);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!store.state.conn) return say(msg, 'Connect to a broker first.', true);
    const v = (id) => form.querySelector(`#${id}`);
    const queue = v('sim-queue').value.trim();
    if (!queue) return say(msg, 'Name the queue to consume.', true, v('sim-queue'));
    const ints = {};
    for (const [id, key, min, max, label] of [['sim-consumers', 'consumers', 1, 20, 'Consumers'], ['sim-batch', 'batch', 1, 100, 'Batch size'],
      ['sim-handling', 'handlingMs', 0, 600000, 'Handling time'], ['sim-failure', 'failure', 0, 100, 'Failure rate'], ['sim-lease', 'leaseSeconds', 0, 3600, 'Lease override']]) {
      const raw = v(id).value.trim();
      const x = Number(raw);
      if (raw === '' || !Number.isInteger(x) || x < min || x > max) return say(msg, `${label} must be a whole number from ${min} to ${max}.`, true, v(id));
      ints[key] = x;
    }
    sim.start({
      queue, group: v('sim-group').value.trim(), consumers: ints.consumers, batch: ints.batch, handlingMs: ints.handlingMs,
      failureRate: ints.failure / 100, failMode: v('sim-mode').value, fromOldest: v('sim-oldest').checked, leaseSeconds: ints.leaseSeconds,
    });
    say(msg, 'Running. Watch the lanes above: leases, retries and dead letters change live.');
  });
  out = h('div', { id: 'sim-out' });
  document.getElementById('sim-view').replaceChildren(form, out);
  renderSim();
}

function say(el, text, bad = false, focus = null) {
  el.textContent = text;
  el.classList.toggle('bad', bad);
  if (focus) {
    focus.setAttribute('aria-invalid', 'true');
    focus.focus();
    focus.addEventListener('input', () => focus.removeAttribute('aria-invalid'), { once: true });
  }
}

/** Fills the queue field with the selected queue when the user has not typed one. */
export function syncSimQueue(s) {
  for (const id of ['sim-queue', 'push-queue']) {
    const q = document.getElementById(id);
    if (q && !q.value && s.selected !== null && document.activeElement !== q) q.value = s.selected;
  }
}

/** Stops the consumers (on disconnect). */
export function stopSimulator() {
  sim?.stop();
}

function renderSim() {
  if (!out) return;
  form.querySelector('#sim-start').textContent = sim.running ? 'Restart' : 'Start';
  form.querySelector('#sim-stop').disabled = !sim.running;
  const t = sim.totals;
  const totals = h('p', { class: 'totals', id: 'sim-totals' },
    h('span', { class: 'stat' }, h('strong', {}, t.delivered), ' delivered'),
    h('span', { class: 'stat' }, h('strong', {}, t.completed), ' completed'),
    h('span', { class: 'stat' }, h('strong', {}, t.failed), ' failed'),
    h('span', { class: 'stat' }, h('strong', {}, t.crashed), ' crashes'),
    h('span', { class: `stat ${t.deadLettered ? 'warn' : ''}` }, h('strong', { id: 'sim-dlq-count' }, t.deadLettered), ' dead-lettered'),
    t.refused ? h('span', { class: 'stat warn' }, h('strong', {}, t.refused), ' acks refused') : null);
  const cards = sim.consumers.length
    ? h('ul', { class: 'consumers', 'aria-label': 'Simulated consumers' }, sim.consumers.map((c) => h('li', { class: `consumer ${c.state}` },
      h('header', {}, h('h4', {}, `Consumer ${c.id}`), h('span', { class: `badge ${c.state}` }, c.state)),
      h('p', { class: 'detail' }, c.detail || '\u00a0'),
      h('p', { class: 'muted' }, 'lease ', shortId(c.leaseId),
        c.leaseId && c.leaseUntil ? [' ends ', h('span', { dataset: { until: c.leaseUntil, before: 'in ', after: 'now (expired)' } })] : null),
      h('p', { class: 'counts' }, `${c.delivered} in, ${c.completed} ok, ${c.failed} failed, ${c.deadLettered} DLQ`))))
    : h('p', { class: 'muted' }, 'No consumers running. Fill in the form and press Start.');
  const log = sim.log.length
    ? h('details', { class: 'log', open: logOpen, ontoggle: (e) => { logOpen = e.currentTarget.open; } }, h('summary', {}, 'Events'),
      h('ol', { id: 'sim-log' }, sim.log.slice(0, 20).map((e) => h('li', {},
        h('time', { datetime: e.at.toISOString() }, e.at.toLocaleTimeString([], { hour12: false })), ' ', e.text))))
    : null;
  replaceKeepingFocus(out, [totals, cards, log]);
  refreshCountdowns();
}
