//! Raw IndexedDB for the tests that set a database up as another build (or another app) leaves it, and
//! inspect what `IdbStore` wrote: the factory, a request's or a transaction's outcome, a version-1
//! database. Not every test binary that includes `idb_common` uses all of it.
#![allow(dead_code)]

use js_sys::Object;
use js_sys::{Promise, Reflect, Uint8Array};
use queen_edge::store::idb::{FORMAT_KEY, FORMAT_VERSION, META_STORE};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{IdbDatabase, IdbFactory, IdbRequest, IdbTransaction, IdbTransactionMode};

/// The global `indexedDB` (a window's or a worker's).
pub fn factory() -> IdbFactory {
    Reflect::get(&js_sys::global(), &"indexedDB".into())
        .expect("indexedDB global")
        .dyn_into()
        .expect("an IDBFactory")
}

/// Waits for a raw request's success and returns its result.
pub async fn wait(request: &IdbRequest) -> JsValue {
    let promise = Promise::new(&mut |resolve, reject| {
        request.set_onsuccess(Some(&resolve));
        request.set_onerror(Some(&reject));
    });
    JsFuture::from(promise).await.expect("raw request succeeds");
    request.result().expect("a result")
}

/// Resolves `Ok` on the transaction's `complete`, `Err` on its `abort`.
pub async fn outcome(tx: &IdbTransaction) -> Result<(), JsValue> {
    let promise = Promise::new(&mut |resolve, reject| {
        tx.set_oncomplete(Some(&resolve));
        tx.set_onabort(Some(&reject));
    });
    JsFuture::from(promise).await.map(|_| ())
}

/// Creates the database `name` at version 1, running `upgrade` on it inside the `versionchange`
/// transaction, and returns the open connection.
pub async fn create_version_1(name: &str, upgrade: impl Fn(&IdbDatabase) + 'static) -> IdbDatabase {
    create_at_version(name, 1, upgrade).await
}

/// Creates the database `name` at `version`, running `upgrade` on it inside the `versionchange`
/// transaction, and returns the open connection.
pub async fn create_at_version(
    name: &str,
    version: u32,
    upgrade: impl Fn(&IdbDatabase) + 'static,
) -> IdbDatabase {
    let request = factory().open_with_u32(name, version).expect("raw open");
    let upgrade_request = request.clone();
    let on_upgrade = Closure::<dyn FnMut()>::new(move || {
        let db: IdbDatabase = upgrade_request.result().unwrap().dyn_into().unwrap();
        upgrade(&db);
    });
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let db = wait(&request).await.dyn_into().expect("a database");
    drop(on_upgrade);
    db
}

/// Writes the database `name` as a schema-version-1 build leaves it: both stores, the format, epoch
/// `epoch` with its claim markers `true`, a recorded answer in `meta` (as src/bindings writes them, a
/// `Uint8Array`) and one record `m/1` = `one`. Leaves nothing open.
pub async fn write_schema_1(name: &str, epoch: u32) {
    let db = create_version_1(name, move |db| {
        db.create_object_store("records").unwrap();
        let meta = db.create_object_store(META_STORE).unwrap();
        meta.put_with_key(&JsValue::from(FORMAT_VERSION), &FORMAT_KEY.into())
            .unwrap();
        if epoch > 0 {
            meta.put_with_key(&JsValue::from(epoch), &"epoch".into())
                .unwrap();
        }
        for e in 1..=epoch {
            meta.put_with_key(&JsValue::TRUE, &format!("claim/{e}").into())
                .unwrap();
        }
        meta.put_with_key(
            &Uint8Array::from(&b"\xc8\x00\x00\x00{}"[..]),
            &"req/000000000000005:t:1".into(),
        )
        .unwrap();
    })
    .await;
    let tx = db
        .transaction_with_str_and_mode("records", IdbTransactionMode::Readwrite)
        .expect("raw transaction");
    tx.object_store("records")
        .expect("records store")
        .put_with_key(&Uint8Array::from(&b"one"[..]), &"m/1".into())
        .expect("raw put");
    outcome(&tx).await.expect("raw commit");
    db.close();
}

/// `{writer: epoch}`, a schema-2 fence value.
fn fence_value(epoch: u32) -> JsValue {
    let value = Object::new();
    Reflect::set(&value, &"writer".into(), &epoch.into()).unwrap();
    value.into()
}

/// Writes the database `name` as a schema-version-2 build (main before the version-change fence) leaves
/// it after a writer at `epoch` (at least 1) committed: version 2, both stores, the unique `writer` index
/// of `meta`, the format, `meta/epoch`, the claim markers `claim/<e>` = `{writer: e - 1}`, the writer's
/// fence record `writer/<epoch>` = `{writer: epoch}`, a recorded answer in `meta` (a `Uint8Array`) and
/// the records `m/1` = `one` and `m/2` = `two`. Leaves nothing open.
pub async fn write_schema_2(name: &str, epoch: u32) {
    let request = factory().open_with_u32(name, 2).expect("raw open");
    let upgrade_request = request.clone();
    let on_upgrade = Closure::<dyn FnMut()>::new(move || {
        let db: IdbDatabase = upgrade_request.result().unwrap().dyn_into().unwrap();
        db.create_object_store("records").unwrap();
        let meta = db.create_object_store(META_STORE).unwrap();
        let options = Object::new();
        Reflect::set(&options, &"unique".into(), &JsValue::TRUE).unwrap();
        let create_index: js_sys::Function = Reflect::get(&meta, &"createIndex".into())
            .unwrap()
            .unchecked_into();
        create_index
            .call3(&meta, &"writer".into(), &"writer".into(), &options)
            .expect("createIndex");
        meta.put_with_key(&JsValue::from(FORMAT_VERSION), &FORMAT_KEY.into())
            .unwrap();
        meta.put_with_key(&JsValue::from(epoch), &"epoch".into())
            .unwrap();
        for e in 1..=epoch {
            meta.put_with_key(&fence_value(e - 1), &format!("claim/{e}").into())
                .unwrap();
        }
        meta.put_with_key(&fence_value(epoch), &format!("writer/{epoch}").into())
            .unwrap();
        meta.put_with_key(
            &Uint8Array::from(&b"\xc8\x00\x00\x00{}"[..]),
            &"req/000000000000005:t:1".into(),
        )
        .unwrap();
    });
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let db: IdbDatabase = wait(&request).await.dyn_into().expect("a database");
    drop(on_upgrade);
    let tx = db
        .transaction_with_str_and_mode("records", IdbTransactionMode::Readwrite)
        .expect("raw transaction");
    let records = tx.object_store("records").expect("records store");
    records
        .put_with_key(&Uint8Array::from(&b"one"[..]), &"m/1".into())
        .expect("raw put");
    records
        .put_with_key(&Uint8Array::from(&b"two"[..]), &"m/2".into())
        .expect("raw put");
    outcome(&tx).await.expect("raw commit");
    db.close();
}
