// The baseline of scripts/bench-worker: a hand-written Durable Object queue, one SQLite row per message, behind
// an entry Worker, answering the three routes the benchmark drives with Queen's shapes (push, queue-wide pop,
// ack/batch). Pop leases rows by timestamp; ack deletes the row. No dedup, no consumer groups, no retries.
import { DurableObject } from 'cloudflare:workers';

const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

export class NaiveQueue extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.rowsWritten = 0;
    this.sql.exec(`CREATE TABLE IF NOT EXISTS msg (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, partition TEXT NOT NULL,
      txid TEXT NOT NULL, payload TEXT NOT NULL, lease_until INTEGER NOT NULL DEFAULT 0, lease TEXT)`);
    this.sql.exec('CREATE INDEX IF NOT EXISTS msg_queue ON msg (queue, id)');
  }

  exec(query, ...args) {
    const cursor = this.sql.exec(query, ...args);
    const rows = cursor.toArray();
    this.lastWritten = cursor.rowsWritten;
    this.rowsWritten += cursor.rowsWritten;
    return rows;
  }

  async fetch(request) {
    const url = new URL(request.url);
    const path = url.pathname;
    if (path === '/health') return json(200, { status: 'healthy' });
    if (path === '/api/v1/status') return json(200, { storage: { rowsWritten: this.rowsWritten } });
    if (path === '/api/v1/push' && request.method === 'POST') {
      const { items } = await request.json();
      const out = items.map((it) => {
        this.exec('INSERT INTO msg (queue, partition, txid, payload) VALUES (?, ?, ?, ?)',
          it.queue, it.partition ?? 'Default', it.transactionId ?? crypto.randomUUID(), JSON.stringify(it.payload ?? null));
        return { status: 'queued', transactionId: it.transactionId };
      });
      return json(201, out);
    }
    const pop = path.match(/^\/api\/v1\/pop\/queue\/([^/]+)$/);
    if (pop && request.method === 'GET') {
      const batch = Math.max(1, Number(url.searchParams.get('batch') || 1));
      const now = Date.now();
      const lease = crypto.randomUUID();
      const rows = this.exec(`UPDATE msg SET lease_until = ?, lease = ? WHERE id IN (SELECT id FROM msg
        WHERE queue = ? AND lease_until < ? ORDER BY id LIMIT ?) RETURNING id, partition, txid, payload`,
      now + 30_000, lease, decodeURIComponent(pop[1]), now, batch);
      if (rows.length === 0) return new Response(null, { status: 204 });
      rows.sort((a, b) => a.id - b.id);
      return json(200, {
        success: true,
        messages: rows.map((r) => ({ transactionId: r.txid, partitionId: r.partition, leaseId: `${r.id}.${lease}`,
          data: JSON.parse(r.payload) })),
      });
    }
    if (path === '/api/v1/ack/batch' && request.method === 'POST') {
      const { acknowledgments } = await request.json();
      return json(200, acknowledgments.map((a) => {
        const dot = String(a.leaseId).indexOf('.');
        this.exec('DELETE FROM msg WHERE id = ? AND lease = ?', Number(a.leaseId.slice(0, dot)), a.leaseId.slice(dot + 1));
        return { transactionId: a.transactionId, success: this.lastWritten > 0 };
      }));
    }
    return json(404, { error: 'Not Found' });
  }
}

export default {
  fetch(request, env) {
    return env.NAIVE.get(env.NAIVE.idFromName('default')).fetch(request);
  },
};
