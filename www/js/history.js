// The broker's recent history of a queue (GET /api/v1/status/queues/:q/history: per 5 s bucket, the
// messages pushed, delivered, acked and failed, and each group's backlog at the bucket's end) turned
// into what the charts draw. No DOM. The broker measured it, so it covers the minutes before the page
// opened (docs/decisions.md, "Queue history").

/**
 * Bars of `span` ms ending with the bucket that holds the broker's `to`, about `count` of them, each a
 * whole number of the broker's buckets: [{from, to, pushed, delivered, acked, failed}], plus totals.
 */
export function historyThroughput(history, span, count) {
  const bucketMs = history.bucketSeconds * 1000;
  const step = Math.max(bucketMs, Math.ceil(span / count / bucketMs) * bucketMs);
  const now = Date.parse(history.to);
  const end = (Math.floor(now / step) + 1) * step;
  const bars = Math.max(1, Math.round(span / step));
  const from = end - bars * step;
  const buckets = Array.from({ length: bars }, (_, i) => ({ from: from + i * step, to: from + (i + 1) * step,
    pushed: 0, delivered: 0, acked: 0, failed: 0 }));
  const totals = { pushed: 0, delivered: 0, acked: 0, failed: 0 };
  for (const b of history.buckets) {
    const t = Date.parse(b.at);
    if (!(t >= from && t < end)) continue;
    const bar = buckets[Math.floor((t - from) / step)];
    for (const k of Object.keys(totals)) {
      bar[k] += b[k];
      totals[k] += b[k];
    }
  }
  return { buckets, totals, from, end, step };
}

/**
 * Each group's backlog as points at the end of each bucket (the bucket still filling: at the broker's
 * `to`), within [from, end]: {group: [{t, v}]}. A bucket from before the broker recorded a group has
 * no point for it.
 */
export function historyBacklog(history, from, end) {
  const bucketMs = history.bucketSeconds * 1000;
  const now = Date.parse(history.to);
  const lines = Object.fromEntries(history.groups.map((g) => [g, []]));
  for (const b of history.buckets) {
    const t = Math.min(Date.parse(b.at) + bucketMs, now);
    if (t < from || t > end) continue;
    for (const [g, v] of Object.entries(b.backlog)) (lines[g] ??= []).push({ t, v });
  }
  return lines;
}
