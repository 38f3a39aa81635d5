//! [`crate::do_store`]'s layout in SQL, decided without I/O: the tables and triggers it creates, which keys
//! are rows of `queen_seg` ([`segment_id`]), and the statements a commit runs ([`plan`]). Why it is laid out
//! so, and how a commit runs them, is in `crate::do_store`'s documentation.

use std::fmt::Write;

use queen_edge::store::{ChangeSet, KeyRange, Record};

/// Bytes per stored chunk of a value (1 MiB; the Durable Object SQLite row limit is 2 MB).
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// The on-disk layout version this build writes and understands (2: segments in `queen_seg`; 3: a segment value
/// of [`BLOB_MIN_BYTES`] or more in `queen_blob`, its `queen_seg` row pointing at it).
pub const FORMAT_VERSION: i64 = 3;

/// Partition ids below `1 << SEG_PID_BITS` and first offsets below `1 << SEG_FIRST_BITS` make a segment key
/// whose value can live in `queen_seg`: the id `pid << SEG_FIRST_BITS | first` stays under 2^53, which a JS
/// number (the SQL binding's integers) holds exactly.
pub const SEG_PID_BITS: u32 = 21;
/// See [`SEG_PID_BITS`].
pub const SEG_FIRST_BITS: u32 = 32;
/// One past the largest `queen_seg` id.
pub const SEG_ID_END: u64 = 1 << (SEG_PID_BITS + SEG_FIRST_BITS);

/// The table of segments (`crate::do_store`'s documentation, "Layout"): a value shorter than
/// [`BLOB_MIN_BYTES`] in `value`, a longer one in the `queen_blob` row `blob` (and `value` empty).
pub const SEG_TABLE: &str = "CREATE TABLE IF NOT EXISTS queen_seg \
     (id INTEGER PRIMARY KEY, value BLOB NOT NULL, blob INTEGER)";

/// Format 2's `queen_seg` gains the `blob` column (`NULL` in every row it held: their values are inline).
pub const SEG_BLOB_COLUMN: &str = "ALTER TABLE queen_seg ADD COLUMN blob INTEGER";

/// One row: 1 when `queen_seg` exists without its `blob` column (format 2's table, which
/// [`SEG_BLOB_COLUMN`] upgrades), 0 otherwise.
pub const SEG_LACKS_BLOB_COLUMN: &str = "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
     AND name = 'queen_seg' AND sql NOT LIKE '%blob INTEGER%'";

/// The values of long segments, in the order they were written: a new row takes the next rowid, so it is
/// appended at the right edge of the b-tree, where SQLite adds a page without rebalancing its neighbours.
pub const BLOB_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS queen_blob (id INTEGER PRIMARY KEY, value BLOB NOT NULL)";

/// Segment values of this many bytes or more go to `queen_blob` (docs/decisions.md, "The disk's share of a
/// batch-100 push, and long segments appended to a table of their own"): a `queen_seg` leaf holds one such
/// value or two, so a value inserted among other partitions' rows split a full leaf and rewrote its
/// neighbours; shorter values share leaves.
pub const BLOB_MIN_BYTES: usize = 1024;

/// Drops format 2's routing trigger, which would leave a `blob` pointer in place when it rewrote a value.
pub const DROP_ROUTE_V1: &str = "DROP TRIGGER IF EXISTS queen_seg_route_v1";

/// Puts a row of an upsert into `queen_kv` whose chunk is negative and whose value is shorter than
/// [`BLOB_MIN_BYTES`] into `queen_seg` instead (id `-1 - chunk`, the value inline), deletes whatever
/// `queen_kv` holds under its key (a value of [`CHUNK_BYTES`] or more it had before), and skips the row
/// (`RAISE(IGNORE)` ends this row's insert, the statement goes on with the next row). So a commit that puts
/// segments and other records stays one statement. Its name carries a version: a changed body gets a new name.
pub const ROUTE_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_seg_route_v2 \
     BEFORE INSERT ON queen_kv WHEN NEW.chunk < 0 AND length(NEW.value) < 1024 BEGIN \
       INSERT INTO queen_seg (id, value, blob) VALUES (-1 - NEW.chunk, NEW.value, NULL) \
         ON CONFLICT (id) DO UPDATE SET value = excluded.value, blob = NULL; \
       DELETE FROM queen_kv WHERE key = NEW.key; \
       SELECT RAISE(IGNORE); \
     END";

/// [`ROUTE_TRIGGER`] for a value of [`BLOB_MIN_BYTES`] or more: the value is appended to `queen_blob`, and the
/// `queen_seg` row points at it (`last_insert_rowid()` is the trigger's own insert while the trigger runs).
pub const ROUTE_BLOB_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_seg_route_blob_v1 \
     BEFORE INSERT ON queen_kv WHEN NEW.chunk < 0 AND length(NEW.value) >= 1024 BEGIN \
       INSERT INTO queen_blob (value) VALUES (NEW.value); \
       INSERT INTO queen_seg (id, value, blob) VALUES (-1 - NEW.chunk, X'', last_insert_rowid()) \
         ON CONFLICT (id) DO UPDATE SET value = excluded.value, blob = excluded.blob; \
       DELETE FROM queen_kv WHERE key = NEW.key; \
       SELECT RAISE(IGNORE); \
     END";

/// Deletes the `queen_blob` row of a `queen_seg` row deleted (a segment deleted, or moved to `queen_kv`).
pub const BLOB_DELETE_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_blob_drop_v1 \
     AFTER DELETE ON queen_seg WHEN OLD.blob IS NOT NULL BEGIN \
       DELETE FROM queen_blob WHERE id = OLD.blob; \
     END";

/// Deletes the `queen_blob` row a `queen_seg` row pointed at before an update pointed it elsewhere or nowhere
/// (a segment written again: compressed by maintenance, or shortened).
pub const BLOB_UPDATE_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_blob_swap_v1 \
     AFTER UPDATE OF blob ON queen_seg WHEN OLD.blob IS NOT NULL AND OLD.blob IS NOT NEW.blob BEGIN \
       DELETE FROM queen_blob WHERE id = OLD.blob; \
     END";

/// The start of a query of `(id, value)` rows of `queen_seg` (`s`), each value read from `queen_blob` when the
/// row points there; a `WHERE` on `s.id` follows. A row that points at a `queen_blob` row that is not there
/// (damaged storage) reads as text, which the reader refuses with an error naming the tables, rather than
/// as an empty value.
pub const SEG_ROWS_HEAD: &str = "SELECT s.id, CASE WHEN s.blob IS NULL THEN s.value \
     ELSE coalesce((SELECT b.value FROM queen_blob b WHERE b.id = s.blob), 'queen_blob row missing') END \
     FROM queen_seg s WHERE ";

/// Bound parameters per statement, under SQLite-in-Durable-Objects' limit of 100.
pub const MAX_BINDINGS: usize = 99;

/// Largest total of bound value bytes batched into one `INSERT` (bigger chunks go alone).
pub const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Deletes the chunks after chunk 0 of a key whose chunk 0 is updated with a one-chunk value (shorter than
/// [`CHUNK_BYTES`], the number in its `WHEN`: see `crate::do_store`'s documentation). Its name carries a
/// version: a changed body gets a new name, never an old trigger kept by `IF NOT EXISTS`.
pub const SHRINK_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_kv_shrink_v2 \
     AFTER UPDATE OF value ON queen_kv WHEN NEW.chunk = 0 AND length(NEW.value) < 1048576 BEGIN \
       DELETE FROM queen_kv WHERE key = NEW.key AND chunk > 0; \
     END";

/// Drops the trigger of an earlier build of this commit SQL (`queen_kv_shrink_v1`, commit ea7b0ea on branch
/// worker-sql): it deleted a key's chunks after 0 on every update of chunk 0, which that build's commits
/// counted on and this build's do not (kept, it would delete and insert again what a multi-chunk put updates in
/// place). That build, opening storage again, creates it again and commits right with both in place.
pub const DROP_EARLIER_TRIGGER: &str = "DROP TRIGGER IF EXISTS queen_kv_shrink_v1";

/// The start of the statement that deletes the old chunks past a multi-chunk value's own (its key and
/// chunk count follow).
const TRIM_HEAD: &str = "DELETE FROM queen_kv WHERE key = ? AND chunk >= ";

/// The start and end of a statement that puts chunks.
const UPSERT_HEAD: &str = "INSERT INTO queen_kv (key, chunk, value) VALUES ";
const UPSERT_TAIL: &str = " ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value";

/// The start and end of a statement that deletes keys.
const DELETE_HEAD: &str = "DELETE FROM queen_kv WHERE key IN (";
const DELETE_TAIL: &str = ")";

/// Deletes the `queen_seg` row of a segment key whose new value, of [`CHUNK_BYTES`] or more, goes to `queen_kv`.
const SEG_EVICT: &str = "DELETE FROM queen_seg WHERE id = ?";

/// The start of a statement that deletes segment values from `queen_seg` (ends with [`DELETE_TAIL`]).
const SEG_DELETE_HEAD: &str = "DELETE FROM queen_seg WHERE id IN (";

/// The key of the row `DoStore::commit_then_fail` adds: its `NULL` value breaks `queen_kv`'s `NOT NULL`,
/// so the statement fails at its last row.
const FAIL_KEY: &str = "queen_kv/commit_then_fail";

/// One SQL statement with its bound parameters, prepared before the transaction starts; the values are
/// borrowed from the change set until they are turned into JS values (`crate::do_store`).
pub struct Statement<'a> {
    /// The SQL, with a `?` per binding.
    pub sql: String,
    /// The bound parameters, in order.
    pub bindings: Vec<Binding<'a>>,
}

/// A bound parameter.
#[derive(Debug, Clone, Copy)]
pub enum Binding<'a> {
    /// A key.
    Text(&'a str),
    /// A value.
    Blob(&'a [u8]),
    /// An integer whose magnitude is at most 2^53 (exact as a JS number).
    Int(i64),
}

/// Chunks of `value`: at least one (an empty value is one empty chunk).
fn chunks(value: &[u8]) -> Vec<&[u8]> {
    if value.is_empty() {
        vec![value]
    } else {
        value.chunks(CHUNK_BYTES).collect()
    }
}

/// The `queen_seg` id of `key` when `key` is a segment key (`s/PID/FIRST`, 16 lower-case hex digits each,
/// as `queen_edge::core::segment_key` writes it) whose numbers fit ([`SEG_PID_BITS`], [`SEG_FIRST_BITS`]); the
/// id is `pid << SEG_FIRST_BITS | first`, so ids sort as their keys do. Any other key is `None`.
pub fn segment_id(key: &str) -> Option<i64> {
    let bytes = key.as_bytes();
    if bytes.len() != 35 || !key.starts_with("s/") || bytes[18] != b'/' {
        return None;
    }
    let hex = |digits: &[u8]| -> Option<u64> {
        digits.iter().try_fold(0u64, |n, &d| {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                _ => return None,
            };
            Some(n << 4 | u64::from(v))
        })
    };
    let pid = hex(&bytes[2..18])?;
    let first = hex(&bytes[19..35])?;
    if pid >> SEG_PID_BITS != 0 || first >> SEG_FIRST_BITS != 0 {
        return None;
    }
    Some((pid << SEG_FIRST_BITS | first) as i64)
}

/// The key of `queen_seg` id `id` (the inverse of [`segment_id`]).
pub fn segment_key_of(id: u64) -> String {
    queen_edge::core::segment_key(id >> SEG_FIRST_BITS, id & ((1 << SEG_FIRST_BITS) - 1))
}

/// The characters a segment key that has a `queen_seg` id can hold at `position` (0 to 34), in order: the
/// keys of the ids are exactly the strings of 35 characters each drawn from its position's set (`s/`, the
/// partition id's 16 hex digits of which the first ten are `0` and the eleventh `0` or `1`, `/`, the first
/// offset's 16 hex digits of which the first eight are `0`), and an id is that string read as a
/// mixed-radix number (a position's digit is its character's place in the set), so ids sort as their keys
/// do.
const fn segment_key_chars(position: usize) -> &'static [u8] {
    const HEX: &[u8] = b"0123456789abcdef";
    match position {
        0 => b"s",
        1 | 18 => b"/",
        12 => b"01",
        13..=17 | 27..=34 => HEX,
        _ => b"0",
    }
}

/// Length of a segment key that has a `queen_seg` id.
const SEGMENT_KEY_LEN: usize = 35;

// The positions' sets spell exactly the ids below [`SEG_ID_END`]: a change of [`SEG_PID_BITS`] or
// [`SEG_FIRST_BITS`] that [`segment_key_chars`] does not follow stops the build.
const _: () = {
    let mut keys = 1u64;
    let mut position = 0;
    while position < SEGMENT_KEY_LEN {
        keys *= segment_key_chars(position).len() as u64;
        position += 1;
    }
    assert!(
        keys == SEG_ID_END,
        "segment_key_chars does not spell the ids below SEG_ID_END"
    );
};

/// The smallest `queen_seg` id whose key is `bound` or after it, [`SEG_ID_END`] when none is. The smallest
/// such key (keys being the strings of [`segment_key_chars`]) is found a position at a time, its id read
/// as it goes: it follows `bound` while `bound`'s characters are allowed; at the first one that is not, it
/// takes the next allowed character there, if any, and the smallest at every later position; if none is
/// larger, every key with the prefix followed so far is below `bound`, and the answer is the id after the
/// largest of them. A `bound` that is a key is its own id; one that has a key as a proper prefix is the id
/// after it.
pub fn first_segment_id_from(bound: &str) -> u64 {
    /// What fills the positions after the one where the key left `bound`.
    #[derive(PartialEq)]
    enum Rest {
        Following,
        Smallest,
        Largest,
    }
    let bound = bound.as_bytes();
    let mut rest = Rest::Following;
    let mut id = 0u64;
    for position in 0..SEGMENT_KEY_LEN {
        let chars = segment_key_chars(position);
        let digit = match rest {
            Rest::Smallest => 0,
            Rest::Largest => chars.len() - 1,
            Rest::Following => match bound.get(position) {
                None => {
                    rest = Rest::Smallest;
                    0
                }
                Some(&c) => match chars.iter().position(|&allowed| allowed >= c) {
                    Some(digit) => {
                        if chars[digit] != c {
                            rest = Rest::Smallest;
                        }
                        digit
                    }
                    None => {
                        rest = Rest::Largest;
                        chars.len() - 1
                    }
                },
            },
        };
        id = id * chars.len() as u64 + digit as u64;
    }
    match rest {
        Rest::Smallest => id,
        Rest::Largest => id + 1,
        Rest::Following if bound.len() == SEGMENT_KEY_LEN => id,
        Rest::Following => id + 1,
    }
}

/// The statement of `Store::first_keys` for `range` (`upper`: [`prefix_end`] of its prefix), one row of
/// the first `queen_seg` id of the range (`NULL` when no id can lie in it) and the first `queen_kv` key of
/// it, each a scalar subquery that seeks once in its table's b-tree and reads at most one row.
pub fn first_keys_row<'a>(range: &'a KeyRange, upper: Option<&'a str>) -> Statement<'a> {
    let (prefix, from) = (range.prefix.as_str(), range.from.as_str());
    // Every key that starts with the prefix is before `from`: nothing can be in the range.
    if from > prefix && !from.starts_with(prefix) {
        return Statement {
            sql: "SELECT NULL, NULL".into(),
            bindings: Vec::new(),
        };
    }
    let lower = from.max(prefix);
    let mut bindings = Vec::with_capacity(4);
    let first = first_segment_id_from(lower);
    let end = upper.map_or(SEG_ID_END, first_segment_id_from);
    let segment = if first < end {
        bindings.push(Binding::Int(first as i64));
        bindings.push(Binding::Int((end - 1) as i64));
        "(SELECT id FROM queen_seg WHERE id BETWEEN ? AND ? ORDER BY id LIMIT 1)"
    } else {
        "NULL"
    };
    bindings.push(Binding::Text(lower));
    let kv = match upper {
        Some(upper) => {
            bindings.push(Binding::Text(upper));
            "(SELECT key FROM queen_kv WHERE key >= ? AND key < ? ORDER BY key LIMIT 1)"
        }
        None => "(SELECT key FROM queen_kv WHERE key >= ? ORDER BY key LIMIT 1)",
    };
    Statement {
        sql: format!("SELECT {segment}, {kv}"),
        bindings,
    }
}

/// Ranges of one batched `Store::first_keys` statement ([`first_keys_plan`]): four bound parameters each.
pub const FIRST_KEYS_BATCH: usize = MAX_BINDINGS / 4;

/// The statements `Store::first_keys` runs for its ranges ([`first_keys_plan`]).
pub struct FirstKeysPlan<'a> {
    /// Statements of rows `(i, first queen_seg id or NULL, first queen_kv key or NULL)`, each with the
    /// indexes into the ranges of its rows: row `i` answers range `indexes[i]`.
    pub batches: Vec<(Vec<usize>, Statement<'a>)>,
    /// Ranges whose prefix has no end ([`prefix_end`] is `None`), each with its [`first_keys_row`].
    pub alone: Vec<(usize, Statement<'a>)>,
}

/// The statements of `Store::first_keys` for `ranges` (`uppers[i]`: [`prefix_end`] of range `i`'s prefix).
/// A range in which no key can lie (`from` past every key of its prefix) gets no statement: its answer is
/// `None`. The ranges with an upper bound (every range whose prefix is not empty, so every range the engine's
/// open asks about) go [`FIRST_KEYS_BATCH`] to a statement: a `VALUES` row a range (its index in the batch,
/// written into the SQL, so full batches share one statement text) and, for each row, the same two scalar
/// subqueries as [`first_keys_row`], correlated with the row, each one seek that reads at most one row. A
/// range in which no `queen_seg` id can lie binds the empty id span `1..=0`. (workerd refused a `SELECT` of
/// two columns a range for 24 ranges and a `UNION ALL` of 24 rows; a multi-row `VALUES` is not a compound
/// `SELECT` for SQLite's limit, as the commits' multi-row `INSERT`s show.)
pub fn first_keys_plan<'a>(
    ranges: &'a [KeyRange],
    uppers: &'a [Option<String>],
) -> FirstKeysPlan<'a> {
    let mut plan = FirstKeysPlan {
        batches: Vec::new(),
        alone: Vec::new(),
    };
    let mut batched: Vec<(usize, &'a str)> = Vec::new();
    for (at, (range, upper)) in ranges.iter().zip(uppers).enumerate() {
        let (prefix, from) = (range.prefix.as_str(), range.from.as_str());
        if from > prefix && !from.starts_with(prefix) {
            continue;
        }
        match upper {
            Some(upper) => batched.push((at, upper)),
            None => plan.alone.push((at, first_keys_row(range, None))),
        }
    }
    for batch in batched.chunks(FIRST_KEYS_BATCH) {
        let mut rows = String::new();
        let mut bindings = Vec::with_capacity(batch.len() * 4);
        for (i, &(at, upper)) in batch.iter().enumerate() {
            let range = &ranges[at];
            let lower = range.from.as_str().max(range.prefix.as_str());
            let (first, end) = (first_segment_id_from(lower), first_segment_id_from(upper));
            let (low_id, high_id) = if first < end {
                (first as i64, (end - 1) as i64)
            } else {
                (1, 0)
            };
            if i > 0 {
                rows.push_str(", ");
            }
            write!(rows, "({i}, ?, ?, ?, ?)").expect("writing to a String does not fail");
            bindings.extend([
                Binding::Int(low_id),
                Binding::Int(high_id),
                Binding::Text(lower),
                Binding::Text(upper),
            ]);
        }
        let sql = format!(
            "SELECT r.column1, \
             (SELECT id FROM queen_seg WHERE id BETWEEN r.column2 AND r.column3 ORDER BY id LIMIT 1), \
             (SELECT key FROM queen_kv WHERE key >= r.column4 AND key < r.column5 ORDER BY key LIMIT 1) \
             FROM (VALUES {rows}) AS r"
        );
        let indexes = batch.iter().map(|&(at, _)| at).collect();
        plan.batches.push((indexes, Statement { sql, bindings }));
    }
    plan
}

/// `a` and `b`, each in key order and with no key in both, as one list in key order.
pub fn merge_records(a: Vec<Record>, b: Vec<Record>) -> Vec<Record> {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.0 < y.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
    }
}

/// `?, ?, ..., ?` with `n` placeholders.
pub fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

/// The statements of a commit of `changes` (`crate::do_store`'s documentation, "Commit"): the deletes, the
/// trims of multi-chunk values, then every chunk of every put (chunk 0 of a key first), batched by bound
/// parameters and bytes; with `fail`, one more put row at the end whose `NULL` value fails its statement
/// (`DoStore::commit_then_fail`).
pub fn plan(changes: &ChangeSet, fail: bool) -> Vec<Statement<'_>> {
    let mut segment_deletes = Batch::new(SEG_DELETE_HEAD, DELETE_TAIL);
    let mut deletes = Batch::new(DELETE_HEAD, DELETE_TAIL);
    for key in changes.deletes() {
        if let Some(id) = segment_id(key) {
            segment_deletes.row("?", &[Binding::Int(id)], 0);
        }
        // A segment key's value of CHUNK_BYTES or more, or one format 1 wrote, is in `queen_kv`.
        deletes.row("?", &[Binding::Text(key)], 0);
    }
    let mut trims = Vec::new();
    let mut puts = Batch::new(UPSERT_HEAD, UPSERT_TAIL);
    for (key, value) in changes.puts() {
        let id = segment_id(key);
        if let Some(id) = id.filter(|_| value.len() < CHUNK_BYTES) {
            // ROUTE_TRIGGER puts it in `queen_seg`.
            puts.row(
                "(?, ?, ?)",
                &[
                    Binding::Text(key),
                    Binding::Int(-1 - id),
                    Binding::Blob(value),
                ],
                value.len(),
            );
            continue;
        }
        let parts = chunks(value);
        if value.len() >= CHUNK_BYTES {
            trims.push(Statement {
                sql: format!("{TRIM_HEAD}{}", parts.len()),
                bindings: vec![Binding::Text(key)],
            });
            if let Some(id) = id {
                trims.push(Statement {
                    sql: SEG_EVICT.to_string(),
                    bindings: vec![Binding::Int(id)],
                });
            }
        }
        for (i, chunk) in parts.into_iter().enumerate() {
            puts.row(
                &format!("(?, {i}, ?)"),
                &[Binding::Text(key), Binding::Blob(chunk)],
                chunk.len(),
            );
        }
    }
    if fail {
        puts.row("(?, 0, NULL)", &[Binding::Text(FAIL_KEY)], 0);
    }
    let mut statements = segment_deletes.finish();
    statements.extend(deletes.finish());
    statements.extend(trims);
    statements.extend(puts.finish());
    statements
}

/// Rows of one kind (the `tuple`s of [`Batch::row`] between `head` and `tail`) gathered into statements.
struct Batch<'a> {
    head: &'static str,
    tail: &'static str,
    done: Vec<Statement<'a>>,
    sql: String,
    bindings: Vec<Binding<'a>>,
    rows: usize,
    bytes: usize,
}

impl<'a> Batch<'a> {
    fn new(head: &'static str, tail: &'static str) -> Self {
        Batch {
            head,
            tail,
            done: Vec::new(),
            sql: String::new(),
            bindings: Vec::new(),
            rows: 0,
            bytes: 0,
        }
    }

    /// Adds one row (`tuple`, with `bindings` for its `?`s and `len` bytes of value), starting a new
    /// statement when this one would pass [`MAX_BINDINGS`] or [`MAX_BATCH_BYTES`].
    fn row(&mut self, tuple: &str, bindings: &[Binding<'a>], len: usize) {
        if self.rows > 0
            && (self.bindings.len() + bindings.len() > MAX_BINDINGS
                || self.bytes + len > MAX_BATCH_BYTES)
        {
            self.flush();
        }
        if self.rows == 0 {
            self.sql.push_str(self.head);
        } else {
            self.sql.push_str(", ");
        }
        self.sql.push_str(tuple);
        self.bindings.extend_from_slice(bindings);
        self.rows += 1;
        self.bytes += len;
    }

    fn flush(&mut self) {
        if self.rows == 0 {
            return;
        }
        self.sql.push_str(self.tail);
        self.done.push(Statement {
            sql: std::mem::take(&mut self.sql),
            bindings: std::mem::take(&mut self.bindings),
        });
        self.rows = 0;
        self.bytes = 0;
    }

    fn finish(mut self) -> Vec<Statement<'a>> {
        self.flush();
        self.done
    }
}

/// The smallest string greater than every string that starts with `prefix`, or `None` when there is none
/// (empty prefix, or every character is `char::MAX`). Code-point order equals UTF-8 byte order.
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut rest = prefix;
    while let Some(last) = rest.chars().next_back() {
        rest = &rest[..rest.len() - last.len_utf8()];
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(c as u32 + 1),
        };
        if let Some(next) = next {
            let mut end = String::with_capacity(rest.len() + next.len_utf8());
            end.push_str(rest);
            end.push(next);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_char() {
        assert_eq!(prefix_end("p/"), Some("p0".to_string()));
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("a\u{D7FF}"), Some("a\u{E000}".to_string()));
        assert_eq!(prefix_end("a\u{10FFFF}"), Some("b".to_string()));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
    }

    #[test]
    fn the_shrink_trigger_skips_values_of_a_full_chunk_or_more() {
        assert!(SHRINK_TRIGGER.contains(&format!("length(NEW.value) < {CHUNK_BYTES} ")));
    }

    #[test]
    fn the_routing_triggers_split_segment_values_at_blob_min_bytes() {
        assert!(ROUTE_TRIGGER.contains(&format!("length(NEW.value) < {BLOB_MIN_BYTES} ")));
        assert!(ROUTE_BLOB_TRIGGER.contains(&format!("length(NEW.value) >= {BLOB_MIN_BYTES} ")));
    }

    #[test]
    fn segment_ids_are_the_segment_keys_that_fit_in_key_order() {
        let key = |pid: u64, first: u64| format!("s/{pid:016x}/{first:016x}");
        assert_eq!(segment_id(&key(0, 0)), Some(0));
        assert_eq!(segment_id(&key(1, 5)), Some((1 << 32) + 5));
        let top = key((1 << SEG_PID_BITS) - 1, (1 << SEG_FIRST_BITS) - 1);
        assert_eq!(segment_id(&top), Some(SEG_ID_END as i64 - 1));
        // Ids and `-1 - id` stay exact as JS numbers.
        const { assert!(SEG_ID_END <= 1 << 53) };
        for other in [
            key(1 << SEG_PID_BITS, 0),
            key(0, 1 << SEG_FIRST_BITS),
            key(u64::MAX, u64::MAX),
            "s/000000000000000A/0000000000000000".to_string(),
            "s/0000000000000001/000000000000000".to_string(),
            "s/0000000000000001/0000000000000000x".to_string(),
            "x/0000000000000001/0000000000000000".to_string(),
            "s/0000000000000001-0000000000000000".to_string(),
            "s/+000000000000001/0000000000000000".to_string(),
        ] {
            assert_eq!(segment_id(&other), None, "{other}");
        }
        for id in [
            0,
            1,
            (1 << 32) - 1,
            1 << 32,
            12_345 << 32 | 678,
            SEG_ID_END - 1,
        ] {
            assert_eq!(segment_id(&segment_key_of(id)), Some(id as i64));
            assert!(segment_key_of(id) < segment_key_of(id + 1) || id + 1 == SEG_ID_END);
        }
    }

    /// [`first_segment_id_from`] by its definition: a binary search over the ids, each key written out.
    fn first_segment_id_by_search(bound: &str) -> u64 {
        let (mut low, mut high) = (0u64, SEG_ID_END);
        while low < high {
            let mid = low + (high - low) / 2;
            if segment_key_of(mid).as_str() >= bound {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        low
    }

    #[test]
    fn the_first_segment_id_from_a_bound_is_the_one_a_search_over_the_keys_finds() {
        let ids = [
            0,
            1,
            5,
            (1 << 32) - 1,
            1 << 32,
            (1 << 32) + 5,
            12_345 << 32 | 678,
            0xfffff << 32 | 0xffff_ffff,
            SEG_ID_END - 2,
            SEG_ID_END - 1,
        ];
        let mut bounds: Vec<String> = ["", "s", "s/", "s0", "r", "t", "s/0", "s/1", "\u{10FFFF}"]
            .iter()
            .map(|b| b.to_string())
            .collect();
        for id in ids {
            let key = segment_key_of(id);
            // The key, each of its prefixes, each prefix with one character changed to each of a few, and
            // longer strings that start with it.
            for len in 0..=key.len() {
                let prefix = &key[..len];
                bounds.push(prefix.to_string());
                bounds.push(format!("{prefix}x"));
                bounds.push(prefix_end(prefix).unwrap_or_default());
                for c in [
                    '\0', '/', '0', '1', '2', '9', ':', 'a', 'f', 'g', 's', '\u{e9}',
                ] {
                    bounds.push(format!("{prefix}{c}{}", &key[(len + 1).min(key.len())..]));
                }
            }
        }
        for bound in &bounds {
            assert_eq!(
                first_segment_id_from(bound),
                first_segment_id_by_search(bound),
                "{bound:?}"
            );
        }
    }

    #[test]
    fn the_first_segment_id_from_a_bound_is_the_first_key_at_or_after_it() {
        assert_eq!(first_segment_id_from(""), 0);
        assert_eq!(first_segment_id_from("s/"), 0);
        assert_eq!(first_segment_id_from("s0"), SEG_ID_END);
        assert_eq!(first_segment_id_from("t"), SEG_ID_END);
        assert_eq!(first_segment_id_from("s/0000000000000001/"), 1 << 32);
        assert_eq!(first_segment_id_from("s/00000000000000010"), 2 << 32);
        assert_eq!(
            first_segment_id_from("s/0000000000000001/0000000000000005"),
            (1 << 32) + 5
        );
        assert_eq!(
            first_segment_id_from("s/0000000000000001/0000000000000005x"),
            (1 << 32) + 6
        );
        assert_eq!(first_segment_id_from("s/0000000000200000"), SEG_ID_END);
        assert_eq!(first_segment_id_from("s/00000000001fffff/1"), SEG_ID_END);
    }

    #[test]
    fn a_first_keys_statement_binds_only_what_its_range_can_hold() {
        let range = |prefix: &str, from: &str| KeyRange {
            prefix: prefix.into(),
            from: from.into(),
        };
        let row = |range: &KeyRange| {
            let upper = prefix_end(&range.prefix);
            let statement = first_keys_row(range, upper.as_deref());
            let ints: Vec<i64> = statement
                .bindings
                .iter()
                .filter_map(|b| match b {
                    Binding::Int(n) => Some(*n),
                    _ => None,
                })
                .collect();
            (statement.sql, statement.bindings.len(), ints)
        };
        // `from` after every key of the prefix: no subquery.
        let (sql, bound, _) = row(&range("fk/", "s/"));
        assert_eq!((sql.as_str(), bound), ("SELECT NULL, NULL", 0));
        // No segment key can start with `fk/`: `queen_kv` only.
        let (sql, bound, _) = row(&range("fk/", ""));
        assert!(
            sql.starts_with("SELECT NULL, (SELECT key FROM queen_kv"),
            "{sql}"
        );
        assert_eq!(bound, 2);
        // A partition's segments from offset 5 on: both tables, the ids from `pid << 32 | 5`.
        let (sql, bound, ints) = row(&range("s/0000000000000002/", &segment_key_of(2 << 32 | 5)));
        assert!(
            sql.contains("queen_seg") && sql.contains("queen_kv"),
            "{sql}"
        );
        assert_eq!(bound, 4);
        assert_eq!(ints, vec![2 << 32 | 5, (3 << 32) - 1]);
    }

    #[test]
    fn first_keys_batches_the_ranges_with_an_end_and_skips_the_empty_ones() {
        let range = |prefix: &str, from: &str| KeyRange {
            prefix: prefix.into(),
            from: from.into(),
        };
        // The open's ranges: a partition's segments from where its probe stopped.
        let mut ranges: Vec<KeyRange> = (0..FIRST_KEYS_BATCH as u64 + 2)
            .map(|pid| {
                range(
                    &format!("s/{pid:016x}/"),
                    &segment_key_of(pid << SEG_FIRST_BITS | 7),
                )
            })
            .collect();
        ranges.insert(1, range("fk/", "s/")); // nothing can be in it
        ranges.insert(2, range("", "b")); // no end: alone
        ranges.insert(3, range("fk/", "")); // no segment id can be in it
        let uppers: Vec<Option<String>> = ranges.iter().map(|r| prefix_end(&r.prefix)).collect();
        let plan = first_keys_plan(&ranges, &uppers);

        assert_eq!(plan.alone.len(), 1);
        assert_eq!(plan.alone[0].0, 2);
        assert_eq!(plan.alone[0].1.sql, first_keys_row(&ranges[2], None).sql);
        let batched: Vec<usize> = plan
            .batches
            .iter()
            .flat_map(|(indexes, _)| indexes.clone())
            .collect();
        let expected: Vec<usize> = (0..ranges.len()).filter(|&i| i != 1 && i != 2).collect();
        assert_eq!(batched, expected);
        assert_eq!(plan.batches.len(), 2);
        let (indexes, statement) = &plan.batches[0];
        assert_eq!(indexes.len(), FIRST_KEYS_BATCH);
        assert!(statement.bindings.len() <= MAX_BINDINGS);
        assert_eq!(statement.bindings.len(), 4 * indexes.len());
        assert!(statement
            .sql
            .contains(&format!("({}, ?, ?, ?, ?)) AS r", FIRST_KEYS_BATCH - 1)));
        // Row i binds range indexes[i]'s id span and key bounds.
        let bound = |statement: &Statement, i: usize| -> (i64, i64, String, String) {
            match statement.bindings[4 * i..4 * i + 4] {
                [Binding::Int(low), Binding::Int(high), Binding::Text(lower), Binding::Text(upper)] => {
                    (low, high, lower.to_string(), upper.to_string())
                }
                ref other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            bound(statement, 0),
            (
                7,
                (1 << SEG_FIRST_BITS) - 1,
                segment_key_of(7),
                "s/00000000000000000".to_string()
            )
        );
        assert_eq!(
            bound(statement, 1),
            (1, 0, "fk/".to_string(), "fk0".to_string())
        );
        assert_eq!(
            bound(statement, 2),
            (
                1 << SEG_FIRST_BITS | 7,
                (2 << SEG_FIRST_BITS) - 1,
                segment_key_of(1 << SEG_FIRST_BITS | 7),
                "s/00000000000000010".to_string()
            )
        );
        // The second batch: the rest, numbered from 0 again.
        let (indexes, last) = &plan.batches[1];
        assert_eq!(indexes.len(), ranges.len() - 2 - FIRST_KEYS_BATCH);
        assert!(last
            .sql
            .contains("FROM (VALUES (0, ?, ?, ?, ?), (1, ?, ?, ?, ?), (2, ?, ?, ?, ?)) AS r"));
        // Full batches are one statement text.
        let more: Vec<KeyRange> = (0..2 * FIRST_KEYS_BATCH as u64)
            .map(|pid| range(&format!("s/{pid:016x}/"), ""))
            .collect();
        let more_uppers: Vec<Option<String>> = more.iter().map(|r| prefix_end(&r.prefix)).collect();
        let plan = first_keys_plan(&more, &more_uppers);
        assert_eq!(plan.batches.len(), 2);
        assert_eq!(plan.batches[0].1.sql, plan.batches[1].1.sql);
    }

    #[test]
    fn merged_records_are_in_key_order() {
        let r = |k: &str| (k.to_string(), k.as_bytes().to_vec());
        let merged = merge_records(
            vec![r("s/"), r("s/1x"), r("s/3")],
            vec![r("s/0"), r("s/1"), r("s/2"), r("s/4")],
        );
        let keys: Vec<&str> = merged.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["s/", "s/0", "s/1", "s/1x", "s/2", "s/3", "s/4"]);
        assert_eq!(merge_records(Vec::new(), vec![r("a")]), vec![r("a")]);
    }

    #[test]
    fn a_push_with_a_segment_is_one_upsert_the_segment_row_routed() {
        let mut changes = ChangeSet::default();
        let seg = "s/0000000000000002/0000000000000064".to_string();
        changes.put(seg.clone(), vec![1; 1000]);
        changes.put("x/0000000000000002/0000000000000064", vec![2; 30]);
        changes.put("p/0000000000000002", vec![3; 20]);
        let statements = plan(&changes, false);
        assert_eq!(statements.len(), 1);
        assert_eq!(
            statements[0].sql,
            format!("{UPSERT_HEAD}(?, 0, ?), (?, ?, ?), (?, 0, ?){UPSERT_TAIL}")
        );
        assert!(
            matches!(statements[0].bindings[3], Binding::Int(n) if n == -1 - ((2 << 32) + 100))
        );
        // A segment key's value of CHUNK_BYTES or more stays in `queen_kv`, its `queen_seg` row deleted.
        let mut big = ChangeSet::default();
        big.put(seg.clone(), vec![4; CHUNK_BYTES + 1]);
        let statements = plan(&big, false);
        let sqls: Vec<&str> = statements.iter().map(|s| s.sql.as_str()).collect();
        assert_eq!(sqls[..2], [format!("{TRIM_HEAD}2").as_str(), SEG_EVICT]);
        assert!(sqls[2..].iter().all(|s| s.starts_with(UPSERT_HEAD)));
        // A delete of a segment key deletes it from both tables, `queen_seg` first.
        let mut delete = ChangeSet::default();
        delete.delete(seg);
        delete.delete("x/0000000000000002/0000000000000064");
        let statements = plan(&delete, false);
        assert_eq!(statements.len(), 2);
        assert_eq!(
            statements[0].sql,
            format!("{SEG_DELETE_HEAD}?{DELETE_TAIL}")
        );
        assert_eq!(statements[1].sql, format!("{DELETE_HEAD}?, ?{DELETE_TAIL}"));
    }

    #[test]
    fn chunks_of_empty_value_is_one_empty_chunk() {
        assert_eq!(chunks(&[]).len(), 1);
        assert_eq!(chunks(&vec![0; CHUNK_BYTES]).len(), 1);
        assert_eq!(chunks(&vec![0; CHUNK_BYTES + 1]).len(), 2);
    }

    #[test]
    fn plan_respects_binding_and_byte_limits() {
        let mut changes = ChangeSet::default();
        for i in 0..500 {
            changes.put(format!("k/{i:04}"), vec![1; 10]);
            changes.delete(format!("d/{i:04}"));
        }
        changes.put("big", vec![7; 3 * CHUNK_BYTES + 1]);
        let statements = plan(&changes, false);
        assert!(statements.iter().all(|s| s.bindings.len() <= MAX_BINDINGS));
        let deletes: Vec<&Statement> = statements
            .iter()
            .filter(|s| s.sql.starts_with(DELETE_HEAD))
            .collect();
        let puts: Vec<&Statement> = statements
            .iter()
            .filter(|s| s.sql.starts_with(UPSERT_HEAD))
            .collect();
        assert_eq!(deletes.len() + 1 + puts.len(), statements.len());
        assert!(deletes.iter().all(|s| s.sql.ends_with(DELETE_TAIL)));
        assert!(puts
            .iter()
            .all(|s| s.sql.starts_with(UPSERT_HEAD) && s.sql.ends_with(UPSERT_TAIL)));
        // Deletes first, then puts.
        assert!(statements[..deletes.len()]
            .iter()
            .all(|s| s.sql.starts_with(DELETE_HEAD)));
        let bound = |list: &[&Statement]| -> usize { list.iter().map(|s| s.bindings.len()).sum() };
        assert_eq!(bound(&deletes), 500, "every delete");
        assert_eq!(
            bound(&puts),
            2 * (500 + 4),
            "every put, the big one in four chunks"
        );
        // A chunk over the byte budget goes alone, and the chunks of a value stay in order.
        let big: Vec<&&Statement> = puts
            .iter()
            .filter(|s| {
                s.bindings
                    .iter()
                    .any(|b| matches!(b, Binding::Blob(v) if v.len() == CHUNK_BYTES))
            })
            .collect();
        assert_eq!(big.len(), 3);
        assert!(big.iter().all(|s| s.bindings.len() == 2));
        // The big value's old chunks past its four are trimmed, before any upsert.
        let trims: Vec<usize> = (0..statements.len())
            .filter(|&i| statements[i].sql.starts_with(TRIM_HEAD))
            .collect();
        assert_eq!(trims.len(), 1);
        assert_eq!(statements[trims[0]].sql, format!("{TRIM_HEAD}4"));
        assert_eq!(trims[0], deletes.len());
        for (i, s) in big.iter().enumerate() {
            assert!(s.sql.starts_with(&format!("{UPSERT_HEAD}(?, {i}, ?)")));
        }
    }

    #[test]
    fn a_put_only_commit_is_one_upsert_and_the_fail_row_joins_it() {
        let mut changes = ChangeSet::default();
        changes.put("s/1", vec![1; 100]);
        changes.put("x/1", vec![2; 10]);
        let statements = plan(&changes, false);
        assert_eq!(statements.len(), 1);
        assert_eq!(
            statements[0].sql,
            format!("{UPSERT_HEAD}(?, 0, ?), (?, 0, ?){UPSERT_TAIL}")
        );
        let failing = plan(&changes, true);
        assert_eq!(failing.len(), 1);
        assert_eq!(
            failing[0].sql,
            format!("{UPSERT_HEAD}(?, 0, ?), (?, 0, ?), (?, 0, NULL){UPSERT_TAIL}")
        );
    }

    #[test]
    fn deletes_and_puts_are_two_statements_deletes_first() {
        let mut changes = ChangeSet::default();
        changes.put("s/1", vec![1; 100]);
        changes.delete("l/1");
        changes.delete("l/2");
        let statements = plan(&changes, false);
        assert_eq!(statements.len(), 2);
        assert_eq!(statements[0].sql, format!("{DELETE_HEAD}?, ?{DELETE_TAIL}"));
        assert_eq!(
            statements[1].sql,
            format!("{UPSERT_HEAD}(?, 0, ?){UPSERT_TAIL}")
        );
        // A delete-only commit that fails: the failing row is a statement of its own after the deletes, so the
        // commit runs in a transaction.
        let mut only_deletes = ChangeSet::default();
        only_deletes.delete("l/1");
        assert_eq!(plan(&only_deletes, false).len(), 1);
        assert_eq!(plan(&only_deletes, true).len(), 2);
    }
}
