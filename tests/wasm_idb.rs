//! `IdbStore` in headless Chromium: the storage conformance suite, format-version refusal, durability
//! options, large values and key order. Run with `wasm-pack test --headless --chrome` (scripts/test.d/
//! 40-browser.sh).
#![cfg(target_arch = "wasm32")]

mod idb_common;

use idb_common::{raw, unique_name};
use js_sys::Uint8Array;
use queen_edge::store::idb::{self, FORMAT_KEY, FORMAT_VERSION, META_STORE, SCHEMA_VERSION};
use queen_edge::store::{
    conformance, ChangeSet, Durability, IdbOptions, IdbStore, Store, StoreErrorKind,
};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::{IdbDatabase, IdbTransactionMode};

wasm_bindgen_test_configure!(run_in_browser);

async fn open(name: &str, durability: Durability) -> IdbStore {
    IdbStore::open(name, IdbOptions { durability })
        .await
        .unwrap_or_else(|e| panic!("open {name}: {e}"))
}

async fn conformance_with(durability: Durability) {
    let name = unique_name(&format!("conformance-{durability:?}"));
    let passed = conformance::run_all(|| open(&name, durability))
        .await
        .unwrap_or_else(|e| panic!("IdbStore ({durability:?}) failed conformance: {e}"));
    assert_eq!(passed.len(), 12, "every check ran: {passed:?}");
    IdbStore::delete_database(&name)
        .await
        .expect("delete test database");
}

#[wasm_bindgen_test]
async fn idb_store_passes_conformance_strict() {
    conformance_with(Durability::Strict).await;
}

#[wasm_bindgen_test]
async fn idb_store_passes_conformance_relaxed() {
    conformance_with(Durability::Relaxed).await;
}

#[wasm_bindgen_test]
async fn relaxed_commit_is_visible_after_reopen() {
    let name = unique_name("relaxed");
    let store = open(&name, Durability::Relaxed).await;
    let mut changes = ChangeSet::default();
    changes.put("k/1", b"one".to_vec());
    store.commit(&changes).await.expect("relaxed commit");
    drop(store);
    let store = open(&name, Durability::BrowserDefault).await;
    let got = store.scan("k/").await.expect("scan");
    assert_eq!(got, vec![("k/1".to_string(), b"one".to_vec())]);
    drop(store);
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn newer_format_version_is_refused() {
    let name = unique_name("newer-format");
    drop(open(&name, Durability::Strict).await);

    // Play a newer build: bump meta/format behind the store's back.
    let request = raw::factory()
        .open_with_u32(&name, SCHEMA_VERSION)
        .expect("raw open");
    let db: IdbDatabase = raw::wait(&request).await.dyn_into().expect("a database");
    let tx = db
        .transaction_with_str_and_mode(META_STORE, IdbTransactionMode::Readwrite)
        .expect("raw transaction");
    tx.object_store(META_STORE)
        .expect("meta store")
        .put_with_key(
            &JsValue::from(FORMAT_VERSION + 1),
            &JsValue::from_str(FORMAT_KEY),
        )
        .expect("raw put");
    raw::outcome(&tx).await.expect("raw transaction completes");
    db.close();

    let err = IdbStore::open(&name, IdbOptions::default())
        .await
        .expect_err("a newer format must be refused");
    assert_eq!(err.kind, StoreErrorKind::NewerFormat, "{err}");
    assert!(err.message.contains("newer"), "clear message: {err}");
    IdbStore::delete_database(&name).await.expect("delete");
}

/// The IndexedDB version is the writer epoch: a database further on than [`SCHEMA_VERSION`] (claimed
/// several times) opens at its own version, and the next claim is one more.
#[wasm_bindgen_test]
async fn a_database_past_the_first_epoch_opens_at_its_version() {
    let name = unique_name("later-epoch");
    let store = open(&name, Durability::Strict).await;
    assert_eq!(store.epoch(), SCHEMA_VERSION);
    let mut changes = ChangeSet::default();
    changes.put("k", b"v".to_vec());
    store.commit(&changes).await.expect("commit");
    drop(store);

    // Claims by other connections moved it on (an upgrade that changes nothing, as a claim's does).
    let request = raw::factory()
        .open_with_u32(&name, SCHEMA_VERSION + 6)
        .expect("raw open");
    let db: IdbDatabase = raw::wait(&request).await.dyn_into().expect("a database");
    db.close();

    let store = open(&name, Durability::Strict).await;
    assert_eq!(store.epoch(), SCHEMA_VERSION + 6);
    assert_eq!(
        store.scan("").await.expect("scan"),
        vec![("k".to_string(), b"v".to_vec())]
    );
    assert_eq!(store.take_over().await.expect("claim"), SCHEMA_VERSION + 7);
    drop(store);
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn foreign_database_is_rejected() {
    let name = unique_name("foreign");
    // Someone else's database at our schema version, without our object stores.
    let request = raw::factory()
        .open_with_u32(&name, SCHEMA_VERSION)
        .expect("raw open");
    let db: IdbDatabase = raw::wait(&request).await.dyn_into().expect("a database");
    db.close();
    let err = IdbStore::open(&name, IdbOptions::default())
        .await
        .expect_err("a foreign database must be rejected");
    assert_eq!(err.kind, StoreErrorKind::Other, "{err}");
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn sixteen_mib_value_round_trips() {
    let name = unique_name("big");
    let store = open(&name, Durability::Strict).await;
    let big: Vec<u8> = (0..16 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut changes = ChangeSet::default();
    changes.put("big", big.clone());
    store.commit(&changes).await.expect("16 MiB commit");
    drop(store);
    let store = open(&name, Durability::Strict).await;
    let got = store.scan("big").await.expect("scan");
    assert_eq!(got.len(), 1);
    assert!(got[0].1 == big, "16 MiB value did not round-trip");
    drop(store);
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn non_ascii_keys_scan_in_byte_order_and_prefixes_are_exact() {
    let name = unique_name("keys");
    let store = open(&name, Durability::Strict).await;
    // UTF-16 order puts U+1F600 (surrogates D83D..) before U+FFFD; UTF-8 byte order puts it after.
    let keys = [
        "a",
        "a\u{FFFD}",
        "a\u{1F600}",
        "a\u{FFFF}",
        "a\u{FFFF}x",
        "b",
        "\u{FFFF}",
    ];
    let mut changes = ChangeSet::default();
    for key in keys {
        changes.put(key, key.as_bytes().to_vec());
    }
    store.commit(&changes).await.expect("commit");
    let scan_keys = |prefix: &'static str| {
        let store = &store;
        async move {
            store
                .scan(prefix)
                .await
                .expect("scan")
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        }
    };
    let mut want: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    want.sort();
    assert_eq!(scan_keys("").await, want);
    assert_eq!(
        scan_keys("a").await,
        ["a", "a\u{FFFD}", "a\u{FFFF}", "a\u{FFFF}x", "a\u{1F600}"]
    );
    assert_eq!(scan_keys("a\u{FFFF}").await, ["a\u{FFFF}", "a\u{FFFF}x"]);
    assert_eq!(scan_keys("a\u{1F600}").await, ["a\u{1F600}"]);
    assert_eq!(scan_keys("\u{FFFF}").await, ["\u{FFFF}"]);
    assert!(scan_keys("c").await.is_empty());
    drop(store);
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn failed_commit_writes_nothing() {
    let name = unique_name("atomic");
    let store = open(&name, Durability::Strict).await;
    let mut base = ChangeSet::default();
    base.put("a/1", vec![1]);
    base.put("a/2", vec![2]);
    store.commit(&base).await.expect("commit");
    // A commit whose last request fails inside the transaction, after its puts and delete were issued: the
    // record is a function, which IndexedDB cannot store (DataCloneError). The whole transaction aborts.
    let mut changes = ChangeSet::default();
    changes.put("a/1", vec![9]);
    changes.put("a/3", vec![3]);
    changes.delete("a/2");
    let unstorable: JsValue = js_sys::Function::new_no_args("").into();
    let err = store
        .commit_recording(&changes, &[("req/1".into(), unstorable)], "req/0")
        .await
        .expect_err("a commit with a request that fails");
    assert!(err.message.contains("DataCloneError"), "{err}");
    // Nothing of it is visible, from this connection or a new one.
    let expected = vec![("a/1".to_string(), vec![1]), ("a/2".to_string(), vec![2])];
    assert_eq!(store.scan("").await.expect("scan"), expected);
    drop(store);
    let store = open(&name, Durability::Strict).await;
    assert_eq!(store.scan("").await.expect("scan"), expected);
    assert!(store.read_meta("req/1").await.expect("read").is_undefined());
    drop(store);
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn commit_on_a_closed_connection_is_unavailable() {
    let name = unique_name("closed");
    let store = open(&name, Durability::Strict).await;
    // Deleting the database closes our connection (its versionchange handler).
    IdbStore::delete_database(&name).await.expect("delete");
    let mut changes = ChangeSet::default();
    changes.put("a/2", vec![2]);
    let err = store
        .commit(&changes)
        .await
        .expect_err("commit on a closed connection");
    assert_eq!(err.kind, StoreErrorKind::Unavailable, "{err}");
}

#[wasm_bindgen_test]
async fn stale_writer_commit_fails_and_writes_nothing() {
    let name = unique_name("fence");
    let old = open(&name, Durability::Strict).await;
    let first = old.take_over().await.expect("take over");
    let mut changes = ChangeSet::default();
    changes.put("m/1", b"old".to_vec());
    changes.put("m/2", b"two".to_vec());
    old.commit(&changes)
        .await
        .expect("the current writer commits");

    // A second connection takes over: the first one is now stale.
    let new = open(&name, Durability::Strict).await;
    assert_eq!(new.epoch(), first, "a plain open reads the current epoch");
    let second = new.take_over().await.expect("second take over");
    assert!(second > first, "epochs increase: {first} then {second}");

    let mut stale = ChangeSet::default();
    stale.put("m/1", b"overwritten".to_vec());
    stale.put("m/3", b"new".to_vec());
    stale.delete("m/2");
    let err = old
        .commit(&stale)
        .await
        .expect_err("a commit at a stale epoch is refused");
    assert_eq!(err.kind, StoreErrorKind::Unavailable, "{err}");
    assert!(err.message.contains("took over"), "{err}");
    assert!(old.is_superseded(), "the stale connection knows it");
    assert!(!new.is_superseded());
    let mut again = ChangeSet::default();
    again.put("m/4", b"later".to_vec());
    old.commit(&again)
        .await
        .expect_err("every later commit of the stale connection is refused");

    // Nothing of the refused change sets is visible, from either connection or a fresh one.
    let expected = vec![
        ("m/1".to_string(), b"old".to_vec()),
        ("m/2".to_string(), b"two".to_vec()),
    ];
    assert_eq!(new.scan("").await.expect("scan"), expected);
    let err = old
        .scan("")
        .await
        .expect_err("a stale connection is closed: it does not read either");
    assert_eq!(err.kind, StoreErrorKind::Unavailable, "{err}");
    assert!(err.message.contains("took over"), "{err}");
    assert!(
        !err.message.contains("commit"),
        "a refused read names no commit: {err}"
    );
    drop(old);
    let fresh = open(&name, Durability::Strict).await;
    assert_eq!(fresh.scan("").await.expect("scan"), expected);

    // The current writer still commits, and a connection that never took over writes at the epoch it
    // opened at until someone takes over after it.
    let mut ok = ChangeSet::default();
    ok.put("m/5", b"five".to_vec());
    new.commit(&ok).await.expect("the current writer commits");
    fresh
        .commit(&ok)
        .await
        .expect("same epoch, no take-over since");
    new.take_over().await.expect("take over again");
    fresh
        .commit(&ok)
        .await
        .expect_err("stale after the later take-over");
    drop((new, fresh));
    IdbStore::delete_database(&name).await.expect("delete");
}

/// Commits of the writer in flight when another connection claims: one issued before the claim's open
/// request, and one issued right after it in the same task (before the `versionchange` event reaches
/// the writer). Both land (acknowledged writes are never lost), each with its own outcome, before the
/// claim's upgrade runs; a commit issued after the `versionchange` is refused and writes nothing.
#[wasm_bindgen_test]
async fn commits_in_flight_at_a_claim_land_and_later_ones_are_fenced() {
    use futures::FutureExt;
    let name = unique_name("in-flight");
    let store = open(&name, Durability::Strict).await;
    let epoch = store.take_over().await.expect("take over");

    let mut first = ChangeSet::default();
    first.put("f/1", b"first".to_vec());
    let mut second = ChangeSet::default();
    second.put("f/2", b"second".to_vec());
    let mut third = ChangeSet::default();
    third.put("f/3", b"third".to_vec());
    // Polled once, a commit has issued its transaction and waits for its end.
    let mut landing = Box::pin(store.commit(&first));
    assert!((&mut landing).now_or_never().is_none(), "issued, not ended");
    // Another connection's claim, as `IdbStore::take_over` makes it: an open at the next version.
    let claim = raw::factory()
        .open_with_u32(&name, epoch + 1)
        .expect("raw open");
    let mut also_landing = Box::pin(store.commit(&second));
    assert!(
        (&mut also_landing).now_or_never().is_none(),
        "issued, not ended"
    );

    let (landed, also_landed, claimed) = futures::join!(landing, also_landing, raw::wait(&claim));
    landed.expect("the commit issued before the claim lands");
    also_landed.expect("the commit issued in the claim's task lands");
    let claimed: IdbDatabase = claimed.dyn_into().expect("the claim opens");
    assert_eq!(claimed.version(), f64::from(epoch + 1));
    assert!(store.is_superseded(), "the writer closed for the claim");
    let err = store
        .commit(&third)
        .await
        .expect_err("a commit after the claim is refused");
    assert!(err.message.contains("took over"), "{err}");
    claimed.close();
    drop(store);
    let fresh = open(&name, Durability::Strict).await;
    assert_eq!(
        fresh.scan("f/").await.expect("scan"),
        vec![
            ("f/1".to_string(), b"first".to_vec()),
            ("f/2".to_string(), b"second".to_vec())
        ]
    );
    drop(fresh);
    IdbStore::delete_database(&name).await.expect("delete");
}

/// A database main's schema-version-2 build wrote (its fence: the unique `writer` index, `meta/epoch`,
/// claim markers and a fence record): opening it upgrades it to version 3, keeping every record and the
/// recorded answer and dropping the old fence's bookkeeping; the fence holds from the first take-over.
/// (tests/js/browser.test.mjs does the same with main's built module.)
#[wasm_bindgen_test]
async fn schema_version_2_database_is_upgraded_and_keeps_everything() {
    let name = unique_name("schema-2");
    raw::write_schema_2(&name, 57).await;

    let old = open(&name, Durability::Strict).await;
    assert_eq!(old.epoch(), SCHEMA_VERSION, "the epoch is the version now");
    let records = vec![
        ("m/1".to_string(), b"one".to_vec()),
        ("m/2".to_string(), b"two".to_vec()),
    ];
    assert_eq!(old.scan("").await.expect("scan"), records);
    let answer = old
        .read_meta("req/000000000000005:t:1")
        .await
        .expect("read the answer");
    assert_eq!(
        answer.dyn_into::<Uint8Array>().expect("bytes").to_vec(),
        b"\xc8\x00\x00\x00{}".to_vec(),
        "the recorded answer is kept"
    );
    for key in [idb::EPOCH_KEY, "claim/1", "claim/57", "writer/57"] {
        assert!(
            old.read_meta(key).await.expect("read").is_undefined(),
            "{key} is dropped"
        );
    }
    assert_eq!(
        old.take_over().await.expect("take over"),
        SCHEMA_VERSION + 1
    );
    drop(old);
    let request = raw::factory().open(&name).expect("raw open");
    let db: IdbDatabase = raw::wait(&request).await.dyn_into().expect("a database");
    let tx = db.transaction_with_str(META_STORE).expect("a transaction");
    let meta = tx.object_store(META_STORE).expect("meta");
    let indexes = js_sys::Reflect::get(&meta, &"indexNames".into()).expect("indexNames");
    let count = js_sys::Reflect::get(&indexes, &"length".into()).expect("length");
    assert_eq!(count.as_f64(), Some(0.0), "the writer index is dropped");
    db.close();
    IdbStore::delete_database(&name).await.expect("delete");
}

/// A database a schema-version-1 build wrote (its writer fenced with `claim/<n + 1>` in each commit):
/// opening it upgrades it to version 3, keeps the data, and the writer fence holds from the first
/// take-over.
#[wasm_bindgen_test]
async fn schema_version_1_database_is_upgraded_and_fenced() {
    let name = unique_name("schema-1");
    raw::write_schema_1(&name, 7).await;

    let old = open(&name, Durability::Strict).await;
    assert_eq!(old.epoch(), SCHEMA_VERSION, "the epoch is the version now");
    assert_eq!(
        old.scan("").await.expect("scan"),
        vec![("m/1".to_string(), b"one".to_vec())]
    );
    assert_eq!(old.take_over().await.expect("take over"), 4);
    let mut changes = ChangeSet::default();
    changes.put("m/2", b"two".to_vec());
    old.commit(&changes).await.expect("the writer commits");

    let new = open(&name, Durability::Strict).await;
    assert_eq!(new.take_over().await.expect("take over"), 5);
    let mut stale = ChangeSet::default();
    stale.put("m/3", b"stale".to_vec());
    let err = old
        .commit(&stale)
        .await
        .expect_err("the stale writer is fenced");
    assert_eq!(err.kind, StoreErrorKind::Unavailable, "{err}");
    new.commit(&stale).await.expect("the new writer commits");
    assert_eq!(new.scan("m/").await.expect("scan").len(), 3);
    drop((old, new));
    IdbStore::delete_database(&name).await.expect("delete");
}

/// A writer superseded twice (two take-overs since its epoch) is still fenced: its connection closed at
/// the first and never reopens.
#[wasm_bindgen_test]
async fn a_writer_two_epochs_behind_is_fenced() {
    let name = unique_name("two-behind");
    let old = open(&name, Durability::Strict).await;
    old.take_over().await.expect("take over");
    let mut changes = ChangeSet::default();
    changes.put("k", vec![1]);
    old.commit(&changes).await.expect("the writer commits");
    let middle = open(&name, Durability::Strict).await;
    middle.take_over().await.expect("take over");
    middle
        .commit(&changes)
        .await
        .expect("the second writer commits");
    let new = open(&name, Durability::Strict).await;
    new.take_over().await.expect("take over");
    new.commit(&changes)
        .await
        .expect("the third writer commits");
    let mut stale = ChangeSet::default();
    stale.put("k", vec![9]);
    old.commit(&stale).await.expect_err("two epochs behind");
    middle.commit(&stale).await.expect_err("one epoch behind");
    assert_eq!(
        new.scan("").await.expect("scan"),
        vec![("k".to_string(), vec![1])]
    );
    drop((old, middle, new));
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn concurrent_take_overs_claim_distinct_epochs() {
    let name = unique_name("claims");
    let a = open(&name, Durability::Strict).await;
    let b = open(&name, Durability::Strict).await;
    let (ea, eb) = futures::join!(a.take_over(), b.take_over());
    let (ea, eb) = (ea.expect("a claims"), eb.expect("b claims"));
    assert_ne!(ea, eb, "two claims never share an epoch");
    let (winner, loser) = if ea > eb { (&a, &b) } else { (&b, &a) };
    let mut changes = ChangeSet::default();
    changes.put("k", vec![1]);
    loser
        .commit(&changes)
        .await
        .expect_err("the earlier claim is fenced");
    winner
        .commit(&changes)
        .await
        .expect("the later claim writes");
    drop((a, b));
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn recorded_commit_writes_changes_and_record_together() {
    let name = unique_name("recorded");
    let old = open(&name, Durability::Strict).await;
    old.take_over().await.expect("take over");
    let mut changes = ChangeSet::default();
    changes.put("m/1", b"one".to_vec());
    let answer = JsValue::from_str("answer one");
    let old_key = "req/000000000000001:a:1";
    old.commit_recording(&changes, &[(old_key.into(), answer.clone())], "req/")
        .await
        .expect("recorded commit");
    assert_eq!(old.read_meta(old_key).await.expect("read"), answer);
    // A later record prunes the records below its bound.
    let key = "req/000000000000005:a:2";
    old.commit_recording(
        &ChangeSet::default(),
        &[(key.into(), answer.clone())],
        "req/000000000000002",
    )
    .await
    .expect("a record alone");
    assert!(old.read_meta(old_key).await.expect("read").is_undefined());
    assert_eq!(old.read_meta(key).await.expect("read"), answer);

    // At a stale epoch neither the changes nor the record are written.
    let new = open(&name, Durability::Strict).await;
    new.take_over().await.expect("take over");
    let mut stale = ChangeSet::default();
    stale.put("m/2", b"two".to_vec());
    let stale_key = "req/000000000000006:a:3";
    old.commit_recording(&stale, &[(stale_key.into(), answer.clone())], "req/")
        .await
        .expect_err("stale");
    assert!(new.read_meta(stale_key).await.expect("read").is_undefined());
    assert_eq!(
        new.scan("").await.expect("scan"),
        vec![("m/1".to_string(), b"one".to_vec())]
    );
    drop((old, new));
    IdbStore::delete_database(&name).await.expect("delete");
}

#[wasm_bindgen_test]
async fn persist_answers() {
    // Headless Chromium may say yes or no; it must answer.
    let answer = idb::persist().await;
    assert!(answer.is_ok(), "{answer:?}");
}

#[wasm_bindgen_test]
fn uint8array_from_copies() {
    // The commit path relies on Uint8Array::from copying out of wasm memory.
    let bytes = vec![1u8, 2, 3];
    let array = Uint8Array::from(bytes.as_slice());
    drop(bytes);
    assert_eq!(array.to_vec(), vec![1, 2, 3]);
    assert_eq!(array.buffer().byte_length(), 3);
}

/// A host for an engine in the page: the JS clock, no waiting, fresh entropy.
#[derive(Clone)]
struct PageHost;

impl queen_edge::engine::Host for PageHost {
    fn now_ms(&self) -> i64 {
        js_sys::Date::now() as i64
    }
    fn sleep(&self, _ms: u64) -> futures::future::LocalBoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn entropy(&self) -> u64 {
        (js_sys::Math::random() * 9e15) as u64
    }
}

/// Every message of partition `partition` of queue `q`, in offset order, for a group new to it.
async fn payloads_of(
    engine: &queen_edge::engine::Engine<IdbStore, PageHost>,
    group: &str,
    partition: &str,
) -> Vec<String> {
    use queen_edge::core::api::{PopRequest, PopTarget};
    let reply = engine
        .pop(
            PopRequest {
                group: Some(group.into()),
                batch: Some(1000),
                target: PopTarget::Partition {
                    queue: "q".into(),
                    partition: partition.into(),
                },
                ..PopRequest::queue("q")
            },
            None,
        )
        .await
        .expect("pop");
    reply
        .messages
        .iter()
        .map(|m| m.payload.get().to_string())
        .collect()
}

/// A page closed (engine and database connection dropped, no maintenance) after push commits whose
/// index entries are in no index page yet (module `core::pages`): the next open over IndexedDB finds
/// those segments past the pages and indexes them, so every acknowledged message is there, in order.
#[wasm_bindgen_test]
async fn pushes_whose_index_page_was_not_written_survive_a_reopen() {
    use queen_edge::core::api::{PushItem, PushStatus};
    use queen_edge::core::{BrokerConfig, ENTRIES_PER_PAGE};
    use queen_edge::engine::Engine;
    let name = unique_name("unpaged");
    let config = || BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    };
    // Partition a: one full page and K-1 segments past it; b: K-1 segments and no page.
    let counts = [("a", 2 * ENTRIES_PER_PAGE - 1), ("b", ENTRIES_PER_PAGE - 1)];
    let mut sent: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    {
        let store = open(&name, Durability::Strict).await;
        let engine = Engine::open(store, PageHost, config()).await.expect("open");
        for (i, (partition, count)) in counts.iter().enumerate() {
            for n in 0..*count {
                let item = PushItem {
                    partition: (*partition).into(),
                    ..PushItem::new("q", serde_json::json!(format!("{partition}{n}")))
                };
                let pushed = engine.push(vec![item]).await.expect("push");
                assert_eq!(pushed[0].status, PushStatus::Queued);
                sent[i].push(format!("\"{partition}{n}\""));
            }
        }
        let pages = engine.store().scan("x/").await.expect("scan");
        assert_eq!(pages.len(), 1, "partition a's one full page only");
    }
    let store = open(&name, Durability::Strict).await;
    let engine = Engine::open(store, PageHost, config())
        .await
        .expect("reopen");
    for (i, (partition, _)) in counts.iter().enumerate() {
        assert_eq!(
            payloads_of(&engine, "g", partition).await,
            sent[i],
            "{partition}"
        );
    }
    drop(engine);
    IdbStore::delete_database(&name).await.expect("delete");
}

/// A segment missing in the middle of the run past a partition's page while a later one is stored
/// (storage damage): the open over IndexedDB fails naming the missing key and the stored one after it
/// (through `IdbStore::first_keys`), rather than cut the partition short.
#[wasm_bindgen_test]
async fn a_segment_missing_before_a_stored_one_past_the_page_stops_the_open() {
    use queen_edge::core::api::PushItem;
    use queen_edge::core::{BrokerConfig, ENTRIES_PER_PAGE};
    use queen_edge::engine::Engine;
    let name = unique_name("seg-gap");
    let config = || BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    };
    {
        let store = open(&name, Durability::Strict).await;
        let engine = Engine::open(store, PageHost, config()).await.expect("open");
        for n in 0..ENTRIES_PER_PAGE + 3 {
            let item = PushItem::new("q", serde_json::json!(n));
            engine.push(vec![item]).await.expect("push");
        }
    }
    let store = open(&name, Durability::Strict).await;
    let keys: Vec<String> = store
        .scan("s/")
        .await
        .expect("scan")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys.len(), ENTRIES_PER_PAGE + 3, "one segment a push");
    let (missing, later) = (&keys[ENTRIES_PER_PAGE + 1], &keys[ENTRIES_PER_PAGE + 2]);
    let mut damage = ChangeSet::default();
    damage.delete(missing.clone());
    store.commit(&damage).await.expect("damage");
    let e = match Engine::open(store, PageHost, config()).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an open over a missing segment {missing} before {later} must fail"),
    };
    for part in ["storage is damaged", missing.as_str(), later.as_str()] {
        assert!(e.contains(part), "{part:?} in {e}");
    }
    IdbStore::delete_database(&name).await.expect("delete");
}
