// What the page test's steps share: waiting for a condition in words, calling the broker through the
// page's own connection, reading an element's text.

/** Polls `check` (async, returns truthy when done) until `timeoutMs`; throws "timed out ... waiting for: <what>". */
export async function until(what, check, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e.message;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A Queen HTTP call through the page's own connection (in-browser broker or worker alike). */
export async function api(page, method, path, body = null) {
  return page.evaluate(async ([m, p, b]) => {
    const { store } = await import('/js/state.js');
    const res = await store.state.conn.request(m, p, b);
    return { status: res.status, body: res.body };
  }, [method, path, body]);
}

/** The trimmed text of the first element matching `sel`. */
export const text = async (page, sel) => (await page.locator(sel).first().textContent({ timeout: 2000 }))?.trim() ?? '';
