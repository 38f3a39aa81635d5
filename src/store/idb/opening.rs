//! One IndexedDB open request at a version, with the schema's upgrade and the `blocked` wait (module
//! documentation of `idb`, *Fencing* and *Connections*).

use super::{
    describe, js_store_error, prefix_range, Pending, EPOCH_KEY, FORMAT_KEY, FORMAT_VERSION,
    LEGACY_FENCE_PREFIXES, META_STORE, RECORDS_STORE, WRITER_INDEX,
};
use crate::store::{StoreError, StoreErrorKind};
use js_sys::Function;
use std::cell::Cell;
use std::rc::Rc;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{
    Event, IdbDatabase, IdbFactory, IdbOpenDbRequest, IdbRequest, IdbVersionChangeEvent,
};

/// How an open request ended.
pub(super) enum Opened {
    /// A connection; `claimed` when this request ran the upgrade to its version (so no other connection
    /// was open at any earlier version when it did).
    Database { db: IdbDatabase, claimed: bool },
    /// The database is already at a later version than the one asked for.
    VersionPassed,
}

/// What the handlers of one open request found.
#[derive(Default)]
struct Flags {
    /// The upgrade ran (this request claimed its version).
    upgraded: Cell<bool>,
    /// The upgrade found a database that is not a queen-edge one (and aborted).
    foreign: Cell<bool>,
    /// The request was blocked by a connection that did not close (and `on_blocked(true)` was called).
    blocked: Cell<bool>,
}

/// Opens `name` at `version` (at its current version when `None`; a database that does not exist then
/// is not created: the request's upgrade is aborted and it fails as `Unavailable`). Waits while other
/// connections block the upgrade, calling `on_blocked(true)` when it starts waiting and
/// `on_blocked(false)` when the open ends after that.
pub(super) async fn open_at(
    factory: &IdbFactory,
    name: &str,
    version: Option<u32>,
    on_blocked: Option<&Function>,
) -> Result<Opened, StoreError> {
    let request = match version {
        Some(version) => factory.open_with_u32(name, version),
        None => factory.open(name),
    }
    .map_err(|e| js_store_error(StoreErrorKind::Unavailable, "open", &e))?;
    let flags = Rc::new(Flags::default());
    let handler_flags = flags.clone();
    let upgrade_request = request.clone();
    let may_create = version.is_some();
    // One handler for the request's `upgradeneeded` and the `success` of the format read inside that
    // upgrade (`create_schema`).
    let on_upgrade = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
        let outcome = if let Some(upgrade) = event.dyn_ref::<IdbVersionChangeEvent>() {
            handler_flags.upgraded.set(true);
            if !may_create {
                Err(JsValue::from_str("the database was deleted while opening"))
            } else {
                create_schema(
                    &upgrade_request,
                    upgrade.old_version(),
                    &handler_flags.foreign,
                )
            }
        } else if event
            .target()
            .and_then(|t| t.unchecked_into::<IdbRequest>().result().ok())
            .is_some_and(|format| format.as_f64().is_some())
        {
            Ok(())
        } else {
            handler_flags.foreign.set(true);
            Err(JsValue::from_str("not a queen-edge database"))
        };
        if let Err(e) = outcome {
            // Aborting the versionchange transaction makes the open request fail (an AbortError).
            if let Some(tx) = upgrade_request.transaction() {
                let _ = tx.abort();
            }
            web_sys::console::error_2(&"queen-edge: IndexedDB upgrade failed".into(), &e);
        }
    });
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let blocked_flags = flags.clone();
    let report = on_blocked.cloned();
    let on_blocked_event = Closure::<dyn FnMut(Event)>::new(move |_: Event| {
        if !blocked_flags.blocked.replace(true) {
            if let Some(report) = &report {
                let _ = report.call1(&JsValue::NULL, &JsValue::TRUE);
            }
        }
    });
    request.set_onblocked(Some(on_blocked_event.as_ref().unchecked_ref()));
    let opened = Pending::new(&request).finish().await;
    request.set_onupgradeneeded(None);
    request.set_onblocked(None);
    drop((on_upgrade, on_blocked_event));
    if flags.blocked.get() {
        if let Some(report) = on_blocked {
            let _ = report.call1(&JsValue::NULL, &JsValue::FALSE);
        }
    }
    if flags.foreign.get() {
        return Err(StoreError::new(
            StoreErrorKind::Other,
            "IndexedDB: the database is not a queen-edge database",
        ));
    }
    match opened {
        Ok(db) => Ok(Opened::Database {
            db: db
                .dyn_into()
                .map_err(|_| StoreError::other("indexedDB.open did not produce a database"))?,
            claimed: flags.upgraded.get(),
        }),
        Err(e) if describe(&e).0 == "VersionError" => Ok(Opened::VersionPassed),
        // Quota and security errors keep their kinds; anything else means IndexedDB cannot be used here.
        Err(e) => Err(js_store_error(
            StoreErrorKind::Unavailable,
            &format!("opening database \"{name}\""),
            &e,
        )),
    }
}

/// Creates what `old_version` lacks inside the `versionchange` transaction: the object stores and the
/// format record (a new database); drops the fence bookkeeping of schema 1 and 2 (the `writer` index,
/// `meta/epoch`, `meta/claim/<n>`, `meta/writer/<n>`). Upgrading a database of schema 1 or later that
/// lacks our object stores fails and sets `foreign`; its `meta/format` is read by a request of this
/// transaction whose `success` goes to the request's `upgradeneeded` handler, which aborts the upgrade
/// (and sets `foreign`) when it is not a number. A claim's upgrade (from 3 on) changes nothing.
fn create_schema(
    request: &IdbOpenDbRequest,
    old_version: f64,
    foreign: &Cell<bool>,
) -> Result<(), JsValue> {
    if old_version < 1.0 {
        let db: IdbDatabase = request.result()?.dyn_into()?;
        db.create_object_store(RECORDS_STORE)?;
        let meta = db.create_object_store(META_STORE)?;
        meta.put_with_key(
            &JsValue::from(FORMAT_VERSION),
            &JsValue::from_str(FORMAT_KEY),
        )?;
        return Ok(());
    }
    let tx = request
        .transaction()
        .ok_or_else(|| JsValue::from_str("no versionchange transaction"))?;
    let (Ok(_), Ok(meta)) = (tx.object_store(RECORDS_STORE), tx.object_store(META_STORE)) else {
        foreign.set(true);
        return Err(JsValue::from_str("not a queen-edge database"));
    };
    // Checked by the open request's own handler, which aborts the upgrade when it is not a number.
    let format = meta.get(&FORMAT_KEY.into())?;
    format.set_onsuccess(request.onupgradeneeded().as_ref());
    if old_version < 3.0 {
        // Schema 2 kept the fence's `writer` index on `meta`. A version-2 database without it is not
        // one of ours: the format check above refuses it (and the abort takes back these deletes).
        if old_version >= 2.0 && meta.index_names().contains(WRITER_INDEX) {
            meta.delete_index(WRITER_INDEX)?;
        }
        meta.delete(&EPOCH_KEY.into())?;
        for prefix in LEGACY_FENCE_PREFIXES {
            if let Some(range) = prefix_range(prefix)? {
                meta.delete(&range)?;
            }
        }
    }
    Ok(())
}
