// What the activity pictures draw, recorded from the broker's own numbers at each refresh. No DOM.
//
// The broker stores, per lane, the messages it delivered and the acks it accepted (all, and failed):
// the `counts` of each lane in GET /resources/queues/:q; a partition's `nextOffset` counts its pushes
// (offsets are never reused). It keeps no per-queue time series, so the page samples these counters at
// each refresh and keeps the differences (throughput) and each group's backlog (a gauge) for the last
// minutes. A lane's timeline is assembled from its state at each refresh (a live lease with its id and
// expiry, a retry hold, the counts), the dead-letter queue's entries (each with the time it was filed)
// and, when the queue keeps one (`deliveryLog`), the delivery log's records (each attempt's outcome and
// time, exact even between two refreshes). See docs/decisions.md, "Activity pictures".

/** How far back the page keeps what it saw. */
export const KEEP_MS = 15 * 60_000;

const QUEUE_MODE = '__QUEUE_MODE__';
const sum = (xs) => xs.reduce((a, b) => a + b, 0);

/** The counters of one queue at one instant: pushes per partition, counts per lane. */
function countersOf(detail) {
  const lanes = new Map();
  let pushed = 0;
  for (const p of detail.partitions || []) {
    pushed += p.nextOffset ?? 0;
    for (const l of p.lanes || []) {
      lanes.set(laneKey(p.name, l.consumerGroup), { partition: p.name, lane: l });
    }
  }
  return { pushed, lanes };
}

/** A lane's key: partition name and group. */
export function laneKey(partition, group) {
  return `${partition}\u0000${group}`;
}

function emptyLaneTrack(partition, group) {
  return { partition, group, leases: [], holds: [], events: [], seen: new Set(), failed: 0, deadLettered: 0, retriesShown: 0 };
}

/** Everything recorded about one queue. */
class QueueRecord {
  constructor(identity) {
    this.identity = identity;
    this.last = null;        // {t, pushed, lanes: Map(key -> lane json)} of the previous refresh
    this.throughput = [];    // {t, pushed, delivered, acked, failed}: what changed since the previous refresh
    this.backlog = [];       // {t, groups: {group: backlog}}
    this.tracks = new Map(); // lane key -> {partition, group, leases, holds, events, ...}
    this.since = null;       // the first refresh of this queue (the start of what the page saw)
    this.dlqSeen = new Set();
    this.logSeen = new Set();
  }

  track(partition, group) {
    const key = laneKey(partition, group);
    let t = this.tracks.get(key);
    if (!t) {
      t = emptyLaneTrack(partition, group);
      this.tracks.set(key, t);
    }
    return t;
  }

  trim(now) {
    const from = now - KEEP_MS;
    const keep = (xs, end) => {
      let i = 0;
      while (i < xs.length && end(xs[i]) < from) i += 1;
      if (i) xs.splice(0, i);
    };
    keep(this.throughput, (x) => x.t);
    keep(this.backlog, (x) => x.t);
    for (const t of this.tracks.values()) {
      t.leases = t.leases.filter((x) => x.to >= from);
      t.holds = t.holds.filter((x) => x.to >= from);
      t.events = t.events.filter((x) => x.t >= from);
    }
  }
}

/**
 * Records what the page sees of the selected queue at each refresh. One per connection: a new
 * connection starts a new recorder (`connectedAt` is when the page connected).
 */
export class ActivityRecorder {
  constructor(connectedAt = Date.now()) {
    this.connectedAt = connectedAt;
    this.queues = new Map();
  }

  /** What was recorded about `queue` (null: nothing yet). */
  of(queue) {
    return this.queues.get(queue) ?? null;
  }

  /**
   * One refresh: `detail` is GET /resources/queues/:q, `dlq` the queue's dead letters (all groups),
   * `deliveries` its delivery log records (newest first) when it keeps one, else null; `at` the page's
   * clock when they arrived.
   */
  observe({ at, detail, dlq = [], deliveries = null }) {
    if (!detail) return;
    const identity = `${detail.name}\u0000${detail.createdAt}`;
    let rec = this.queues.get(detail.name);
    if (!rec || rec.identity !== identity) {
      rec = new QueueRecord(identity);
      this.queues.set(detail.name, rec);
    }
    const o = detail.options || {};
    const now = countersOf(detail);
    const prev = rec.last;
    // A queue created while the page was connected has counted everything in front of the page: its
    // first refresh starts from zero. An older queue's first refresh is only the baseline.
    const createdAt = Date.parse(detail.createdAt);
    const bornHere = !prev && Number.isFinite(createdAt) && createdAt >= this.connectedAt;
    if (!rec.since) rec.since = bornHere ? Math.min(at, createdAt) : at;
    const base = prev ?? (bornHere ? { t: createdAt, pushed: 0, lanes: new Map() } : null);

    if (base) {
      const delta = { t: at, pushed: now.pushed - base.pushed, delivered: 0, acked: 0, failed: 0 };
      for (const [key, { lane }] of now.lanes) {
        // A lane the baseline does not have appeared since: all its counts are new.
        const before = base.lanes.get(key)?.lane?.counts ?? zero;
        const c = lane.counts;
        if (!c) continue;
        delta.delivered += Math.max(0, c.delivered - before.delivered);
        delta.acked += Math.max(0, c.acked - before.acked);
        delta.failed += Math.max(0, c.failed - before.failed);
      }
      // A count that went down (the queue's partitions or groups were deleted) starts a new baseline.
      if (delta.pushed < 0) delta.pushed = 0;
      if (delta.pushed || delta.delivered || delta.acked || delta.failed || !rec.throughput.length) rec.throughput.push(delta);
    }

    const groups = {};
    for (const { lane } of now.lanes.values()) groups[lane.consumerGroup] = (groups[lane.consumerGroup] ?? 0) + (lane.backlog ?? 0);
    rec.backlog.push({ t: at, groups });

    const useLog = Array.isArray(deliveries);
    for (const [key, { partition, lane }] of now.lanes) {
      const track = rec.track(partition, lane.consumerGroup);
      const before = prev?.lanes.get(key)?.lane ?? null;
      observeLease(track, before, lane, { at, prevAt: prev?.t ?? null, leaseMs: (o.leaseTime || 60) * 1000 });
      if (!useLog) {
        const hold = observeHold(track, lane, { at, prevAt: prev?.t ?? null, delayMs: o.retryBackoff ? null : (o.retryDelay ?? null) });
        // The failed ack that set the hold ended the lease the previous refresh saw: no later than that.
        const ended = track.leases[track.leases.length - 1];
        if (hold && ended?.closed && ended.to > hold.from) ended.to = Math.max(ended.from, hold.from);
      }
      // Failed acks: the lane's stored count, from the baseline on.
      const c = lane.counts;
      const b = base ? (base.lanes.get(key)?.lane?.counts ?? zero) : null;
      if (c && b) track.failed += Math.max(0, c.failed - b.failed);
    }
    for (const t of rec.tracks.values()) {
      if (!now.lanes.has(laneKey(t.partition, t.group))) closeLease(t, at, 'gone');
    }

    for (const d of dlq) {
      if (d.queue && d.queue !== detail.name) continue;
      if (rec.dlqSeen.has(d.id)) continue;
      rec.dlqSeen.add(d.id);
      const t = Date.parse(d.failedAt ?? d.createdAt);
      // Only what was filed while the page watched counts against the failed acks it saw.
      if (!Number.isFinite(t) || t < rec.since) continue;
      const track = rec.track(d.partition, d.consumerGroup || QUEUE_MODE);
      track.deadLettered += 1;
      if (!useLog) {
        track.events.push({ t, kind: 'dead-letter', offset: d.offset, text: d.errorMessage || '', source: 'dlq' });
      }
    }

    if (useLog) {
      for (const r of [...deliveries].reverse()) observeRecord(rec, r);
    } else {
      // Failed acks that did not end in the dead-letter queue are retries (the message comes back).
      for (const t of rec.tracks.values()) {
        const retries = t.failed - t.deadLettered;
        if (retries > t.retriesShown) {
          // At the end of the lease the refresh saw end, else where the hold it set starts, else now.
          const lease = t.leases[t.leases.length - 1];
          const hold = t.holds[t.holds.length - 1];
          const when = lease?.closed && lease.to >= (prev?.t ?? at) ? lease.to : hold && hold.to > at ? hold.from : at;
          t.events.push({ t: when, kind: 'retry', count: retries - t.retriesShown, source: 'counts' });
          t.retriesShown = retries;
        }
      }
    }

    rec.last = { t: at, pushed: now.pushed, lanes: now.lanes };
    rec.trim(at);
  }
}

const zero = { delivered: 0, acked: 0, failed: 0 };

/** Opens, extends or closes the lane's lease bar from what the lane shows now. */
function observeLease(track, before, lane, { at, prevAt, leaseMs }) {
  const open = track.leases[track.leases.length - 1];
  const expires = lane.leaseExpiresAt ? Date.parse(lane.leaseExpiresAt) : null;
  if (lane.leaseId && expires && open && !open.closed && open.id === lane.leaseId) {
    open.to = Math.min(at, expires);
    open.expires = expires;
    return;
  }
  if (open && !open.closed) {
    const ackedSince = (lane.counts?.acked ?? 0) - (before?.counts?.acked ?? 0);
    closeLease(track, at, open.expires <= at && ackedSince <= 0 ? 'expired' : 'ended');
  }
  if (lane.leaseId && expires) {
    // It started after the previous refresh (which did not show it) and no earlier than a full lease
    // before its expiry.
    let from = expires - leaseMs;
    if (prevAt !== null) from = Math.min(at, Math.max(prevAt, from));
    else from = Math.min(at, from);
    track.leases.push({ id: lane.leaseId, from, to: at, expires, closed: false, offsets: spanOf(lane), end: null });
  }
}

function spanOf(lane) {
  const first = lane.committedOffset + 1;
  return lane.batchEnd !== null && lane.batchEnd !== undefined ? [first, lane.batchEnd] : [first, first];
}

/** Ends the open lease bar: at its expiry when that came first, else at `at`. */
function closeLease(track, at, how) {
  const open = track.leases[track.leases.length - 1];
  if (!open || open.closed) return;
  open.closed = true;
  open.to = Math.min(at, open.expires ?? at);
  open.end = how === 'gone' ? 'ended' : how;
  if (how === 'expired') track.events.push({ t: open.expires, kind: 'expired', source: 'lane' });
}

/** A retry hold seen on the lane: a bar up to `holdUntil`. Returns the hold when it is new. */
function observeHold(track, lane, { at, prevAt, delayMs }) {
  if (!lane.holdUntil) return null;
  const until = Date.parse(lane.holdUntil);
  if (!Number.isFinite(until)) return null;
  const last = track.holds[track.holds.length - 1];
  if (last && last.to === until) return null;
  let from = delayMs !== null ? until - delayMs : at;
  from = Math.min(at, prevAt !== null ? Math.max(prevAt, from) : from);
  const hold = { from, to: until, source: 'lane' };
  track.holds.push(hold);
  return hold;
}

const OUTCOME_EVENT = {
  completed: 'completed', auto_acked: 'completed', retry: 'retry', failed: 'retry',
  dead_lettered: 'dead-letter', dropped: 'dropped', expired: 'expired',
};

/** One delivery-log record: an event at its time, a hold for a `failed`, and the exact end of its lease. */
function observeRecord(rec, r) {
  const key = String(r.id);
  if (rec.logSeen.has(key)) return;
  rec.logSeen.add(key);
  const t = Date.parse(r.at);
  if (!Number.isFinite(t)) return;
  const track = rec.track(r.partition, r.consumerGroup || QUEUE_MODE);
  const kind = OUTCOME_EVENT[r.outcome] ?? r.outcome;
  track.events.push({ t, kind, outcome: r.outcome, count: 1, offset: r.offset ?? r.fromOffset, attempt: r.deliveryAttempt,
    text: r.error || '', source: 'log' });
  if (r.holdUntil) {
    const until = Date.parse(r.holdUntil);
    if (Number.isFinite(until) && until > t) track.holds.push({ from: t, to: until, source: 'log' });
  }
  const lease = r.leaseId && track.leases.find((l) => l.id === r.leaseId);
  if (lease) {
    lease.to = Math.max(lease.from, t);
    lease.closed = true;
    lease.end = r.outcome === 'expired' ? 'expired' : 'ended';
  }
}

/**
 * Throughput of `rec` in `buckets` equal slices of [from, to): per slice, the messages pushed, delivered,
 * acked and failed that the refreshes in it saw.
 */
export function bucketThroughput(rec, from, to, buckets) {
  const width = (to - from) / buckets;
  const out = Array.from({ length: buckets }, (_, i) => ({ from: from + i * width, to: from + (i + 1) * width,
    pushed: 0, delivered: 0, acked: 0, failed: 0 }));
  for (const s of rec?.throughput ?? []) {
    if (s.t < from || s.t >= to) continue;
    const b = out[Math.min(buckets - 1, Math.floor((s.t - from) / width))];
    b.pushed += s.pushed;
    b.delivered += s.delivered;
    b.acked += s.acked;
    b.failed += s.failed;
  }
  return out;
}

/** Totals over [from, to). */
export function throughputTotals(rec, from, to) {
  const inside = (rec?.throughput ?? []).filter((s) => s.t >= from && s.t < to);
  return {
    pushed: sum(inside.map((s) => s.pushed)), delivered: sum(inside.map((s) => s.delivered)),
    acked: sum(inside.map((s) => s.acked)), failed: sum(inside.map((s) => s.failed)),
  };
}
