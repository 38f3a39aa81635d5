// The Durable Object of bench/do-sql-big-rows.mjs: what a pop+ack's SQL costs on workerd's Durable Object SQLite
// when the table also holds big segment rows, in three layouts. One object per layout and segment size, each
// filled once with what a broker holds after a backlog of 100-message pushes to 10 partitions: SEGMENTS segment
// records of `size` bytes, their 426 B index entries and 10 lane records of 106 B.
// - `kv`: everything in `queen_kv (key, chunk, value) WITHOUT ROWID`, worker/src/do_store.rs's layout;
// - `split`: the segments in a second table of the same shape (`queen_seg`), the rest in `queen_kv`;
// - `rowid`: the segments in a rowid table (`queen_seg_r`, the key a unique index of its own), the rest in
//   `queen_kv`.
// A request `/run?layout=L&size=S&op=OP&n=N` runs N operations, each followed by `await ctx.storage.sync()`:
// `lane` puts one lane record (the commit of a pop or an ack: DoStore's upsert), `read` reads one segment by key
// (a pop's `DoStore::get`), `none` only syncs (the fixed cost to subtract).
import { DurableObject } from 'cloudflare:workers';

const SEGMENTS = 1000;
const PARTITIONS = 10;
const hex = (n) => n.toString(16).padStart(16, '0');
const KV = `CREATE TABLE IF NOT EXISTS queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, value BLOB NOT NULL,
  PRIMARY KEY (key, chunk)) WITHOUT ROWID`;
const TRIGGER = `CREATE TRIGGER IF NOT EXISTS queen_kv_shrink_v2 AFTER UPDATE OF value ON queen_kv
  WHEN NEW.chunk = 0 AND length(NEW.value) < 1048576 BEGIN DELETE FROM queen_kv WHERE key = NEW.key AND chunk > 0; END`;
const SEG_TABLE = {
  kv: 'queen_kv',
  split: 'queen_seg',
  rowid: 'queen_seg_r',
};
const SCHEMA = {
  kv: [KV, TRIGGER],
  split: [KV, TRIGGER, KV.replace('queen_kv', 'queen_seg')],
  rowid: [KV, TRIGGER, `CREATE TABLE IF NOT EXISTS queen_seg_r (key TEXT NOT NULL, chunk INTEGER NOT NULL,
    value BLOB NOT NULL, UNIQUE (key, chunk))`],
};
const UPSERT = (table) => `INSERT INTO ${table} (key, chunk, value) VALUES (?, 0, ?)
  ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`;
const bytes = (len, seed) => {
  const b = new Uint8Array(len);
  for (let i = 0; i < len; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
};
const segmentKey = (i) => `s/${hex(i % PARTITIONS + 1)}/${hex(Math.floor(i / PARTITIONS) * 100)}`;

export class BigRows extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.seq = 0;
  }

  fill(layout, size) {
    for (const s of SCHEMA[layout]) this.sql.exec(s);
    if (this.sql.exec('SELECT count(*) AS n FROM queen_kv').one().n > 0) return;
    const seg = SEG_TABLE[layout];
    for (let i = 0; i < SEGMENTS; i++) {
      this.ctx.storage.transactionSync(() => {
        this.sql.exec(UPSERT(seg), segmentKey(i), bytes(size, i));
        this.sql.exec(UPSERT('queen_kv'), `x${segmentKey(i).slice(1)}`, bytes(426, i));
      });
    }
    for (let p = 1; p <= PARTITIONS; p++) this.sql.exec(UPSERT('queen_kv'), `l/${hex(p)}/__QUEUE_MODE__`, bytes(106, p));
  }

  async fetch(request) {
    const url = new URL(request.url);
    const layout = url.searchParams.get('layout');
    const size = Number(url.searchParams.get('size'));
    const op = url.searchParams.get('op');
    const n = Number(url.searchParams.get('n') || 1);
    if (!(layout in SCHEMA) || !['lane', 'read', 'none'].includes(op)) return new Response('bad request', { status: 400 });
    if (!this.ready) {
      this.fill(layout, size);
      this.ready = true;
    }
    let bytesRead = 0;
    for (let i = 0; i < n; i++) {
      const seq = this.seq++;
      if (op === 'lane') {
        this.sql.exec(UPSERT('queen_kv'), `l/${hex(seq % PARTITIONS + 1)}/__QUEUE_MODE__`, bytes(106, seq));
      } else if (op === 'read') {
        for (const row of this.sql.exec(`SELECT key, chunk, value FROM ${SEG_TABLE[layout]} WHERE key IN (?) ORDER BY key, chunk`,
          segmentKey((seq * 7919) % SEGMENTS)).raw()) bytesRead += row[2].byteLength;
      }
      await this.ctx.storage.sync();
    }
    return new Response(JSON.stringify({ bytesRead }), { headers: { 'content-type': 'application/json' } });
  }
}

export default {
  fetch(request, env) {
    // One object per layout and size (the fill is that object's own).
    const url = new URL(request.url);
    const id = env.BIG_ROWS.idFromName(`${url.searchParams.get('layout')}-${url.searchParams.get('size')}`);
    return env.BIG_ROWS.get(id).fetch(request);
  },
};
