// Tiny DOM helpers and formatters shared by the views. No state.

/**
 * Builds an element: h('button', {type: 'button', onclick: f}, 'Text', child...).
 * Attributes starting with "on" become listeners; `dataset`, `class` and booleans are handled;
 * null/undefined/false attributes and children are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'disabled') el[k] = Boolean(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/**
 * Replaces the children of `container` with `nodes`, keeping keyboard focus: the element that had focus
 * and carries `data-focus` gets its twin (same `data-focus` value) in the new content focused again.
 */
export function replaceKeepingFocus(container, nodes) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.dataset.focus : undefined;
  const scroll = [...container.querySelectorAll('[data-scroll]')].map((e) => [e.dataset.scroll, e.scrollLeft, e.scrollTop]);
  container.replaceChildren(...[nodes].flat().filter(Boolean));
  for (const [k, left, top] of scroll) {
    const e = container.querySelector(`[data-scroll="${CSS.escape(k)}"]`);
    if (e) { e.scrollLeft = left; e.scrollTop = top; }
  }
  if (key !== undefined) {
    const twin = container.querySelector(`[data-focus="${CSS.escape(key)}"]`);
    if (twin) twin.focus({ preventScroll: true });
  }
}

/** A horizontally scrollable, keyboard-reachable wrapper for a table. On narrow screens the CSS stacks the
 * rows as cards and labels each cell with its column header (copied here into data-label). */
export function scroller(label, table, key = label) {
  const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent.trim());
  for (const tr of table.querySelectorAll('tbody tr')) {
    [...tr.children].forEach((cell, i) => {
      if (!heads[i]) return;
      cell.dataset.label = heads[i];
      const inner = document.createElement('div');
      inner.append(...cell.childNodes);
      cell.append(inner);
    });
  }
  table.classList.add('stack');
  return h('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': label, dataset: { scroll: key } }, table);
}

/** Local time of an ISO string, with seconds, e.g. 14:03:07. Full date in the title. */
export function timeCell(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return h('time', { datetime: iso, title: d.toLocaleString() }, d.toLocaleTimeString([], { hour12: false }));
}

/** Seconds (one decimal under 10 s) from ms. */
export function seconds(ms) {
  const s = Math.max(0, ms) / 1000;
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
  return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

/** A short form of an id for tables (full id in the title). */
export function shortId(id) {
  if (!id) return h('span', { class: 'muted' }, '—');
  const s = String(id);
  return h('code', { title: s }, s.length > 12 ? `…${s.slice(-8)}` : s);
}

/** A payload as one line (trimmed) with the whole JSON in an expandable block when long. */
export function payloadCell(value) {
  let text;
  try { text = JSON.stringify(value); } catch { text = String(value); }
  if (text === undefined) text = 'undefined';
  if (text.length <= 60) return h('code', { class: 'payload' }, text);
  return h('details', { class: 'payload' },
    h('summary', {}, h('code', {}, `${text.slice(0, 57)}…`)),
    h('pre', {}, JSON.stringify(value, null, 2)));
}

/** Plural helper: n('message', 3) -> "3 messages". */
export function n(word, count) {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/** Promise that resolves after `ms`, or early when `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}
