//! Review of the one-request IndexedDB writer fence (schema version 2, `src/store/idb.rs`, *Fencing*;
//! branch `idb-pipe`), in headless Chromium: the upgrade from schema version 1 (with an older build's
//! connection open, and with one that does not close), claims on a fresh database, a writer that claims
//! twice, two claims at once after an upgrade, what the `writer` index holds, and databases that are not
//! queen-edge ones at version 1. Three tests failed on `idb-pipe` when written (the blocked upgrade and
//! the two foreign databases); their doc comments say what `src/store/idb.rs` does about it now.
#![cfg(target_arch = "wasm32")]

mod idb_common;

use futures::future::{select, Either};
use idb_common::{raw, unique_name};
use js_sys::{Array, Function, Promise, Reflect, Uint8Array};
use queen_edge::store::idb::{self, FORMAT_KEY, META_STORE};
use queen_edge::store::{ChangeSet, Durability, IdbOptions, IdbStore, Store, StoreErrorKind};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::{Event, IdbDatabase, IdbRequest, IdbTransaction, IdbTransactionMode};

wasm_bindgen_test_configure!(run_in_browser);

async fn sleep_ms(ms: i32) {
    let promise = Promise::new(&mut |resolve, _| {
        let set_timeout: Function = Reflect::get(&js_sys::global(), &"setTimeout".into())
            .expect("setTimeout")
            .unchecked_into();
        set_timeout
            .call2(&JsValue::NULL, &resolve, &ms.into())
            .expect("setTimeout call");
    });
    JsFuture::from(promise).await.expect("timer");
}

async fn open(name: &str) -> IdbStore {
    IdbStore::open(
        name,
        IdbOptions {
            durability: Durability::Strict,
        },
    )
    .await
    .unwrap_or_else(|e| panic!("open {name}: {e}"))
}

fn put(key: &str, value: &[u8]) -> ChangeSet {
    let mut changes = ChangeSet::default();
    changes.put(key, value.to_vec());
    changes
}

/// A raw connection at schema version 1, as an older build holds it.
async fn open_schema_1(name: &str) -> IdbDatabase {
    let request = raw::factory().open_with_u32(name, 1).expect("raw open");
    raw::wait(&request).await.dyn_into().expect("a database")
}

/// A commit as a schema-version-1 writer at `epoch` issues it: `add` and delete `claim/<epoch + 1>`,
/// then the change. Issued synchronously; the returned transaction is not awaited.
fn issue_schema_1_commit(db: &IdbDatabase, epoch: u32, key: &str) -> IdbTransaction {
    let stores = Array::of2(&"records".into(), &META_STORE.into());
    let tx = db
        .transaction_with_str_sequence_and_mode(&stores, IdbTransactionMode::Readwrite)
        .expect("a v1 transaction");
    let meta = tx.object_store(META_STORE).expect("meta");
    let marker: JsValue = idb::claim_key(epoch + 1).into();
    meta.add_with_key(&JsValue::TRUE, &marker).expect("add");
    meta.delete(&marker).expect("delete");
    tx.object_store("records")
        .expect("records")
        .put_with_key(&Uint8Array::from(&b"v1"[..]), &key.into())
        .expect("put");
    tx
}

/// The database's version as a plain open (no version, so no upgrade) sees it.
async fn raw_version(name: &str) -> f64 {
    let request = raw::factory().open(name).expect("raw open");
    let db: IdbDatabase = raw::wait(&request).await.dyn_into().expect("a database");
    let version = db.version();
    db.close();
    version
}

fn call(target: &JsValue, method: &str, args: &[JsValue]) -> JsValue {
    let function: Function = Reflect::get(target, &method.into())
        .unwrap_or_else(|_| panic!("{method}"))
        .dyn_into()
        .unwrap_or_else(|_| panic!("{method} is a function"));
    let args: Array = args.iter().collect();
    function
        .apply(target, &args)
        .unwrap_or_else(|e| panic!("{method} threw {e:?}"))
}

/// The `writer` index of `meta`: (unique, its primary keys in index order, their `writer` values).
async fn writer_index(name: &str) -> (bool, Vec<String>, Vec<JsValue>) {
    let request = raw::factory().open(name).expect("raw open");
    let db: IdbDatabase = raw::wait(&request).await.dyn_into().expect("a database");
    let tx = db
        .transaction_with_str(META_STORE)
        .expect("a readonly transaction");
    let meta = tx.object_store(META_STORE).expect("meta");
    let index = call(&meta, "index", &[idb::WRITER_INDEX.into()]);
    let unique = Reflect::get(&index, &"unique".into())
        .unwrap()
        .as_bool()
        .unwrap();
    let keys: IdbRequest = call(&index, "getAllKeys", &[]).unchecked_into();
    let values: IdbRequest = call(&index, "getAll", &[]).unchecked_into();
    let keys: Array = raw::wait(&keys).await.unchecked_into();
    let values: Array = raw::wait(&values).await.unchecked_into();
    db.close();
    let keys = keys.iter().map(|k| k.as_string().unwrap()).collect();
    let values = values
        .iter()
        .map(|v| Reflect::get(&v, &"writer".into()).unwrap())
        .collect();
    (unique, keys, values)
}

/// An older build's writer, its connection open and a commit just issued, while this build opens the
/// database: the upgrade waits for that commit (acknowledged to the older build, so it must be kept),
/// closes the older connection, and the fence holds from the first take-over.
#[wasm_bindgen_test]
async fn upgrade_with_an_older_writer_connection_open_keeps_its_commit() {
    let name = unique_name("v1-open");
    raw::write_schema_1(&name, 3).await;
    let v1 = open_schema_1(&name).await;
    // schema version 1's handler: close on versionchange.
    let on_versionchange = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
        let db: IdbDatabase = event.target().unwrap().dyn_into().unwrap();
        db.close();
    });
    v1.set_onversionchange(Some(on_versionchange.as_ref().unchecked_ref()));
    let v1_commit = issue_schema_1_commit(&v1, 3, "m/v1");
    let (v1_outcome, opened) = futures::join!(raw::outcome(&v1_commit), open_result(&name));
    v1_outcome.expect("the older build's commit issued before the upgrade lands");
    let store = opened.expect("this build opens (upgrades) once the older connection closed");
    assert_eq!(store.epoch(), 3);
    let keys: Vec<String> = store
        .scan("m/")
        .await
        .expect("scan")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, vec!["m/1".to_string(), "m/v1".to_string()]);
    assert!(
        v1.transaction_with_str_and_mode("records", IdbTransactionMode::Readwrite)
            .is_err(),
        "the older connection is closed: it can never write again"
    );
    assert_eq!(store.take_over().await.expect("take over"), 4);
    store
        .commit(&put("m/2", b"two"))
        .await
        .expect("this build writes");
    drop((store, on_versionchange));
    IdbStore::delete_database(&name).await.expect("delete");
}

async fn open_result(name: &str) -> Result<IdbStore, queen_edge::store::StoreError> {
    IdbStore::open(name, IdbOptions::default()).await
}

/// A connection at schema version 1 that does not close on `versionchange` (anything but a queen-edge
/// build's own connection: DevTools, page code, a page whose handler cannot run) blocks the upgrade.
/// `IdbStore::open` fails with `Unavailable` on the request's `blocked` event instead of waiting with no
/// end (on idb-pipe it waited: in a tab elected by Web Lock that tab held the lock, so no context wrote).
/// The upgrade stays queued in IndexedDB: when the blocker closes it runs and must abort, leaving the
/// database at version 1 (it would otherwise be left at version 2 without the fence index); a later
/// open then upgrades it properly.
#[wasm_bindgen_test]
async fn a_blocked_upgrade_is_reported_not_waited_on_forever() {
    let name = unique_name("blocked");
    raw::write_schema_1(&name, 2).await;
    let blocker = open_schema_1(&name).await;
    let opening = Box::pin(open_result(&name));
    let outcome = select(opening, Box::pin(sleep_ms(3000))).await;
    let (hung, kind) = match outcome {
        Either::Left((result, _)) => (false, result.err().map(|e| e.kind)),
        Either::Right(((), opening)) => {
            blocker.close();
            drop(opening.await);
            (true, None)
        }
    };
    blocker.close();
    // Queued after the given-up open request: runs once its upgrade ran (and aborted).
    let version = raw_version(&name).await;
    let reopened = open_result(&name).await.map(|store| store.epoch());
    IdbStore::delete_database(&name).await.expect("delete");
    assert!(
        !hung,
        "IdbStore::open neither failed nor opened within 3 s while a schema-version-1 connection \
         blocked the upgrade"
    );
    assert_eq!(
        kind,
        Some(StoreErrorKind::Unavailable),
        "a blocked upgrade is an error"
    );
    assert_eq!(
        version, 1.0,
        "the queued upgrade of the open that gave up left the database at version {version}"
    );
    assert!(reopened.is_ok(), "a later open upgrades it: {reopened:?}");
}

/// A brand-new database: a connection at epoch 0 that committed, and one that never committed (no
/// `writer/0` record for the take-over to delete), are both fenced by the first claim.
#[wasm_bindgen_test]
async fn epoch_zero_writers_are_fenced_by_the_first_claim() {
    let name = unique_name("epoch-0");
    let committed = open(&name).await;
    assert_eq!(committed.epoch(), 0);
    committed
        .commit(&put("k", b"0"))
        .await
        .expect("an epoch-0 commit");
    let silent = open(&name).await;
    let writer = open(&name).await;
    assert_eq!(writer.take_over().await.expect("claim"), 1);
    let err = committed
        .commit(&put("k", b"stale"))
        .await
        .expect_err("epoch 0 after the claim of 1");
    assert_eq!(err.kind, StoreErrorKind::Unavailable, "{err}");
    silent
        .commit(&put("k", b"stale"))
        .await
        .expect_err("epoch 0, never committed, after the claim of 1");
    writer
        .commit(&put("k", b"1"))
        .await
        .expect("the writer of epoch 1");
    assert_eq!(
        writer.scan("").await.expect("scan"),
        vec![("k".to_string(), b"1".to_vec())]
    );
    drop((committed, silent, writer));

    // A claimed epoch whose writer never committed: its record does not exist when the next claims.
    let name2 = unique_name("no-record");
    let idle = open(&name2).await;
    assert_eq!(idle.take_over().await.expect("claim"), 1);
    let next = open(&name2).await;
    assert_eq!(next.take_over().await.expect("claim"), 2);
    idle.commit(&put("k", b"stale"))
        .await
        .expect_err("the idle writer of epoch 1 is fenced");
    next.commit(&put("k", b"2")).await.expect("epoch 2 writes");
    drop((idle, next));
    IdbStore::delete_database(&name).await.expect("delete");
    IdbStore::delete_database(&name2).await.expect("delete");
}

/// A writer that claims twice, with one of its own commits in flight during the second claim: that
/// commit lands (it was issued first), the writer keeps writing, a connection that opened between the
/// two claims is fenced, and a later claim by another fences the twice-claimed writer.
#[wasm_bindgen_test]
async fn a_writer_that_claims_twice() {
    let name = unique_name("twice");
    let a = open(&name).await;
    assert_eq!(a.take_over().await.expect("claim"), 1);
    a.commit(&put("k/1", b"1")).await.expect("commit at 1");
    let between = open(&name).await;
    assert_eq!(between.epoch(), 1);
    let in_flight = put("k/2", b"2");
    let (committed, claimed) = futures::join!(a.commit(&in_flight), a.take_over());
    committed.expect("a commit issued before the second claim lands");
    assert_eq!(claimed.expect("second claim"), 2);
    a.commit(&put("k/3", b"3")).await.expect("commit at 2");
    between
        .commit(&put("k/x", b"x"))
        .await
        .expect_err("a connection at epoch 1 after the claim of 2");
    let b = open(&name).await;
    assert_eq!(b.take_over().await.expect("claim"), 3);
    a.commit(&put("k/y", b"y"))
        .await
        .expect_err("the twice-claimed writer after the claim of 3");
    let keys: Vec<String> = b
        .scan("")
        .await
        .expect("scan")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, vec!["k/1", "k/2", "k/3"]);
    drop((a, between, b));
    IdbStore::delete_database(&name).await.expect("delete");
}

/// Two contexts of this build open a schema-version-1 database at once (one upgrades, the other waits)
/// and claim at once: distinct epochs, and only the later claim writes.
#[wasm_bindgen_test]
async fn two_claims_at_once_after_an_upgrade() {
    let name = unique_name("v1-race");
    raw::write_schema_1(&name, 3).await;
    let (a, b) = futures::join!(open(&name), open(&name));
    let (ea, eb) = futures::join!(a.take_over(), b.take_over());
    let (ea, eb) = (ea.expect("a claims"), eb.expect("b claims"));
    let mut epochs = [ea, eb];
    epochs.sort();
    assert_eq!(epochs, [4, 5]);
    let (winner, loser) = if ea > eb { (&a, &b) } else { (&b, &a) };
    loser
        .commit(&put("m/x", b"x"))
        .await
        .expect_err("the earlier claim is fenced");
    winner
        .commit(&put("m/2", b"2"))
        .await
        .expect("the later claim writes");
    assert_eq!(winner.scan("m/").await.expect("scan").len(), 2);
    drop((a, b));
    IdbStore::delete_database(&name).await.expect("delete");
}

/// After an upgrade, a claim, commits and a recorded commit (a `Uint8Array` answer, as src/bindings
/// writes it): the unique `writer` index holds only the claim marker and the fence record, both numbers
/// (a string epoch would never collide with a number one), and nothing of v1 (`true` markers, the
/// format, the epoch, answers written before and after the upgrade).
#[wasm_bindgen_test]
async fn the_writer_index_holds_only_fence_values_as_numbers() {
    let name = unique_name("index");
    raw::write_schema_1(&name, 3).await;
    let store = open(&name).await;
    assert_eq!(store.take_over().await.expect("claim"), 4);
    store.commit(&put("m/2", b"2")).await.expect("commit");
    let answer: JsValue = Uint8Array::from(&b"\xc8\x00\x00\x00{}"[..]).into();
    store
        .commit_recording(
            &put("m/3", b"3"),
            &[("req/000000000000009:t:1".into(), answer)],
            "req/000000000000001",
        )
        .await
        .expect("recorded commit");
    drop(store);
    let (unique, keys, values) = writer_index(&name).await;
    assert!(unique, "the index is unique");
    assert_eq!(keys, vec!["claim/4".to_string(), "writer/4".to_string()]);
    let values: Vec<Option<f64>> = values.iter().map(JsValue::as_f64).collect();
    assert_eq!(values, vec![Some(3.0), Some(4.0)]);
    IdbStore::delete_database(&name).await.expect("delete");
}

/// Someone else's database at version 1 that happens to have a `meta` store is refused as not a
/// queen-edge one, and left at version 1: the upgrade reads `meta/format` and aborts (on idb-pipe it
/// was left at version 2 with our index, so its own application, opening at version 1, got a
/// `VersionError`).
#[wasm_bindgen_test]
async fn a_foreign_version_1_database_with_a_meta_store_is_left_untouched() {
    let name = unique_name("foreign-meta");
    raw::create_version_1(&name, |db| {
        db.create_object_store(META_STORE)
            .unwrap()
            .put_with_key(&"theirs".into(), &"owner".into())
            .unwrap();
    })
    .await
    .close();
    let err = open_result(&name)
        .await
        .expect_err("not a queen-edge database");
    assert_eq!(err.kind, StoreErrorKind::Other, "{err}");
    let version = raw_version(&name).await;
    IdbStore::delete_database(&name).await.expect("delete");
    assert_eq!(
        version, 1.0,
        "the foreign database keeps its version (it was upgraded to {version})"
    );
}

/// Someone else's database at version 1 without our stores is refused as `Other` ("not a queen-edge
/// database"), as before idb-pipe (on idb-pipe the aborted upgrade was reported as `Unavailable`,
/// "cannot be opened: AbortError", as if IndexedDB could not be used here).
#[wasm_bindgen_test]
async fn a_foreign_version_1_database_is_rejected_as_foreign() {
    let name = unique_name("foreign-1");
    raw::create_version_1(&name, |_| {}).await.close();
    let err = open_result(&name)
        .await
        .expect_err("not a queen-edge database");
    IdbStore::delete_database(&name).await.expect("delete");
    assert_eq!(err.kind, StoreErrorKind::Other, "{err}");
}

/// Someone else's database at version 1 with both our store names, `records` and `meta`, but no number
/// at `meta/format`: the upgrade reads the format inside the `versionchange` transaction and aborts, so
/// it is refused as `Other` and left at version 1 without our index.
#[wasm_bindgen_test]
async fn a_foreign_version_1_database_with_our_store_names_is_left_untouched() {
    let name = unique_name("foreign-names");
    raw::create_version_1(&name, |db| {
        db.create_object_store("records").unwrap();
        db.create_object_store(META_STORE)
            .unwrap()
            .put_with_key(&"theirs".into(), &FORMAT_KEY.into())
            .unwrap();
    })
    .await
    .close();
    let err = open_result(&name)
        .await
        .expect_err("not a queen-edge database");
    let version = raw_version(&name).await;
    IdbStore::delete_database(&name).await.expect("delete");
    assert_eq!(err.kind, StoreErrorKind::Other, "{err}");
    assert!(
        err.to_string().contains("not a queen-edge database"),
        "{err}"
    );
    assert_eq!(
        version, 1.0,
        "the foreign database keeps its version (it was upgraded to {version})"
    );
}
