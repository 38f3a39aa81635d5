// Encryption at rest in real workerd (wire contract §2.4, docs/decisions.md): with QUEEN_ENCRYPTION_KEY,
// payloads of an `encryptionEnabled` queue come back in plain text through the API while the Durable
// Object's SQLite files hold none of it; without a key such queues are refused; a malformed key stops the
// broker with a 503 that says why.
//
// The raw check reads every SQLite file wrangler keeps under --persist-to (after stopping it, so the WAL is
// checkpointed; the WAL and journal files are searched too), joins each row's chunks and inflates segments
// (format byte 1 + raw DEFLATE from miniz_oxide) before searching. A plain queue's marker must be found by
// the same scan, so the scan is shown to see plaintext when there is some.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { DatabaseSync } from 'node:sqlite';
import { startWrangler, tempPersistDir, getJson } from './harness.mjs';

const KEY = '5b2e8a41c07f9d36e1a4b8c2d0f7e6a59c3b1d0e2f4a6b8c9d7e5f3a1b0c2d4e';
const SECRET = 'SECRET-MARKER-c41d2b';
const VISIBLE = 'VISIBLE-MARKER-90aa1f';

const state = tempPersistDir();
after(() => state.cleanup());

const post = (body) => ({
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
});

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

/** Every stored value of every Durable Object SQLite file under `dir`, as text, segments inflated. */
function storedText(dir) {
  let text = '';
  const sqlite = files(dir).filter((f) => f.endsWith('.sqlite'));
  assert.ok(sqlite.length > 0, `no .sqlite file under ${dir}: ${files(dir).join(', ')}`);
  for (const file of sqlite) {
    const db = new DatabaseSync(file, { readOnly: true });
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((t) => t.name);
    if (!tables.includes('queen_kv')) { db.close(); continue; }
    const values = new Map();
    for (const row of db.prepare('SELECT key, chunk, value FROM queen_kv ORDER BY key, chunk').all()) {
      values.set(row.key, Buffer.concat([values.get(row.key) ?? Buffer.alloc(0), Buffer.from(row.value)]));
    }
    // Segments in `queen_seg` (worker/src/do_store.rs): the id is the partition id << 32 | first offset; a long
    // value is the `queen_blob` row the `blob` column names (format 3).
    if (tables.includes('queen_seg')) {
      const read = tables.includes('queen_blob')
        ? 'SELECT s.id, coalesce((SELECT b.value FROM queen_blob b WHERE b.id = s.blob), s.value) AS value FROM queen_seg s ORDER BY s.id'
        : 'SELECT id, value FROM queen_seg ORDER BY id';
      for (const row of db.prepare(read).all()) {
        const id = BigInt(row.id);
        const hex = (n) => n.toString(16).padStart(16, '0');
        values.set(`s/${hex(id >> 32n)}/${hex(id & 0xffffffffn)}`, Buffer.from(row.value));
      }
    }
    db.close();
    for (const [key, value] of values) {
      let bytes = value;
      if (key.startsWith('s/') && value[0] === 1) bytes = inflateRawSync(value.subarray(1));
      text += `${key} ${bytes.toString('utf8')}\n`;
    }
  }
  return text;
}

test('an encrypted queue round-trips in plain text while SQLite holds only ciphertext', async () => {
  let w = await startWrangler({ persistTo: state.dir, vars: { QUEEN_ENCRYPTION_KEY: KEY } });
  const payload = { card: SECRET, n: [1, 2.5, null], s: 'é€' };
  let pid;
  let detail;
  try {
    const health = await getJson(`${w.url}/health`);
    assert.deepEqual(health.body.encryption, { keyConfigured: true, cipher: 'AES-256-GCM' });
    const cfg = await getJson(`${w.url}/api/v1/configure`, post({ queue: 'vault', options: { encryptionEnabled: true, retryLimit: 0 } }));
    assert.equal(cfg.status, 200, JSON.stringify(cfg.body));
    assert.equal(cfg.body.options.encryptionEnabled, true);
    const items = Array.from({ length: 20 }, (_, i) => ({ queue: 'vault', transactionId: `t${i}`, payload: { ...payload, i } }));
    const push = await getJson(`${w.url}/api/v1/push`, post({ items }));
    assert.equal(push.status, 201, JSON.stringify(push.body));
    pid = push.body[0].partitionId;
    const tx = await getJson(`${w.url}/api/v1/transaction`, post({
      operations: [{ type: 'push', items: [{ queue: 'vault', transactionId: 'tx', payload: { card: SECRET, via: 'tx' } }] }],
    }));
    assert.equal(tx.body.success, true, JSON.stringify(tx.body));
    // Long enough (a segment of 1 KB or more) to be stored in `queen_blob`, so the scan's sight of it shows that
    // it reads long segments too.
    const plainItems = Array.from({ length: 20 }, (_, i) => ({ queue: 'open', payload: { note: VISIBLE, i, pad: 'p'.repeat(60) } }));
    const plain = await getJson(`${w.url}/api/v1/push`, post({ items: plainItems }));
    assert.equal(plain.status, 201);

    const pop = await getJson(`${w.url}/api/v1/pop/queue/vault?batch=100`);
    assert.equal(pop.status, 200);
    assert.deepEqual(pop.body.messages.map((m) => m.data), [...items.map((i) => i.payload), { card: SECRET, via: 'tx' }]);
    detail = await getJson(`${w.url}/api/v1/messages/${pid}/t3`);
    assert.deepEqual(detail.body.payload, items[3].payload);
    // One dead letter: its row keeps the envelope, the listing decrypts.
    const m = pop.body.messages[0];
    const ack = await getJson(`${w.url}/api/v1/ack`, post({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq' }));
    assert.equal(ack.body[0].dlq, true, JSON.stringify(ack.body));
    const dlq = await getJson(`${w.url}/api/v1/dlq?queue=vault`);
    assert.deepEqual(dlq.body.messages.map((d) => d.data), [items[0].payload]);
  } finally {
    await w.stop();
  }

  const stored = storedText(state.dir);
  assert.ok(stored.includes(VISIBLE), 'the scan sees a plain queue\'s payload, stored as a long segment (so it would see plaintext)');
  assert.ok(!stored.includes(SECRET), `plaintext of the encrypted queue at rest:\n${stored.slice(0, 4000)}`);
  assert.match(stored, /"authTag":"[A-Za-z0-9+/]{22}==","encrypted":"[A-Za-z0-9+/=]+","iv":"[A-Za-z0-9+/]{22}=="/);
  for (const file of files(state.dir)) {
    assert.ok(!readFileSync(file).includes(SECRET), `plaintext in ${file}`);
  }
  // Checked after the raw scan, so that with sealing disabled the scan is what fails first.
  assert.equal(detail.body.isEncrypted, true, 'the message browser says the message is stored encrypted');

  // Restarted without the key: the encrypted queue refuses pushes and configure refuses encryption;
  // nothing is stored in plain text.
  w = await startWrangler({ persistTo: state.dir });
  try {
    const health = await getJson(`${w.url}/health`);
    assert.equal(health.body.encryption.keyConfigured, false);
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'vault', payload: { card: SECRET } }] }));
    assert.equal(push.status, 409);
    assert.match(push.body.error, /queue 'vault' has encryptionEnabled, but this broker has no encryption key/);
    const cfg = await getJson(`${w.url}/api/v1/configure`, post({ queue: 'vault2', options: { encryptionEnabled: true } }));
    assert.equal(cfg.status, 400);
    assert.match(cfg.body.error, /QUEEN_ENCRYPTION_KEY/);
    // What is stored stays as stored: the envelope, not a wrong plaintext.
    const stored = await getJson(`${w.url}/api/v1/messages/${pid}/t3`);
    assert.equal(stored.body.isEncrypted, true);
    assert.equal(typeof stored.body.payload.encrypted, 'string');
  } finally {
    await w.stop();
  }
  assert.ok(!storedText(state.dir).includes(SECRET));
});

test('a malformed QUEEN_ENCRYPTION_KEY stops the broker with a 503 that says why', async () => {
  const fresh = tempPersistDir();
  const w = await startWrangler({ persistTo: fresh.dir, vars: { QUEEN_ENCRYPTION_KEY: 'not-a-key' }, readyStatus: 503 });
  try {
    const health = await getJson(`${w.url}/health`);
    assert.equal(health.body.status, 'unhealthy');
    assert.match(health.body.error, /QUEEN_ENCRYPTION_KEY is invalid: the encryption key must be 64 hex characters \(32 bytes\), got 9 characters/);
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'q', payload: 1 }] }));
    assert.equal(push.status, 503);
    assert.match(push.body.error, /QUEEN_ENCRYPTION_KEY is invalid/);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});
