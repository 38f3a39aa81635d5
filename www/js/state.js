// The page's shared state and the one function that reloads it from the broker (used by the poller).
// Views read `store.state`, change selections with `store.set`, and re-render on `subscribe`.

const enc = encodeURIComponent;
export const QUEUE_MODE = '__QUEUE_MODE__';
export const MESSAGE_PAGE = 25;

/** Lease id -> who holds it, when the page knows (the simulator's consumers register here). */
export const leaseHolders = new Map();

export const store = {
  state: {
    conn: null,
    queues: [],          // GET /resources/queues -> queues
    selected: null,      // selected queue name
    detail: null,        // GET /resources/queues/:q for the selected queue
    partition: null,     // selected partition name (message browser)
    msgGroup: QUEUE_MODE, // group whose cursor the message browser shows
    msgOffset: null,     // first offset shown; null = follow the newest
    messages: [],        // GET /messages for the selected partition
    traces: null,        // {key: 'pid/txid', events, error}: the message whose trace events are open
    dlqGroup: '',        // '' = all groups
    dlq: [],             // GET /dlq for the selected queue
    dlqSelected: new Set(),
    storage: null,       // GET /status -> storage: {storedBytes, maxStoredBytes, ...}
    brokerSeries: null,  // GET /status -> throughput: the broker's per-minute counts (null: not reported)
    activity: null,      // ActivityRecorder of this connection (activity.js), fed at each refresh
    history: null,       // GET /status/queues/:q/history of the selected queue (null: the broker has none)
    loadedAt: 0,         // Date.now() when the data arrived
  },
  listeners: new Set(),
  set(patch) {
    Object.assign(this.state, patch);
    this.emit();
  },
  emit() {
    for (const f of this.listeners) f(this.state);
  },
  subscribe(f) {
    this.listeners.add(f);
  },
};

/** Reloads everything the views show. Throws ApiError on failure (the poller reports it). */
export async function loadAll() {
  const s = store.state;
  const conn = s.conn;
  if (!conn) return;
  const { body } = await conn.request('GET', '/api/v1/resources/queues');
  if (conn !== store.state.conn) return; // reconnected meanwhile
  const queues = [...(body?.queues || [])].sort((a, b) => a.name.localeCompare(b.name));
  let selected = s.selected;
  if (!queues.some((q) => q.name === selected)) selected = queues[0]?.name ?? null;

  let detail = null;
  let dlq = [];
  let messages = [];
  let deliveries = [];
  let partition = s.partition;
  if (selected !== null) {
    // The queue may vanish between the two calls (deleted elsewhere): treat 404 as "gone".
    try {
      detail = (await conn.request('GET', `/api/v1/resources/queues/${enc(selected)}`)).body;
    } catch (e) {
      if (e.status !== 404) throw e;
    }
  }
  if (detail) {
    const parts = detail.partitions || [];
    if (!parts.some((p) => p.name === partition)) partition = parts[0]?.name ?? null;
    const group = s.dlqGroup ? `&consumerGroup=${enc(s.dlqGroup)}` : '';
    dlq = (await conn.request('GET', `/api/v1/dlq?queue=${enc(selected)}${group}&limit=200`)).body?.messages || [];
    const p = parts.find((x) => x.name === partition);
    if (p) {
      const first = p.firstRetainedOffset ?? 0;
      const next = p.nextOffset ?? first;
      const start = s.msgOffset === null ? Math.max(first, next - MESSAGE_PAGE) : Math.max(first, Math.min(s.msgOffset, next - 1));
      const skip = Math.max(0, start - first);
      const q = `queue=${enc(selected)}&partition=${enc(partition)}&offset=${skip}&limit=${MESSAGE_PAGE}`;
      messages = (await conn.request('GET', `/api/v1/messages?${q}`)).body?.messages || [];
      // The delivery log, for a queue that keeps one (deliveryLog: failures or all).
      const log = detail.options?.deliveryLog;
      if (log && log !== 'off') {
        const d = `queue=${enc(selected)}&partition=${enc(partition)}&limit=${MESSAGE_PAGE}`;
        deliveries = (await conn.request('GET', `/api/v1/deliveries?${d}`)).body?.deliveries || [];
      }
    }
  } else {
    partition = null;
  }
  if (conn !== store.state.conn) return;
  // Stored bytes against the quota; a broker without /status (an older one) just shows nothing.
  let storage = null;
  let brokerSeries = null;
  try {
    const status = (await conn.request('GET', '/api/v1/status')).body;
    storage = status?.storage ?? null;
    brokerSeries = Array.isArray(status?.throughput) ? status.throughput : null;
  } catch (e) {
    if (e.status !== 404 && e.status !== 501) throw e;
  }
  const history = detail ? await queueHistory(conn, detail.name) : null;
  const pictures = detail ? await activityReads(conn, detail, s.dlqGroup ? null : dlq) : null;
  if (conn !== store.state.conn) return;
  if (pictures) s.activity?.observe({ at: Date.now(), detail, ...pictures });
  const ids = new Set(dlq.map((d) => d.id));
  const dlqSelected = new Set([...s.dlqSelected].filter((id) => ids.has(id)));
  store.set({ queues, selected, detail, partition, dlq, dlqSelected, messages, deliveries, storage, brokerSeries, history,
    loadedAt: Date.now() });
}

/**
 * The broker's own recent history of `queue` (throughput and backlog per 5 s bucket over the last 15
 * minutes, docs/decisions.md "Queue history"), or null when the broker has no such route (Queen, an
 * older queen-edge: the pictures then fall back to what the page samples itself).
 */
async function queueHistory(conn, queue) {
  try {
    return (await conn.request('GET', `/api/v1/status/queues/${enc(queue)}/history`)).body;
  } catch (e) {
    if (e.status === 404 || e.status === 501) return null;
    throw e;
  }
}

/**
 * What the activity pictures need beyond the views' reads: the queue's dead letters of every group
 * (`dlqAllGroups` when the dead-letter view already has them) and its delivery log when it keeps one
 * (null otherwise, or when the broker has no delivery log route).
 */
async function activityReads(conn, detail, dlqAllGroups) {
  const q = enc(detail.name);
  const dlq = dlqAllGroups ?? ((await conn.request('GET', `/api/v1/dlq?queue=${q}&limit=200`)).body?.messages || []);
  let deliveries = null;
  const log = detail.options?.deliveryLog;
  if (log && log !== 'off') {
    try {
      deliveries = (await conn.request('GET', `/api/v1/deliveries?queue=${q}&limit=200`)).body?.deliveries || [];
    } catch (e) {
      if (e.status !== 404 && e.status !== 501) throw e;
    }
  }
  return { dlq, deliveries };
}
