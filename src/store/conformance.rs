//! The storage conformance suite: one set of checks that every [`Store`] must pass.
//!
//! It runs natively on [`super::MemStore`] (`tests/store_conformance.rs`), on `IdbStore` in headless
//! Chromium and on `DoStore` inside workerd. Each host supplies `open`, which opens the store over the
//! *same* underlying storage every time it is called; the suite calls it again to check that committed
//! data survives a reopen. The suite first deletes every record it finds, so point it at scratch storage.

use super::{ChangeSet, KeyRange, Store};
use std::future::Future;

/// A failed check: which one and what was seen.
pub type CheckResult = Result<(), String>;

fn ensure(cond: bool, what: impl FnOnce() -> String) -> CheckResult {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

async fn clear<S: Store>(store: &S) -> CheckResult {
    let all = store
        .scan("")
        .await
        .map_err(|e| format!("scan failed: {e}"))?;
    let mut changes = ChangeSet::default();
    for (key, _) in all {
        changes.delete(key);
    }
    if !changes.is_empty() {
        store
            .commit(&changes)
            .await
            .map_err(|e| format!("clear commit failed: {e}"))?;
    }
    Ok(())
}

async fn scan_keys<S: Store>(store: &S, prefix: &str) -> Result<Vec<String>, String> {
    Ok(store
        .scan(prefix)
        .await
        .map_err(|e| format!("scan({prefix:?}) failed: {e}"))?
        .into_iter()
        .map(|(k, _)| k)
        .collect())
}

/// A deterministic pseudo-random byte pattern, so large values are not trivially compressible.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Checks `first_keys` over ranges built from the stored keys (each key, just after it, its prefixes)
/// against the first key a scan gives in each.
async fn check_first_keys<S: Store>(store: &S, when: &str) -> CheckResult {
    let stored = scan_keys(store, "").await?;
    let prefixes = [
        "",
        "s/",
        "s/0000000000000005/",
        "s/0000000000000006/",
        "s/0000000000000007/",
        "fk/",
        "fk/z",
        "t",
    ];
    let mut froms: Vec<String> = vec![String::new(), "fk/{".into(), "r".into(), "zz".into()];
    for key in stored
        .iter()
        .filter(|k| k.starts_with("s/000000000000000") || k.starts_with("fk/"))
    {
        froms.push(key.clone());
        froms.push(format!("{key}\u{0}"));
    }
    let ranges: Vec<KeyRange> = prefixes
        .iter()
        .flat_map(|prefix| {
            froms.iter().map(move |from| KeyRange {
                prefix: prefix.to_string(),
                from: from.clone(),
            })
        })
        .collect();
    let got = store
        .first_keys(&ranges)
        .await
        .map_err(|e| format!("first_keys failed {when}: {e}"))?;
    ensure(got.len() == ranges.len(), || {
        format!(
            "first_keys {when}: {} answers to {} ranges",
            got.len(),
            ranges.len()
        )
    })?;
    for (range, got) in ranges.iter().zip(got) {
        let want = stored
            .iter()
            .find(|k| k.starts_with(&range.prefix) && **k >= range.from)
            .cloned();
        ensure(got == want, || {
            format!("first_keys {when} of {range:?}: got {got:?}, want {want:?}")
        })?;
    }
    Ok(())
}

/// Runs every check in order and returns the names of the checks that passed, or the first failure.
pub async fn run_all<S, F, Fut>(open: F) -> Result<Vec<&'static str>, String>
where
    S: Store,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    run_checks(open, true).await
}

/// Every check but `survives_reopen`, on `store`: for a store with nothing underneath to reopen (an
/// in-memory store, whose "reopen" would hand back the very same data and could not fail).
pub async fn run_all_but_reopen<S: Store>(store: S) -> Result<Vec<&'static str>, String> {
    let store = std::cell::RefCell::new(Some(store));
    run_checks(
        || {
            let store = store.borrow_mut().take().expect("opened once");
            async move { store }
        },
        false,
    )
    .await
}

async fn run_checks<S, F, Fut>(open: F, reopen: bool) -> Result<Vec<&'static str>, String>
where
    S: Store,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    let mut passed = Vec::new();
    let store = open().await;
    clear(&store).await?;

    // 1. An empty store scans to nothing.
    ensure(scan_keys(&store, "").await?.is_empty(), || {
        "store not empty after clear".into()
    })?;
    passed.push("empty_scan");

    // 2. Keys come back in byte order, and a prefix scan stops at the prefix boundary.
    let mut changes = ChangeSet::default();
    for key in [
        "p/0000000000000010",
        "p/0000000000000002",
        "p/00000000000000ff",
        "p0",
        "o/x",
        "p/",
    ] {
        changes.put(key, key.as_bytes().to_vec());
    }
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("commit failed: {e}"))?;
    let keys = scan_keys(&store, "p/").await?;
    let want = [
        "p/",
        "p/0000000000000002",
        "p/0000000000000010",
        "p/00000000000000ff",
    ];
    ensure(keys == want, || {
        format!("prefix scan p/: got {keys:?}, want {want:?}")
    })?;
    let all = scan_keys(&store, "").await?;
    ensure(all.len() == 6 && all[0] == "o/x" && all[5] == "p0", || {
        format!("full scan order: {all:?}")
    })?;
    passed.push("ordered_prefix_scan");

    // 3. One commit mixing puts and deletes applies both.
    let mut changes = ChangeSet::default();
    changes.delete("p0");
    changes.delete("o/x");
    changes.put("q/1", vec![1, 2, 3]);
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("commit failed: {e}"))?;
    let all = scan_keys(&store, "").await?;
    ensure(
        !all.contains(&"p0".to_string()) && all.contains(&"q/1".to_string()),
        || format!("mixed commit: {all:?}"),
    )?;
    passed.push("mixed_commit");

    // 4. Overwrite replaces the value; binary and empty values round-trip.
    let binary: Vec<u8> = (0..=255u8).collect();
    let mut changes = ChangeSet::default();
    changes.put("q/1", binary.clone());
    changes.put("q/empty", Vec::new());
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("commit failed: {e}"))?;
    let got = store.scan("q/").await.map_err(|e| e.to_string())?;
    ensure(
        got.len() == 2 && got[0].1 == binary && got[1].1.is_empty(),
        || format!("binary/empty round-trip failed: {} records", got.len()),
    )?;
    passed.push("binary_and_empty_values");

    // 5. Values above the Durable Object 2 MB row limit round-trip (stores split them).
    let big = pattern(5 * 1024 * 1024 + 17, 7);
    let mut changes = ChangeSet::default();
    changes.put("big/1", big.clone());
    changes.put("big/2", pattern(1000, 8));
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("big commit failed: {e}"))?;
    let got = store.scan("big/").await.map_err(|e| e.to_string())?;
    ensure(got.len() == 2 && got[0].1 == big, || {
        "5 MiB value did not round-trip".into()
    })?;
    // Shrinking a split value must not leave stale chunks behind.
    let mut changes = ChangeSet::default();
    changes.put("big/1", vec![9; 10]);
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("shrink commit failed: {e}"))?;
    let got = store.scan("big/").await.map_err(|e| e.to_string())?;
    ensure(got.len() == 2 && got[0].1 == vec![9; 10], || {
        "shrunk value wrong".into()
    })?;
    passed.push("large_values");

    // 6. Many records in one commit.
    let mut changes = ChangeSet::default();
    for i in 0..2000u32 {
        changes.put(format!("many/{i:08x}"), i.to_be_bytes().to_vec());
    }
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("many commit failed: {e}"))?;
    let got = store.scan("many/").await.map_err(|e| e.to_string())?;
    ensure(got.len() == 2000, || {
        format!("expected 2000 records, got {}", got.len())
    })?;
    ensure(
        got.iter()
            .enumerate()
            .all(|(i, (_, v))| v == &(i as u32).to_be_bytes().to_vec()),
        || "many records out of order or corrupted".into(),
    )?;
    passed.push("many_records");

    // 7. Deleting a key that does not exist is not an error.
    let mut changes = ChangeSet::default();
    changes.delete("never/was");
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("delete-missing failed: {e}"))?;
    passed.push("delete_missing");

    // 7b. `get` reads the given keys, index-aligned, `None` for keys not stored, big values whole.
    let mut changes = ChangeSet::default();
    changes.put("get/a", b"alpha".to_vec());
    changes.put("get/b", pattern(3 * 1024 * 1024 + 7, 11));
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("get setup commit failed: {e}"))?;
    let keys: Vec<String> = ["get/b", "get/missing", "get/a", "get/a"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    let got = store
        .get(&keys)
        .await
        .map_err(|e| format!("get failed: {e}"))?;
    ensure(
        got == vec![
            Some(pattern(3 * 1024 * 1024 + 7, 11)),
            None,
            Some(b"alpha".to_vec()),
            Some(b"alpha".to_vec()),
        ],
        || format!("get returned {} values, not the stored ones", got.len()),
    )?;
    ensure(
        store.get(&[]).await.map_err(|e| e.to_string())?.is_empty(),
        || "get of no keys returned values".into(),
    )?;
    passed.push("get_keys");

    // 7c. Keys shaped like segment keys (`s/` + 16 hex digits + `/` + 16 hex digits: a store may keep them
    // apart, as DoStore does when both numbers are small enough) sort, scan, read, move and delete like any
    // other: beside keys of the same prefix that do not have that shape (numbers too big, upper-case hex, one
    // digit short or one character more), in one key order; a value that grows past and shrinks below
    // 1 MiB under such a key; a delete of either kind.
    let seg = |pid: u64, first: u64| format!("s/{pid:016x}/{first:016x}");
    let shaped = [
        seg(0, 0),
        seg(1, 5),
        seg(1, 0x1_0000_0000),
        seg(2, 0),
        seg(0x1f_ffff, 0xffff_ffff),
        seg(0x20_0000, 0),
        seg(u64::MAX, u64::MAX),
        "s/0000000000000001/000000000000000".to_string(),
        "s/0000000000000001/0000000000000005x".to_string(),
        "s/0000000000000001/000000000000000A".to_string(),
        "s/000000000000000A/0000000000000000".to_string(),
        "s/".to_string(),
        "r/z".to_string(),
        "s0".to_string(),
    ];
    let mut changes = ChangeSet::default();
    for (i, key) in shaped.iter().enumerate() {
        changes.put(key.clone(), pattern(100 + i, 40 + i as u64));
    }
    let big_key = seg(3, 7);
    let big = pattern(1024 * 1024 + 5, 12);
    changes.put(big_key.clone(), big.clone());
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("segment-shaped commit failed: {e}"))?;
    let mut want: Vec<String> = shaped.to_vec();
    want.push(big_key.clone());
    want.sort();
    let all = scan_keys(&store, "").await?;
    let ours: Vec<&String> = all.iter().filter(|k| want.contains(k)).collect();
    ensure(
        all.windows(2).all(|w| w[0] < w[1]) && ours.len() == want.len(),
        || format!("segment-shaped keys out of order or missing: {ours:?}"),
    )?;
    for prefix in [
        "s/",
        "s/0000000000000001/",
        "s/0000000000000001/0000000",
        "s",
    ] {
        let got = scan_keys(&store, prefix).await?;
        let expect: Vec<String> = want
            .iter()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        ensure(got == expect, || {
            format!("scan({prefix:?}) of segment-shaped keys: got {got:?}, want {expect:?}")
        })?;
    }
    let asked: Vec<String> = vec![
        seg(1, 5),
        big_key.clone(),
        seg(1, 6),
        "s/0000000000000001/000000000000000A".to_string(),
        seg(0x20_0000, 0),
        seg(1, 5),
    ];
    let got = store.get(&asked).await.map_err(|e| e.to_string())?;
    ensure(
        got == vec![
            Some(pattern(101, 41)),
            Some(big.clone()),
            None,
            Some(pattern(109, 49)),
            Some(pattern(105, 45)),
            Some(pattern(101, 41)),
        ],
        || "get of segment-shaped keys returned other values".into(),
    )?;
    // The big value shrinks under 1 MiB, a small one grows past it, one of each kind is deleted.
    let mut changes = ChangeSet::default();
    changes.put(big_key.clone(), b"small now".to_vec());
    changes.put(seg(1, 5), big.clone());
    changes.delete(seg(2, 0));
    changes.delete(seg(0x20_0000, 0));
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("segment-shaped move commit failed: {e}"))?;
    let got = store
        .get(&[big_key.clone(), seg(1, 5), seg(2, 0), seg(0x20_0000, 0)])
        .await
        .map_err(|e| e.to_string())?;
    ensure(
        got == vec![Some(b"small now".to_vec()), Some(big.clone()), None, None],
        || "segment-shaped values that moved past 1 MiB or were deleted read back wrong".into(),
    )?;
    // And back: the grown one shrinks, the shrunk one grows, each again in a commit of its own.
    let mut changes = ChangeSet::default();
    changes.put(seg(1, 5), b"back".to_vec());
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("segment-shaped shrink failed: {e}"))?;
    let mut changes = ChangeSet::default();
    changes.put(big_key.clone(), big.clone());
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("segment-shaped grow failed: {e}"))?;
    let got = store.scan("s/").await.map_err(|e| e.to_string())?;
    let mut expect: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, key) in shaped.iter().enumerate() {
        if key.starts_with("s/") && *key != seg(2, 0) && *key != seg(0x20_0000, 0) {
            let value = if *key == seg(1, 5) {
                b"back".to_vec()
            } else {
                pattern(100 + i, 40 + i as u64)
            };
            expect.push((key.clone(), value));
        }
    }
    expect.push((big_key.clone(), big));
    expect.sort();
    ensure(got == expect, || {
        let keys: Vec<(&String, usize)> = got.iter().map(|(k, v)| (k, v.len())).collect();
        format!("segment-shaped keys after moves: {keys:?}")
    })?;
    passed.push("segment_shaped_keys");

    // 7d. `first_keys` gives each range's first stored key in byte order, or `None`: for segment-shaped
    // keys whose values a store may keep apart by size (DoStore: under 1 MiB in `queen_seg`, from 1 MiB on
    // in `queen_kv`), for keys whose byte order is not IndexedDB's UTF-16 order (U+E000 sorts before
    // U+10000 in bytes, after it in UTF-16), for a `from` before the prefix, at a stored key, between keys
    // and after them, for more ranges than one SQL statement binds; and again after deletes.
    let mut changes = ChangeSet::default();
    let small = [
        seg(5, 3),
        seg(6, 0),
        "fk/z".to_string(),
        "fk/\u{E000}".to_string(),
    ];
    let large = [seg(5, 1), seg(5, 9), "fk/\u{10000}".to_string()];
    for key in &small {
        changes.put(key.clone(), b"small".to_vec());
    }
    for key in &large {
        changes.put(key.clone(), pattern(1024 * 1024 + 3, 13));
    }
    changes.put(
        "s/0000000000000005/000000000000000A",
        b"not shaped".to_vec(),
    );
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("first_keys setup commit failed: {e}"))?;
    check_first_keys(&store, "after puts").await?;
    let mut changes = ChangeSet::default();
    changes.delete(seg(5, 3));
    changes.delete(seg(5, 1));
    changes.delete("fk/\u{E000}");
    store
        .commit(&changes)
        .await
        .map_err(|e| format!("first_keys delete commit failed: {e}"))?;
    check_first_keys(&store, "after deletes").await?;
    ensure(
        store
            .first_keys(&[])
            .await
            .map_err(|e| e.to_string())?
            .is_empty(),
        || "first_keys of no ranges returned keys".into(),
    )?;
    passed.push("first_keys");

    // 8. Everything survives a reopen.
    let store = if reopen {
        let before = store.scan("").await.map_err(|e| e.to_string())?;
        drop(store);
        let store = open().await;
        let after = store.scan("").await.map_err(|e| e.to_string())?;
        ensure(before == after, || {
            format!(
                "reopen changed data: {} vs {} records",
                before.len(),
                after.len()
            )
        })?;
        passed.push("survives_reopen");
        store
    } else {
        store
    };

    clear(&store).await?;
    ensure(scan_keys(&store, "").await?.is_empty(), || {
        "final clear left records".into()
    })?;
    passed.push("clear");
    Ok(passed)
}
