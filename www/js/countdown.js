// Live countdowns: every element with data-until="<ms epoch>" shows the time left ("4.2 s"), or its
// data-after text once the instant has passed. A <meter>/<progress> with data-until and data-span counts
// down too. One timer for the whole page; views only set attributes.
import { seconds } from './dom.js';

function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll('[data-until]')) {
    const left = Number(el.dataset.until) - now;
    if (el.tagName === 'PROGRESS' || el.tagName === 'METER') {
      const span = Number(el.dataset.span) || 1;
      el.value = Math.max(0, Math.min(span, left)) / span;
      continue;
    }
    const text = left > 0 ? `${el.dataset.before || ''}${seconds(left)}` : (el.dataset.after ?? 'now');
    if (el.textContent !== text) el.textContent = text;
    el.classList.toggle('passed', left <= 0);
  }
}

let started = false;
/** Starts the shared ticker (idempotent) and runs it once now. */
export function startCountdowns() {
  tick();
  if (started) return;
  started = true;
  setInterval(tick, 200);
}

/** Runs the ticker once (after a render, so new elements show the right value at once). */
export const refreshCountdowns = tick;
