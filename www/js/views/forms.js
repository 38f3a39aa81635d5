// Two forms: configure a queue (POST /configure, which replaces every option) and push messages
// (POST /push) with a JSON editor that validates as you type.
import { h, n } from '../dom.js';
import { store } from '../state.js';

let ctx = { refresh: async () => {}, notify: () => {} };

// Option fields of POST /configure: [key, label, kind, default, hint]
const NUMBER_OPTIONS = [
  ['leaseTime', 'Lease time (s)', 300, 'How long a consumer holds a batch before it is redelivered.'],
  ['retryLimit', 'Retry limit', 3, 'Failed deliveries allowed per lane before dead-lettering.'],
  ['retryDelay', 'Retry delay (ms)', 1000, 'Hold after a failed ack before redelivery.'],
  ['delayedProcessing', 'Delayed processing (s)', 0, 'Messages become visible this long after they are pushed.'],
  ['windowBuffer', 'Window buffer (s)', 0, 'A partition waits until its newest message is this old.'],
  ['priority', 'Priority', 0, 'Higher is drained first by discovery consumers.'],
  ['ttl', 'TTL (s)', 3600, ''],
  ['maxSize', 'Max size', 0, ''],
  ['retentionSeconds', 'Retention (s)', 0, 'With retention on: delete any message older than this.'],
  ['completedRetentionSeconds', 'Completed retention (s)', 0, 'With retention on: delete consumed messages older than this.'],
  ['maxWaitTimeSeconds', 'Max wait (s)', 0, 'Evict messages not consumed within this time (0 = never).'],
];
const BOOL_OPTIONS = [
  ['deadLetterQueue', 'Dead-letter queue', true],
  ['dlqAfterMaxRetries', 'Dead-letter after max retries', true],
  ['retentionEnabled', 'Retention enabled', false],
  ['encryptionEnabled', 'Encryption enabled', false],
];
const MAIN = new Set(['leaseTime', 'retryLimit', 'retryDelay']);

export function initForms(c) {
  ctx = c;
  const form = configureForm();
  document.getElementById('configure-view').replaceChildren(form);
  document.getElementById('push-view').replaceChildren(pushForm());
  store.subscribe(() => syncEncryption(form));
  syncEncryption(form);
}

const NO_KEY_HINT = 'Not available: this broker has no encryption key, so it refuses encrypted queues rather than ' +
  'store their messages in plain text. Set the QUEEN_ENCRYPTION_KEY secret on the worker, or open the ' +
  'in-browser broker with Queen.open({ encryptionKey }).';
const KEY_HINT = 'Messages are stored encrypted (AES-256-GCM); pops and this page show them decrypted.';

/** The encryption checkbox offers only what the connected broker can do (its /health says). */
function syncEncryption(form) {
  const box = form.elements.encryptionEnabled;
  const hint = document.getElementById('cfg-encryptionEnabled-hint');
  const key = store.state.conn ? store.state.conn.encryption : null;
  box.disabled = key === false;
  const text = key === false ? NO_KEY_HINT : key === true ? KEY_HINT : '';
  if (hint.textContent !== text) hint.textContent = text;
  hint.hidden = text === '';
}

function numberField(key, label, value, hint) {
  const id = `cfg-${key}`;
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, name: key, type: 'number', min: '0', step: '1', inputmode: 'numeric', value: String(value), required: true,
      'aria-describedby': hint ? `${id}-hint` : null }),
    hint ? h('small', { id: `${id}-hint`, class: 'hint' }, hint) : null);
}

function boolField(key, label, value) {
  const box = h('label', { class: 'check' }, h('input', { type: 'checkbox', name: key, checked: value,
    'aria-describedby': key === 'encryptionEnabled' ? 'cfg-encryptionEnabled-hint' : null }), ` ${label}`);
  if (key !== 'encryptionEnabled') return box;
  return h('div', { class: 'check-with-hint' }, box,
    h('small', { id: 'cfg-encryptionEnabled-hint', class: 'hint', hidden: true }));
}

function configureForm() {
  const msg = h('p', { class: 'form-msg', role: 'status', 'aria-live': 'polite', id: 'configure-msg' });
  const form = h('form', { id: 'configure-form', novalidate: true },
    h('p', { class: 'hint' }, 'Configuring replaces every option: fields you leave out go back to their defaults. ',
      '“Load selected queue” fills the form with the queue’s current options.'),
    h('div', { class: 'field' }, h('label', { for: 'cfg-queue' }, 'Queue name'),
      h('input', { id: 'cfg-queue', name: 'queue', required: true, autocomplete: 'off', list: 'queue-names', 'aria-describedby': 'configure-msg' })),
    h('div', { class: 'pair' },
      h('div', { class: 'field' }, h('label', { for: 'cfg-namespace' }, 'Namespace'), h('input', { id: 'cfg-namespace', name: 'namespace', autocomplete: 'off' })),
      h('div', { class: 'field' }, h('label', { for: 'cfg-task' }, 'Task'), h('input', { id: 'cfg-task', name: 'task', autocomplete: 'off' }))),
    h('div', { class: 'pair three' }, NUMBER_OPTIONS.filter(([k]) => MAIN.has(k)).map(([k, l, d, hint]) => numberField(k, l, d, hint))),
    h('div', { class: 'checks' }, BOOL_OPTIONS.slice(0, 2).map(([k, l, d]) => boolField(k, l, d))),
    h('details', {}, h('summary', {}, 'More options'),
      h('div', { class: 'pair' }, NUMBER_OPTIONS.filter(([k]) => !MAIN.has(k)).map(([k, l, d, hint]) => numberField(k, l, d, hint))),
      h('div', { class: 'checks' }, BOOL_OPTIONS.slice(2).map(([k, l, d]) => boolField(k, l, d)))),
    h('div', { class: 'row' },
      h('button', { type: 'submit' }, 'Save queue'),
      h('button', { type: 'button', onclick: () => loadSelected(form, msg) }, 'Load selected queue'),
      h('button', { type: 'button', class: 'danger', id: 'delete-queue', onclick: (e) => deleteQueue(form, msg, e.currentTarget) }, 'Delete queue…')),
    msg);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const conn = store.state.conn;
    if (!conn) return say(msg, 'Connect to a broker first.', true);
    const fd = new FormData(form);
    const queue = String(fd.get('queue') || '').trim();
    if (!queue) return say(msg, 'Give the queue a name.', true, form.queue);
    const options = {};
    for (const [k, label] of NUMBER_OPTIONS) {
      const raw = String(fd.get(k) ?? '').trim();
      const v = Number(raw);
      if (raw === '' || !Number.isInteger(v) || v < 0) return say(msg, `${label} must be a whole number, 0 or more.`, true, form.elements[k]);
      options[k] = v;
    }
    for (const [k] of BOOL_OPTIONS) options[k] = form.elements[k].checked;
    try {
      await conn.request('POST', '/api/v1/configure', { queue, namespace: String(fd.get('namespace') || ''), task: String(fd.get('task') || ''), options });
      say(msg, `Queue “${queue}” saved.`);
      store.set({ selected: queue, partition: null, msgOffset: null });
      await ctx.refresh();
    } catch (err) {
      say(msg, err.message, true);
    }
  });
  return form;
}

function loadSelected(form, msg) {
  const d = store.state.detail;
  if (!d) return say(msg, 'No queue is selected.', true);
  form.queue.value = d.name;
  form.namespace.value = d.namespace || '';
  form.task.value = d.task || '';
  for (const [k] of NUMBER_OPTIONS) if (d.options && k in d.options) form.elements[k].value = String(d.options[k]);
  for (const [k] of BOOL_OPTIONS) if (d.options && k in d.options) form.elements[k].checked = Boolean(d.options[k]);
  say(msg, `Loaded the options of “${d.name}”.`);
}

async function deleteQueue(form, msg, button) {
  const conn = store.state.conn;
  const queue = form.queue.value.trim();
  if (!conn) return say(msg, 'Connect to a broker first.', true);
  if (!queue) return say(msg, 'Type the name of the queue to delete.', true, form.queue);
  if (button.dataset.armed !== queue) {
    button.dataset.armed = queue;
    button.textContent = `Really delete “${queue}” and all its messages?`;
    setTimeout(() => { delete button.dataset.armed; button.textContent = 'Delete queue…'; }, 5000);
    return;
  }
  delete button.dataset.armed;
  button.textContent = 'Delete queue…';
  try {
    const { body } = await conn.request('DELETE', `/api/v1/resources/queues/${encodeURIComponent(queue)}`);
    say(msg, body?.existed === false ? `There was no queue “${queue}”.` : `Queue “${queue}” deleted.`);
    await ctx.refresh();
  } catch (err) {
    say(msg, err.message, true);
  }
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

/** Where JSON.parse failed, as "line L, column C" when the engine says a position. */
export function jsonProblem(text) {
  if (!text.trim()) return 'The payload is empty. Write JSON, for example {"hello": "world"}.';
  try {
    JSON.parse(text);
    return null;
  } catch (e) {
    const m = /position (\d+)/.exec(e.message);
    let where = '';
    if (m) {
      const pos = Number(m[1]);
      const before = text.slice(0, pos).split('\n');
      where = ` at line ${before.length}, column ${before[before.length - 1].length + 1}`;
    }
    const what = e.message.replace(/^JSON\.parse: /, '').replace(/ in JSON at position \d+.*$/s, '').replace(/\s*\(line \d+ column \d+\)$/, '');
    return `This is not valid JSON${where}: ${what}.`;
  }
}

function pushForm() {
  const msg = h('p', { class: 'form-msg', role: 'status', 'aria-live': 'polite', id: 'push-msg' });
  const jsonMsg = h('p', { class: 'json-msg', id: 'push-json-msg', 'aria-live': 'polite' });
  const editor = h('textarea', { id: 'push-payload', name: 'payload', rows: '6', spellcheck: 'false', autocomplete: 'off',
    'aria-describedby': 'push-json-msg push-payload-hint', class: 'json' }, '{\n  "hello": "world"\n}');
  const validate = () => {
    const problem = jsonProblem(editor.value);
    editor.setAttribute('aria-invalid', problem ? 'true' : 'false');
    jsonMsg.textContent = problem || 'Valid JSON.';
    jsonMsg.classList.toggle('bad', Boolean(problem));
    return problem;
  };
  editor.addEventListener('input', validate);
  const form = h('form', { id: 'push-form', novalidate: true },
    h('div', { class: 'pair' },
      h('div', { class: 'field' }, h('label', { for: 'push-queue' }, 'Queue'),
        h('input', { id: 'push-queue', name: 'queue', required: true, autocomplete: 'off', list: 'queue-names' })),
      h('div', { class: 'field' }, h('label', { for: 'push-partition' }, 'Partition'),
        h('input', { id: 'push-partition', name: 'partition', value: 'Default', autocomplete: 'off' }))),
    h('div', { class: 'pair' },
      h('div', { class: 'field' }, h('label', { for: 'push-count' }, 'How many copies'),
        h('input', { id: 'push-count', name: 'count', type: 'number', min: '1', max: '1000', value: '1', inputmode: 'numeric' })),
      h('div', { class: 'field' }, h('label', { for: 'push-txid' }, 'Transaction id ', h('span', { class: 'hint' }, '(optional, dedups)')),
        h('input', { id: 'push-txid', name: 'transactionId', autocomplete: 'off' }))),
    h('div', { class: 'field' }, h('label', { for: 'push-payload' }, 'Payload (JSON)'), editor,
      h('small', { class: 'hint', id: 'push-payload-hint' }, 'With several copies, "$i" in a string becomes the copy number (1, 2, …).'),
      jsonMsg),
    h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Push'),
      h('button', { type: 'button', onclick: () => { try { editor.value = JSON.stringify(JSON.parse(editor.value), null, 2); validate(); } catch { validate(); } } }, 'Format JSON')),
    msg);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const conn = store.state.conn;
    if (!conn) return say(msg, 'Connect to a broker first.', true);
    const queue = form.queue.value.trim();
    if (!queue) return say(msg, 'Name the queue to push to (a push creates it if needed).', true, form.queue);
    const problem = validate();
    if (problem) return say(msg, 'Fix the payload first.', true, editor);
    const count = Number(form.count.value || '1');
    if (!Number.isInteger(count) || count < 1 || count > 1000) return say(msg, 'Copies must be a whole number from 1 to 1000.', true, form.count);
    const txid = form.transactionId.value.trim();
    if (txid && count > 1) return say(msg, 'A transaction id makes copies duplicates; push one copy or clear the id.', true, form.transactionId);
    const partition = form.partition.value.trim() || 'Default';
    const text = editor.value;
    const items = Array.from({ length: count }, (_, i) => {
      const payload = count > 1 ? JSON.parse(text, (k, v) => (typeof v === 'string' ? v.replaceAll('$i', String(i + 1)) : v)) : JSON.parse(text);
      const item = { queue, partition, payload };
      if (txid) item.transactionId = txid;
      return item;
    });
    try {
      const { body } = await conn.request('POST', '/api/v1/push', { items });
      const results = Array.isArray(body) ? body : [];
      const queued = results.filter((r) => r.status === 'queued').length;
      const dup = results.filter((r) => r.status === 'duplicate').length;
      say(msg, `Pushed ${n('message', queued)} to “${queue}” / ${partition}${dup ? `; ${dup} already there (same transaction id), not pushed again` : ''}.`);
      if (store.state.selected === null) store.set({ selected: queue });
      await ctx.refresh();
    } catch (err) {
      say(msg, err.message, true);
    }
  });
  validate();
  return form;
}

/** Keeps the shared <datalist> of queue names current. */
export function renderQueueNames(s) {
  let list = document.getElementById('queue-names');
  if (!list) {
    list = h('datalist', { id: 'queue-names' });
    document.body.append(list);
  }
  const names = s.queues.map((q) => q.name).join('\n');
  if (list.dataset.names === names) return;
  list.dataset.names = names;
  list.replaceChildren(...s.queues.map((q) => h('option', { value: q.name })));
}
