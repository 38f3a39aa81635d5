// Plain SVG drawing for the activity pictures: a grouped bar chart over time buckets, a line chart of
// gauges, and a lane timeline. No state, no library. Every plotted mark carries its value in data
// attributes (data-series, data-value, data-from, data-to, data-t), so what is drawn can be read back.

const NS = 'http://www.w3.org/2000/svg';

/** Builds an SVG element: svg('rect', {x: 1, dataset: {value: 3}}, child...). */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'dataset') {
      for (const [dk, dv] of Object.entries(v)) if (dv !== null && dv !== undefined) el.dataset[dk] = String(dv);
    } else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const round = (x) => Math.round(x * 10) / 10;

/** A round upper bound for an axis: 1, 2, 5, 10, 20, 50, ... at or above `max`. */
export function niceMax(max) {
  if (max <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

/** "−4 min", "−30 s", "now": a time relative to `end`. */
export function ago(t, end) {
  const s = Math.round((end - t) / 1000);
  if (s <= 0) return 'now';
  if (s % 60 === 0) return `−${s / 60} min`;
  return s >= 60 ? `−${Math.floor(s / 60)} min ${s % 60} s` : `−${s} s`;
}

/** Tick instants for a window [from, to]: about `count` of them, on round steps, ending at `to`. */
export function timeTicks(from, to, count = 5) {
  const span = to - from;
  const steps = [5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3];
  const step = steps.find((s) => span / s <= count) ?? steps[steps.length - 1];
  const ticks = [];
  for (let t = to; t >= from - 1; t -= step) ticks.push(t);
  return ticks.reverse();
}

/**
 * Grouped bars: `buckets` = [{from, to, [series.key]: value}], `series` = [{key, label, cls}].
 * Returns an <svg> `width` × `height` px with a y axis from 0 to a round maximum and relative time labels.
 */
export function barChart({ buckets, series, width, height = 150, label, end, id }) {
  const m = { l: 38, r: 8, t: 8, b: 20 };
  const w = Math.max(40, width - m.l - m.r);
  const hgt = height - m.t - m.b;
  const max = niceMax(Math.max(0, ...buckets.flatMap((b) => series.map((s) => b[s.key]))));
  const y = (v) => m.t + hgt - (v / max) * hgt;
  const slot = w / Math.max(1, buckets.length);
  const gap = Math.min(2, slot * 0.15);
  const barW = Math.max(0.5, (slot - gap) / series.length);
  const from = buckets[0]?.from ?? end;
  const x = (t) => m.l + ((t - from) / Math.max(1, end - from)) * w;
  return svg('svg', { class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label, id },
    axes({ m, w, hgt, max, y, from, end, x }),
    svg('g', { class: 'bars' }, buckets.map((b, i) => series.map((s, j) => {
      const v = b[s.key];
      if (!v) return null;
      return svg('rect', {
        class: `bar ${s.cls}`, x: round(m.l + i * slot + gap / 2 + j * barW), y: round(y(v)), width: round(barW),
        height: round(Math.max(1, m.t + hgt - y(v))),
        dataset: { series: s.key, value: v, from: Math.round(b.from), to: Math.round(b.to) },
      }, svg('title', {}, `${s.label}: ${v} (${ago(b.from, end)} to ${ago(b.to, end)})`));
    }))));
}

function axes({ m, w, hgt, max, y, from, end, x }) {
  const yTicks = max >= 2 ? [0, max / 2, max] : [0, max];
  return svg('g', { class: 'axes', 'aria-hidden': 'true' },
    yTicks.map((v) => [
      svg('line', { class: 'grid', x1: m.l, x2: m.l + w, y1: round(y(v)), y2: round(y(v)) }),
      svg('text', { class: 'tick', x: m.l - 4, y: round(y(v) + 4), 'text-anchor': 'end' }, Number.isInteger(v) ? v : v.toFixed(1)),
    ]),
    timeTicks(from, end, Math.max(2, Math.floor(w / 90))).map((t) =>
      svg('text', { class: 'tick', x: round(x(t)), y: m.t + hgt + 15, 'text-anchor': t === end ? 'end' : 'middle' }, ago(t, end))));
}

/**
 * Lines of gauges over time: `lines` = [{key, label, cls, points: [{t, v}]}] within [from, end].
 * A step line per series and a dot per point.
 */
export function lineChart({ lines, from, end, width, height = 130, label, id, gapMs = Infinity }) {
  const m = { l: 38, r: 8, t: 8, b: 20 };
  const w = Math.max(40, width - m.l - m.r);
  const hgt = height - m.t - m.b;
  const max = niceMax(Math.max(0, ...lines.flatMap((l) => l.points.map((p) => p.v))));
  const y = (v) => m.t + hgt - (v / max) * hgt;
  const x = (t) => m.l + ((t - from) / Math.max(1, end - from)) * w;
  return svg('svg', { class: 'chart', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label, id },
    axes({ m, w, hgt, max, y, from, end, x }),
    lines.map((l, i) => {
      const pts = l.points.filter((p) => p.t >= from && p.t <= end);
      // A gap longer than `gapMs` (the page was not looking) breaks the line instead of bridging it.
      const path = pts.map((p, k) => (k && p.t - pts[k - 1].t <= gapMs
        ? `H${round(x(p.t))}V${round(y(p.v))}` : `M${round(x(p.t))},${round(y(p.v))}`)).join('');
      return svg('g', { class: `line ${l.cls ?? `c${i % 6}`}`, dataset: { series: l.key } },
        pts.length > 1 ? svg('path', { d: path }) : null,
        pts.map((p) => svg('circle', { cx: round(x(p.t)), cy: round(y(p.v)), r: 2,
          dataset: { series: l.key, t: Math.round(p.t), value: p.v } }, svg('title', {}, `${l.label}: ${p.v} (${ago(p.t, end)})`))));
    }));
}

const EVENT_LABEL = {
  retry: 'failed, will be retried', 'dead-letter': 'dead-lettered', expired: 'lease expired', completed: 'completed',
  dropped: 'dropped (retries used up, no dead-letter queue)',
};

/** One glyph per event kind, centred on (cx, cy). */
function glyph(kind, cx, cy) {
  const r = 5;
  switch (kind) {
    case 'retry': return svg('path', { d: `M${cx},${cy - r}L${cx + r},${cy}L${cx},${cy + r}L${cx - r},${cy}Z` });
    case 'dead-letter':
    case 'dropped': return svg('path', { d: `M${cx - r},${cy - r}L${cx + r},${cy + r}M${cx + r},${cy - r}L${cx - r},${cy + r}` });
    case 'expired': return svg('circle', { cx, cy, r: r - 1 });
    default: return svg('path', { d: `M${cx},${cy - r}V${cy + r}` });
  }
}

/**
 * The lane timeline: one row per lane (`rows` = [{key, label, leases, holds, events}]) over [from, end]:
 * lease bars, retry-hold bars, and a glyph per event (retry, dead-letter, expired, completed, dropped).
 */
export function timeline({ rows, from, end, width, label, id }) {
  const rowH = 30;
  const labelW = Math.min(170, Math.max(90, width * 0.22));
  const m = { l: labelW, r: 10, t: 6, b: 20 };
  const w = Math.max(40, width - m.l - m.r);
  const height = m.t + rows.length * rowH + m.b;
  const x = (t) => m.l + ((Math.min(end, Math.max(from, t)) - from) / Math.max(1, end - from)) * w;
  const inside = (a, b) => b >= from && a <= end;
  return svg('svg', { class: 'chart timeline', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': label, id },
    svg('g', { class: 'axes', 'aria-hidden': 'true' },
      timeTicks(from, end, Math.max(2, Math.floor(w / 90))).map((t) => [
        svg('line', { class: 'grid', x1: round(x(t)), x2: round(x(t)), y1: m.t, y2: m.t + rows.length * rowH }),
        svg('text', { class: 'tick', x: round(x(t)), y: m.t + rows.length * rowH + 15, 'text-anchor': t === end ? 'end' : 'middle' }, ago(t, end)),
      ])),
    rows.map((row, i) => {
      const top = m.t + i * rowH;
      const mid = top + rowH / 2;
      return svg('g', { class: 'lane-row', dataset: { lane: row.key, partition: row.partition, group: row.group } },
        svg('line', { class: 'rule', x1: m.l, x2: m.l + w, y1: top + rowH, y2: top + rowH }),
        svg('text', { class: 'row-label', x: m.l - 6, y: mid + 4, 'text-anchor': 'end' }, row.label),
        row.holds.filter((hd) => inside(hd.from, hd.to)).map((hd) => svg('rect', {
          class: 'hold', x: round(x(hd.from)), y: top + 5, width: round(Math.max(2, x(hd.to) - x(hd.from))), height: rowH - 10,
          dataset: { event: 'hold', from: Math.round(hd.from), to: Math.round(hd.to), source: hd.source },
        }, svg('title', {}, `retry hold until ${ago(hd.to, end)}`))),
        row.leases.filter((ls) => inside(ls.from, ls.to)).map((ls) => svg('rect', {
          class: `lease ${ls.end ?? 'open'}`, x: round(x(ls.from)), y: top + 8, width: round(Math.max(2, x(ls.to) - x(ls.from))), height: rowH - 16,
          dataset: { event: 'lease', leaseId: ls.id, from: Math.round(ls.from), to: Math.round(ls.to), end: ls.end ?? 'open' },
        }, svg('title', {}, `lease …${String(ls.id).slice(-8)} on offsets ${ls.offsets?.[0]}–${ls.offsets?.[1]}` +
          (ls.end === 'expired' ? ', expired' : ls.end ? ', ended' : ', held now')))),
        row.events.filter((ev) => ev.t >= from && ev.t <= end).map((ev) => svg('g', {
          class: `ev ${ev.kind}`, dataset: { event: ev.kind, t: Math.round(ev.t), count: ev.count ?? 1, source: ev.source,
            offset: ev.offset ?? null },
        }, glyph(ev.kind, round(x(ev.t)), mid),
        svg('title', {}, `${EVENT_LABEL[ev.kind] ?? ev.kind}${ev.count > 1 ? ` ×${ev.count}` : ''}` +
          `${ev.offset !== undefined && ev.offset !== null ? `, offset ${ev.offset}` : ''}${ev.text ? `: ${ev.text}` : ''} (${ago(ev.t, end)})`))));
    }));
}
