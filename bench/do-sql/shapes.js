// The Durable Object of bench/do-sql-shapes.mjs: one object per statement shape and operation, each with its
// own `queen_kv` table (the layout of worker/src/do_store.rs, or a rowid table for `rowid`; `seg-rowid` adds
// `queen_seg`, segments keyed by an integer), the view or
// triggers its shape needs and 3000 other records. A request `/run?shape=SHAPE&op=OP&n=N` runs N commits of
// the rows a queen-edge operation writes (OPS below), each followed by `await ctx.storage.sync()`, so that every
// commit is its own implicit transaction as it is when each comes from a request of its own. `op=none` runs
// the N syncs with no statement (the fixed cost to subtract). SHAPE/drain ends each cursor with `next()`.
import { DurableObject } from 'cloudflare:workers';

const TABLE = `CREATE TABLE IF NOT EXISTS queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, value BLOB NOT NULL,
  PRIMARY KEY (key, chunk)) WITHOUT ROWID`;

// The view and trigger of the session 6 build (worker/src/do_store.rs before session 8).
const VIEW = `CREATE VIEW IF NOT EXISTS queen_apply_v1 (op, key, chunk, value, chunks) AS
  SELECT NULL, NULL, NULL, NULL, NULL WHERE 0`;
const VIEW_TRIGGER = `CREATE TRIGGER IF NOT EXISTS queen_apply_v1_row INSTEAD OF INSERT ON queen_apply_v1 BEGIN
  DELETE FROM queen_kv WHERE NEW.op = 0 AND key = NEW.key;
  DELETE FROM queen_kv WHERE NEW.op = 1 AND NEW.chunk = 0 AND key = NEW.key AND chunk >= NEW.chunks;
  INSERT INTO queen_kv (key, chunk, value) SELECT NEW.key, NEW.chunk, NEW.value WHERE NEW.op = 1
    ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value;
  SELECT RAISE(ABORT, 'refused') WHERE NEW.op = 9;
END`;
// The same view with one trigger per op, each with a WHEN clause.
const WHEN_TRIGGERS = [
  `CREATE TRIGGER IF NOT EXISTS queen_apply_v1_del INSTEAD OF INSERT ON queen_apply_v1 WHEN NEW.op = 0 BEGIN
    DELETE FROM queen_kv WHERE key = NEW.key; END`,
  `CREATE TRIGGER IF NOT EXISTS queen_apply_v1_put INSTEAD OF INSERT ON queen_apply_v1 WHEN NEW.op = 1 BEGIN
    DELETE FROM queen_kv WHERE NEW.chunk = 0 AND key = NEW.key AND chunk >= NEW.chunks;
    INSERT INTO queen_kv (key, chunk, value) VALUES (NEW.key, NEW.chunk, NEW.value)
      ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value; END`,
  `CREATE TRIGGER IF NOT EXISTS queen_apply_v1_fail INSTEAD OF INSERT ON queen_apply_v1 WHEN NEW.op = 9 BEGIN
    SELECT RAISE(ABORT, 'refused'); END`,
];
// On the table itself: an update of chunk 0 (a put over an existing value) deletes the chunks after it.
const STALE_TRIGGER = `CREATE TRIGGER IF NOT EXISTS queen_kv_stale AFTER UPDATE OF value ON queen_kv WHEN NEW.chunk = 0
  BEGIN DELETE FROM queen_kv WHERE key = NEW.key AND chunk > 0; END`;

// `seg-route`: one statement into `queen_kv`; a row whose chunk is negative is a segment, which this trigger
// puts in `queen_seg` (id -1 - chunk), deletes the key's rows in `queen_kv` (a bigger value it had) and skips.
const ROUTE_TRIGGER = `CREATE TRIGGER IF NOT EXISTS queen_seg_route BEFORE INSERT ON queen_kv WHEN NEW.chunk < 0 BEGIN
  INSERT INTO queen_seg (id, value) VALUES (-1 - NEW.chunk, NEW.value) ON CONFLICT (id) DO UPDATE SET value = excluded.value;
  DELETE FROM queen_kv WHERE key = NEW.key;
  SELECT RAISE(IGNORE);
END`;

const SCHEMA = {
  none: [],
  view: [VIEW, VIEW_TRIGGER],
  'view-when': [VIEW, ...WHEN_TRIGGERS],
  upsert: [],
  'upsert+trigger': [STALE_TRIGGER],
  'upsert+delete': [],
  'upsert+delete-txn': [],
  'insert-or-replace': [],
  'upsert-text': [],
  rowid: [],
  insert: [],
  'upsert-1key': [],
  'seg-rowid': [STALE_TRIGGER, 'CREATE TABLE IF NOT EXISTS queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)'],
  'seg-rowid-txn': [STALE_TRIGGER, 'CREATE TABLE IF NOT EXISTS queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)'],
  'seg-route': [STALE_TRIGGER, 'CREATE TABLE IF NOT EXISTS queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)',
    ROUTE_TRIGGER],
  // The same trigger without its delete from `queen_kv` (wrong for a key that had a value there: to weigh the delete).
  // Segment rows straight into `queen_seg` (no routing trigger), one statement; only the segment rows.
  'seg-direct': [STALE_TRIGGER, 'CREATE TABLE IF NOT EXISTS queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)',
    ROUTE_TRIGGER],
  'seg-route-nodel': [STALE_TRIGGER, 'CREATE TABLE IF NOT EXISTS queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)',
    ROUTE_TRIGGER.replace('  DELETE FROM queen_kv WHERE key = NEW.key;\n', '')],
  naive: [`CREATE TABLE IF NOT EXISTS msg (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, partition TEXT NOT NULL,
    txid TEXT NOT NULL, payload TEXT NOT NULL, lease_until INTEGER NOT NULL DEFAULT 0, lease TEXT)`,
  'CREATE INDEX IF NOT EXISTS msg_queue ON msg (queue, id)'],
};

const hex = (n) => n.toString(16).padStart(16, '0');
const bytes = (len, seed) => {
  const b = new Uint8Array(len);
  for (let i = 0; i < len; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
};
// The rows queen-edge's build of session 7 writes, in steady state (captured from its statements on workerd:
// bench/do-sql-shapes.mjs's header): [key, value length, existing key?].
const OPS = {
  push1: (i) => [[`s/${hex(2)}/${hex(i)}`, 149], [`x/${hex(2)}/${hex(i)}`, 30]],
  pop1: () => [[`l/${hex(2)}/__QUEUE_MODE__`, 106]],
  ack1: () => [[`l/${hex(2)}/__QUEUE_MODE__`, 57]],
  push10: (i) => [[`s/${hex(3)}/${hex(i)}`, 1502], [`x/${hex(3)}/${hex(i)}`, 66]],
  push100: (i) => [[`s/${hex(4)}/${hex(i)}`, 15302], [`x/${hex(4)}/${hex(i)}`, 426]],
  push100k: (i) => [[`s/${hex(5)}/${hex(i)}`, 111302], [`x/${hex(5)}/${hex(i)}`, 426]],
  // The same over 10 partitions in turn, as bench/worker-ab.mjs pushes (each commit appends to another one).
  push100p10: (i) => [[`s/${hex(16 + (i % 10))}/${hex(i)}`, 15302], [`x/${hex(16 + (i % 10))}/${hex(i)}`, 426]],
  push100kp10: (i) => [[`s/${hex(32 + (i % 10))}/${hex(i)}`, 111302], [`x/${hex(32 + (i % 10))}/${hex(i)}`, 426]],
  // A 1-message push of session 13's build (records format 3): its segment alone, over 10 partitions in turn, for
  // payloads of 64 B and 1 KB.
  seg1p10: (i) => [[`s/${hex(48 + (i % 10))}/${hex(i)}`, 250]],
  seg1kp10: (i) => [[`s/${hex(64 + (i % 10))}/${hex(i)}`, 1210]],
};
const TEMPLATES = new Map();
const template = (len) => {
  if (!TEMPLATES.has(len)) TEMPLATES.set(len, bytes(len, len));
  return TEMPLATES.get(len);
};

// The naive queue's row for a 1 KB payload (`seg1kp10`; every other push op: 64 B).
const PAYLOAD_1K = JSON.stringify({ n: 1, pad: 'x'.repeat(1024 - JSON.stringify({ n: 1, pad: '' }).length) });

const tuples = (n, one) => Array.from({ length: n }, () => one).join(', ');

export class Shapes extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.seq = 0;
    this.written = 0;
  }

  exec(query, ...args) {
    const cursor = this.sql.exec(query, ...args);
    // Ending the cursor (one `next()` past its last row) hands the statement back to workerd's statement cache
    // at once; a cursor left open keeps it until it is garbage collected, and the next run of the same SQL
    // meanwhile compiles a one-off copy.
    if (this.drain) cursor.next();
    this.written += cursor.rowsWritten;
    return cursor;
  }

  /** One commit of `rows` ([key, Uint8Array]) in this object's shape. */
  commit(shape, rows, op) {
    const flat = [];
    switch (shape) {
      case 'view':
      case 'view-when':
        for (const [k, v] of rows) flat.push(k, v);
        this.exec(`INSERT INTO queen_apply_v1 (op, key, chunk, value, chunks) VALUES ${tuples(rows.length, '(1, ?, 0, ?, 1)')}`, ...flat);
        return;
      case 'upsert':
      case 'rowid':
      case 'upsert+trigger':
        for (const [k, v] of rows) flat.push(k, v);
        this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES ${tuples(rows.length, '(?, 0, ?)')}
          ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`, ...flat);
        return;
      case 'upsert-text':
        for (const [k, v] of rows) flat.push(k, 'y'.repeat(v.length));
        this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES ${tuples(rows.length, '(?, 0, ?)')}
          ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`, ...flat);
        return;
      case 'upsert-1key':
        // Only the first row (one key, one b-tree leaf).
        this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES (?, 0, ?)
          ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`, rows[0][0], rows[0][1]);
        return;
      case 'insert':
        // A plain insert: only right for keys that do not exist yet (a push's segment and index entry).
        for (const [k, v] of rows) flat.push(k, v);
        this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES ${tuples(rows.length, '(?, 0, ?)')}`, ...flat);
        return;
      case 'insert-or-replace':
        for (const [k, v] of rows) flat.push(k, v);
        this.exec(`INSERT OR REPLACE INTO queen_kv (key, chunk, value) VALUES ${tuples(rows.length, '(?, 0, ?)')}`, ...flat);
        return;
      case 'upsert+delete':
      case 'upsert+delete-txn': {
        const run = () => {
          this.exec(`DELETE FROM queen_kv WHERE key IN (${tuples(rows.length, '?')}) AND chunk > 0`, ...rows.map((r) => r[0]));
          for (const [k, v] of rows) flat.push(k, v);
          this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES ${tuples(rows.length, '(?, 0, ?)')}
            ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`, ...flat);
        };
        if (shape === 'upsert+delete-txn') this.ctx.storage.transactionSync(run);
        else run();
        return;
      }
      case 'seg-rowid': {
        // (`seg-rowid-txn`: the same two statements in one `transactionSync`, upserts, as a commit must be all or
        // nothing; `seg-route`: one statement, ROUTE_TRIGGER puts the segment rows in `queen_seg`.)
        // Segments (keys `s/PID/FIRST`) in a rowid table of their own, keyed by an integer made of the key
        // (the partition id times 2^40 plus the first offset), the other rows as `upsert+trigger` does: a seek by integer
        // never reads a row's overflow pages to compare keys, where the `WITHOUT ROWID` table's index b-tree
        // reads a whole overflowing row at each comparison. Two statements, the same rows written.
        const rest = [];
        for (const [k, v] of rows) {
          if (k.startsWith('s/')) {
            const id = parseInt(k.slice(2, 18), 16) * 2 ** 40 + parseInt(k.slice(19), 16);
            this.exec('INSERT INTO queen_seg (id, value) VALUES (?, ?)', id, v);
          } else {
            rest.push(k, v);
          }
        }
        this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES ${tuples(rest.length / 2, '(?, 0, ?)')}
          ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`, ...rest);
        return;
      }
      case 'seg-direct': {
        const segId = (k) => parseInt(k.slice(2, 18), 16) * 2 ** 40 + parseInt(k.slice(19), 16);
        for (const [k, v] of rows) flat.push(segId(k), v);
        this.exec(`INSERT INTO queen_seg (id, value) VALUES ${tuples(rows.length, '(?, ?)')}
          ON CONFLICT (id) DO UPDATE SET value = excluded.value`, ...flat);
        return;
      }
      case 'seg-rowid-txn':
      case 'seg-route-nodel':
      case 'seg-route': {
        const segId = (k) => parseInt(k.slice(2, 18), 16) * 2 ** 40 + parseInt(k.slice(19), 16);
        if (shape !== 'seg-rowid-txn') {
          const tup = [];
          for (const [k, v] of rows) {
            if (k.startsWith('s/')) {
              tup.push('(?, ?, ?)');
              flat.push(k, -1 - segId(k), v);
            } else {
              tup.push('(?, 0, ?)');
              flat.push(k, v);
            }
          }
          this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES ${tup.join(', ')}
            ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`, ...flat);
          return;
        }
        this.ctx.storage.transactionSync(() => {
          const rest = [];
          const segs = [];
          for (const [k, v] of rows) {
            if (k.startsWith('s/')) segs.push(segId(k), v);
            else rest.push(k, v);
          }
          if (segs.length) {
            this.exec(`INSERT INTO queen_seg (id, value) VALUES ${tuples(segs.length / 2, '(?, ?)')}
              ON CONFLICT (id) DO UPDATE SET value = excluded.value`, ...segs);
          }
          if (rest.length) {
            this.exec(`INSERT INTO queen_kv (key, chunk, value) VALUES ${tuples(rest.length / 2, '(?, 0, ?)')}
              ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value`, ...rest);
          }
        });
        return;
      }
      case 'naive': {
        // What the naive queue runs for the same operation, per message (batch 1 only).
        if (op.startsWith('push') || op.startsWith('seg')) {
          this.exec('INSERT INTO msg (queue, partition, txid, payload) VALUES (?, ?, ?, ?)', 'q', 'p0', `t${this.seq}`,
            op === 'seg1kp10' ? PAYLOAD_1K : '{"n":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}');
        } else if (op === 'pop1') {
          const now = Date.now() + this.seq;
          this.exec(`UPDATE msg SET lease_until = ?, lease = ? WHERE id IN (SELECT id FROM msg
            WHERE queue = ? AND lease_until < ? ORDER BY id LIMIT ?) RETURNING id, partition, txid, payload`,
          now + 30_000, 'lease', 'q', now, 1).toArray();
        } else {
          this.exec('DELETE FROM msg WHERE id = (SELECT min(id) FROM msg) AND lease = ?', 'lease');
        }
        return;
      }
      default:
        throw new Error(`unknown shape ${shape}`);
    }
  }

  async fetch(request) {
    const url = new URL(request.url);
    let shape = url.searchParams.get('shape');
    this.drain = shape.endsWith('/drain');
    if (this.drain) shape = shape.slice(0, -'/drain'.length);
    if (!(shape in SCHEMA)) return new Response(`unknown shape ${shape}`, { status: 400 });
    if (!this.ready) {
      // `rowid`: the same columns in a rowid table (the primary key becomes an index of its own).
      this.exec(shape === 'rowid' ? TABLE.replace(') WITHOUT ROWID', ')') : TABLE);
      for (const s of SCHEMA[shape]) this.exec(s);
      // Other records of a broker beside the ones the operation writes (a b-tree of a few levels).
      if (this.sql.exec('SELECT count(*) AS n FROM queen_kv').one().n === 0) {
        for (let i = 0; i < 3000; i++) this.sql.exec('INSERT INTO queen_kv (key, chunk, value) VALUES (?, 0, ?)', `f/${hex(i)}`, bytes(150, i));
      }
      this.ready = true;
    }
    const op = url.searchParams.get('op');
    const n = Number(url.searchParams.get('n') || 1);
    if (op !== 'none' && !(op in OPS)) return new Response(`unknown op ${op}`, { status: 400 });
    const before = this.written;
    for (let i = 0; i < n; i++) {
      if (op !== 'none' && shape !== 'none') {
        const seq = this.seq++;
        // A fresh copy of each value, as the Worker copies each out of wasm memory.
        const rows = OPS[op](seq).map(([k, len]) => [k, new Uint8Array(template(len))]);
        this.commit(shape, rows, op);
      }
      await this.ctx.storage.sync();
    }
    return new Response(JSON.stringify({ rowsWritten: this.written - before }), { headers: { 'content-type': 'application/json' } });
  }
}

export default {
  fetch(request, env) {
    // One object per shape and operation (the naive queue's operations share one: a pop needs pushed rows),
    // so that a checkpoint of one operation's writes is paid by that operation.
    const params = new URL(request.url).searchParams;
    const shape = params.get('shape') ?? 'none';
    const name = shape === 'naive' || params.get('op') === 'none' ? shape : `${shape}/${params.get('op')}`;
    return env.SHAPES.get(env.SHAPES.idFromName(name)).fetch(request);
  },
};
