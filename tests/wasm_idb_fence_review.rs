//! The IndexedDB writer fence (`src/store/idb.rs`, *Fencing*) in headless Chromium: first written as the
//! review of schema version 2's one-request fence (branch `idb-pipe`), rewritten for the version-change
//! fence (schema 3, session 18): the upgrade from schema version 1 (with an older build's connection
//! open, and with one that does not close), a claim blocked by a connection that does not close, claims
//! on a fresh database, a writer that claims twice, two claims at once after an upgrade, what `meta`
//! holds after an upgrade, and databases that are not queen-edge ones at version 1.
#![cfg(target_arch = "wasm32")]

mod idb_common;

use futures::FutureExt;
use idb_common::{raw, unique_name};
use js_sys::{Array, Function, Promise, Reflect, Uint8Array};
use queen_edge::store::idb::{FORMAT_KEY, META_STORE, SCHEMA_VERSION};
use queen_edge::store::{ChangeSet, Durability, IdbOptions, IdbStore, Store, StoreErrorKind};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use web_sys::{Event, IdbDatabase, IdbTransaction, IdbTransactionMode};

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
    let marker: JsValue = format!("claim/{}", epoch + 1).into();
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

/// The keys of `meta`, in order.
async fn meta_keys(name: &str) -> Vec<String> {
    let request = raw::factory().open(name).expect("raw open");
    let db: IdbDatabase = raw::wait(&request).await.dyn_into().expect("a database");
    let tx = db
        .transaction_with_str(META_STORE)
        .expect("a readonly transaction");
    let keys = tx
        .object_store(META_STORE)
        .expect("meta")
        .get_all_keys()
        .expect("getAllKeys");
    let keys: Array = raw::wait(&keys).await.unchecked_into();
    db.close();
    keys.iter().map(|k| k.as_string().unwrap()).collect()
}

/// The calls an `on_blocked` callback received.
type Calls = Rc<RefCell<Vec<bool>>>;

/// Records `on_blocked`'s calls: the list, the function, and the closure to keep alive meanwhile.
fn blocked_calls() -> (Calls, Function, Closure<dyn FnMut(bool)>) {
    let calls = Rc::new(RefCell::new(Vec::new()));
    let seen = calls.clone();
    let closure =
        Closure::<dyn FnMut(bool)>::new(move |blocked: bool| seen.borrow_mut().push(blocked));
    let function = closure.as_ref().clone().unchecked_into();
    (calls, function, closure)
}

/// Waits (in 20 ms steps, at most 10 s, so a broken build fails rather than hangs) until `calls` holds
/// `true`.
async fn until_blocked(calls: &RefCell<Vec<bool>>) {
    for _ in 0..500 {
        if calls.borrow().contains(&true) {
            return;
        }
        sleep_ms(20).await;
    }
    panic!("on_blocked(true) was never called");
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
    assert_eq!(store.epoch(), SCHEMA_VERSION);
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
    assert_eq!(
        store.take_over().await.expect("take over"),
        SCHEMA_VERSION + 1
    );
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
/// `IdbStore::open` waits for it (until schema 3 it failed as `Unavailable`; waiting is what a claim must
/// do, below), says so through `on_blocked(true)`, and opens once the blocker closes
/// (`on_blocked(false)`), upgraded, with the blocker's last commit.
#[wasm_bindgen_test]
async fn a_blocked_upgrade_waits_and_says_so() {
    let name = unique_name("blocked-upgrade");
    raw::write_schema_1(&name, 2).await;
    let blocker = open_schema_1(&name).await;
    let (calls, on_blocked, _keep) = blocked_calls();
    let mut opening = Box::pin(IdbStore::open_observed(
        &name,
        IdbOptions::default(),
        Some(on_blocked),
    ));
    let ((), pending) = futures::join!(until_blocked(&calls), async {
        (&mut opening).now_or_never().is_none()
    });
    assert!(pending, "the open waits");
    assert!(
        (&mut opening).now_or_never().is_none(),
        "still waiting once blocked"
    );
    raw::outcome(&issue_schema_1_commit(&blocker, 2, "m/blocker"))
        .await
        .expect("the blocker still commits");
    blocker.close();
    let store = opening.await.expect("opens once the blocker closed");
    assert_eq!(*calls.borrow(), vec![true, false]);
    assert_eq!(store.epoch(), SCHEMA_VERSION);
    assert_eq!(store.scan("m/").await.expect("scan").len(), 2);
    drop(store);
    IdbStore::delete_database(&name).await.expect("delete");
}

/// A connection at the current epoch that does not close on `versionchange` blocks a claim: the claim
/// waits (it neither fails nor lets a second writer in), says so through `on_blocked(true)`, the
/// blocker's commits still land meanwhile, and once it closes the claim runs (`on_blocked(false)`) and
/// sees them. (Without Web Locks, js/local.js passes this on as `Queen.open`'s `onBlocked`.)
#[wasm_bindgen_test]
async fn a_blocked_claim_waits_says_so_and_runs_when_the_blocker_closes() {
    let name = unique_name("blocked-claim");
    let (calls, on_blocked, _keep) = blocked_calls();
    let store = IdbStore::open_observed(&name, IdbOptions::default(), Some(on_blocked))
        .await
        .expect("open");
    store.commit(&put("k/1", b"1")).await.expect("commit");
    let blocker: IdbDatabase = raw::wait(&raw::factory().open(&name).expect("raw open"))
        .await
        .dyn_into()
        .expect("a database");
    let epoch = store.epoch();
    let mut claiming = Box::pin(store.take_over());
    let ((), pending) = futures::join!(until_blocked(&calls), async {
        (&mut claiming).now_or_never().is_none()
    });
    assert!(pending, "the claim waits");
    let tx = blocker
        .transaction_with_str_and_mode("records", IdbTransactionMode::Readwrite)
        .expect("the blocker still starts transactions");
    tx.object_store("records")
        .expect("records")
        .put_with_key(&Uint8Array::from(&b"2"[..]), &"k/2".into())
        .expect("put");
    raw::outcome(&tx).await.expect("the blocker still commits");
    assert!(
        (&mut claiming).now_or_never().is_none(),
        "still waiting while the blocker is open"
    );
    blocker.close();
    assert_eq!(claiming.await.expect("claims"), epoch + 1);
    assert_eq!(*calls.borrow(), vec![true, false]);
    let keys: Vec<String> = store
        .scan("k/")
        .await
        .expect("scan")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys, vec!["k/1", "k/2"], "the blocker's commit is kept");
    drop(store);
    IdbStore::delete_database(&name).await.expect("delete");
}

/// A brand-new database: a connection at the first epoch that committed, and one that never committed,
/// are both fenced by the first claim.
#[wasm_bindgen_test]
async fn first_epoch_writers_are_fenced_by_the_first_claim() {
    let name = unique_name("epoch-0");
    let committed = open(&name).await;
    assert_eq!(committed.epoch(), SCHEMA_VERSION);
    committed
        .commit(&put("k", b"0"))
        .await
        .expect("an epoch-0 commit");
    let silent = open(&name).await;
    let writer = open(&name).await;
    assert_eq!(writer.take_over().await.expect("claim"), SCHEMA_VERSION + 1);
    let err = committed
        .commit(&put("k", b"stale"))
        .await
        .expect_err("the first epoch after the claim of the next");
    assert_eq!(err.kind, StoreErrorKind::Unavailable, "{err}");
    silent
        .commit(&put("k", b"stale"))
        .await
        .expect_err("the first epoch, never committed, after the claim of the next");
    writer
        .commit(&put("k", b"1"))
        .await
        .expect("the writer of the claimed epoch");
    assert_eq!(
        writer.scan("").await.expect("scan"),
        vec![("k".to_string(), b"1".to_vec())]
    );
    drop((committed, silent, writer));

    // A claimed epoch whose writer never committed.
    let name2 = unique_name("no-record");
    let idle = open(&name2).await;
    assert_eq!(idle.take_over().await.expect("claim"), SCHEMA_VERSION + 1);
    let next = open(&name2).await;
    assert_eq!(next.take_over().await.expect("claim"), SCHEMA_VERSION + 2);
    idle.commit(&put("k", b"stale"))
        .await
        .expect_err("the idle writer of the first claim is fenced");
    next.commit(&put("k", b"2"))
        .await
        .expect("the next claim writes");
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
    let first = a.take_over().await.expect("claim");
    assert_eq!(first, SCHEMA_VERSION + 1);
    a.commit(&put("k/1", b"1"))
        .await
        .expect("commit at the first claim");
    let between = open(&name).await;
    assert_eq!(between.epoch(), first);
    let in_flight = put("k/2", b"2");
    let (committed, claimed) = futures::join!(a.commit(&in_flight), a.take_over());
    committed.expect("a commit issued before the second claim lands");
    assert_eq!(claimed.expect("second claim"), first + 1);
    a.commit(&put("k/3", b"3"))
        .await
        .expect("commit at the second claim");
    between
        .commit(&put("k/x", b"x"))
        .await
        .expect_err("a connection at the first claim's epoch after the second");
    let b = open(&name).await;
    assert_eq!(b.take_over().await.expect("claim"), first + 2);
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
    assert_eq!(epochs, [SCHEMA_VERSION + 1, SCHEMA_VERSION + 2]);
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

/// After an upgrade from schema 1, a claim, commits and a recorded commit (a `Uint8Array` answer, as
/// src/bindings writes it): `meta` holds the format and the answers (the one written before the upgrade
/// and the new one), and nothing of the earlier fences (`epoch`, `claim/<n>`, `writer/<n>`).
#[wasm_bindgen_test]
async fn after_an_upgrade_meta_holds_only_the_format_and_answers() {
    let name = unique_name("meta-keys");
    raw::write_schema_1(&name, 3).await;
    let store = open(&name).await;
    assert_eq!(store.take_over().await.expect("claim"), SCHEMA_VERSION + 1);
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
    assert_eq!(
        meta_keys(&name).await,
        vec![
            "format".to_string(),
            "req/000000000000005:t:1".to_string(),
            "req/000000000000009:t:1".to_string()
        ]
    );
    IdbStore::delete_database(&name).await.expect("delete");
}

/// Opens `name`, someone else's database at `version`: refused as `Other`, "not a queen-edge database",
/// and left at its version (the aborted upgrade takes back whatever it did). Deletes it.
async fn refused_as_foreign(name: &str, version: f64) {
    let err = open_result(name)
        .await
        .expect_err("not a queen-edge database");
    let version_after = raw_version(name).await;
    IdbStore::delete_database(name).await.expect("delete");
    assert_eq!(err.kind, StoreErrorKind::Other, "{err}");
    assert!(
        err.to_string().contains("not a queen-edge database"),
        "{err}"
    );
    assert_eq!(
        version_after, version,
        "the foreign database keeps its version (it was upgraded to {version_after})"
    );
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
    refused_as_foreign(&name, 1.0).await;
}

/// Someone else's database at version 1 without our stores is refused as `Other` ("not a queen-edge
/// database"), as before idb-pipe (on idb-pipe the aborted upgrade was reported as `Unavailable`,
/// "cannot be opened: AbortError", as if IndexedDB could not be used here).
#[wasm_bindgen_test]
async fn a_foreign_version_1_database_is_rejected_as_foreign() {
    let name = unique_name("foreign-1");
    raw::create_version_1(&name, |_| {}).await.close();
    refused_as_foreign(&name, 1.0).await;
}

/// Someone else's database at version 1 with both our store names, `records` and `meta`, but no number
/// at `meta/format`: the upgrade reads the format inside the `versionchange` transaction and aborts, so
/// it is refused as `Other` and left at version 1 without our index.
#[wasm_bindgen_test]
async fn a_foreign_version_1_database_with_our_store_names_is_left_untouched() {
    foreign_with_our_store_names_is_refused(1).await;
}

/// Someone else's database at version 2 with our store names but without schema 2's `writer` index on
/// `meta` (and no number at `meta/format`) is refused as not a queen-edge one (`Other`) and left at
/// version 2. (Before, the upgrade's removal of the index threw `NotFoundError`, and the aborted upgrade
/// was reported as `Unavailable`, as if IndexedDB could not be used here.)
#[wasm_bindgen_test]
async fn a_foreign_version_2_database_without_our_index_is_rejected_as_foreign() {
    foreign_with_our_store_names_is_refused(2).await;
}

/// Someone else's database at `version` with our two store names and `meta/format` = `"theirs"` (and no
/// index): [`refused_as_foreign`].
async fn foreign_with_our_store_names_is_refused(version: u32) {
    let name = unique_name(&format!("foreign-names-{version}"));
    raw::create_at_version(&name, version, |db| {
        db.create_object_store("records").unwrap();
        db.create_object_store(META_STORE)
            .unwrap()
            .put_with_key(&"theirs".into(), &FORMAT_KEY.into())
            .unwrap();
    })
    .await
    .close();
    refused_as_foreign(&name, version.into()).await;
}
