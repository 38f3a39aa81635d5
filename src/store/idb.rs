//! [`IdbStore`]: the IndexedDB [`Store`], for the broker in a page or in a dedicated, shared or service
//! worker (wasm32 only).
//!
//! # Layout
//!
//! One database per broker, named by the caller, with two object stores:
//! - `records`: the [`Store`]'s records, out-of-line string keys, each value a `Uint8Array`;
//! - `meta`: bookkeeping that must not show up in a scan: `format`, the format version (a number) of the
//!   data in `records`; `epoch`, the writer epoch (see *Fencing*); `claim/<n>`, one marker per epoch ever
//!   claimed; `writer/<n>`, the fence record of epoch `n`'s writer; `req/<id>`, the answers of recorded
//!   requests ([`IdbStore::commit_recording`]). A unique index, `writer`, on the `writer` field of its
//!   values holds the fence (see *Fencing*).
//!
//! Two version numbers guard against a build reading data it does not understand:
//! - the IndexedDB schema version ([`SCHEMA_VERSION`]), bumped only when object stores or indexes change
//!   (version 2 added the `writer` index; opening a version 1 database adds it). Opening a database whose
//!   schema version is higher fails in IndexedDB with a `VersionError`. An upgrade closes the connections
//!   of older builds (see *Connections*), so builds of different schema versions never write together;
//! - the format version ([`FORMAT_VERSION`]) in `meta/format`, bumped when the meaning of records changes.
//!
//! Either being newer than this build makes [`IdbStore::open`] fail with [`StoreErrorKind::NewerFormat`].
//!
//! # Transactions
//!
//! [`Store::commit`] runs one `readwrite` transaction per [`ChangeSet`]: every `put` and `delete` request
//! is issued synchronously, before the first `await`, so the transaction cannot auto-commit half way; then
//! it awaits the transaction's `complete` event. An `abort` (a failed request, quota, a closed connection)
//! is an `Err` and nothing of the change set is visible. Durability is `strict` by default (the data is
//! flushed to disk before `complete`); [`Durability::Relaxed`] trades that for speed.
//!
//! A connection makes what every commit needs once, when it opens: the `complete` and `abort` handlers
//! that wake the task awaiting a transaction (module `ends`), the commit's scope and options, the object
//! store names, and its fence record's key and value for each epoch it commits at. A commit then only
//! makes its own requests' keys and values.
//!
//! # Fencing
//!
//! Only one connection may write a database at a time; across tabs the JS wrapper elects it (Web Locks, or
//! without them through this fence), and the fence makes the rule hold in storage even when two contexts
//! both believe they are the writer. The fence is the unique index `writer` of [`META_STORE`]: no two
//! records may hold the same `writer` value. Every commit of a connection at epoch `n` puts its fence
//! record `meta/writer/<n>` = `{writer: n}` (one request, replacing its own record of the same value).
//! [`IdbStore::take_over`] claims the next writer epoch `n + 1`: in one `readwrite` transaction it deletes
//! `meta/writer/<n>`, `add`s the marker `meta/claim/<n + 1>` = `{writer: n}` (which fails if another
//! connection claimed `n + 1` first; it then re-reads and tries again) and sets `meta/epoch` to `n + 1`.
//! Markers are never deleted, so from then on every commit at epoch `n` puts a second record with the
//! value `n`: the put fails with a `ConstraintError`, and the whole transaction aborts, so nothing of a
//! stale writer's change set is ever visible (a writer at an earlier epoch `m` meets the marker of
//! `m + 1`). The check runs inside IndexedDB with no callback, issued synchronously with the change set,
//! so it keeps the early `commit()` and holds while a page unloads. After such a failure the store is
//! [superseded](IdbStore::is_superseded): every later commit fails at once with
//! [`StoreErrorKind::Unavailable`] (reads still work). A connection that never calls `take_over` writes at
//! the epoch current when it opened. (Schema version 1 fenced with an `add` and a `delete` of
//! `meta/claim/<n + 1>` in every commit: two requests; docs/decisions.md, "Pipelined IndexedDB commits
//! (session 7)".)
//!
//! [`Store::scan`] reads keys and values with `getAllKeys` and `getAll` over one key range, in one
//! `readonly` transaction, so both lists describe the same snapshot and line up.
//!
//! # Key order
//!
//! IndexedDB orders string keys by UTF-16 code units, while the [`Store`] contract asks for byte order of
//! the UTF-8 keys. The two agree for keys below U+D800 (all the broker's keys are ASCII); for any other
//! keys, `scan` re-sorts its result by bytes (a no-op pass on already sorted input), so the contract holds
//! for every key. The prefix range itself is exact in UTF-16 order: it runs from the prefix up to, not
//! including, the prefix with its last code unit incremented. [`Store::first_keys`] asks `getKey` for the
//! first key of each range (all requests in one `readonly` transaction), which is the first in byte order
//! too when the range's lower bound and that key are below U+D800; otherwise it takes the first key at or
//! after the bound from a `scan` of the prefix.
//!
//! # Values
//!
//! IndexedDB has no small row limit, so values are stored whole (no chunking). Values up to 16 MiB are
//! covered by the browser tests.
//!
//! # Connections
//!
//! When another connection wants to upgrade or delete the database (a newer build in another tab, or
//! [`IdbStore::delete_database`]), this connection closes itself so it does not block them; later calls fail
//! with [`StoreErrorKind::Unavailable`] and the engine's reload path reopens, which then reports
//! [`StoreErrorKind::NewerFormat`] if that is what happened.
//!
//! An upgrade that another connection blocks (one at an older schema version that does not close on
//! `versionchange`) makes [`IdbStore::open`] fail with [`StoreErrorKind::Unavailable`] on the request's
//! `blocked` event instead of waiting; the request stays queued in IndexedDB, and when it runs later its
//! upgrade aborts (the database is left as it was) and a connection it opens is closed. Upgrading a
//! version 1 database checks that it has queen-edge's object stores and a number at `meta/format` inside
//! the upgrade, and aborts otherwise: someone else's database is refused with [`StoreErrorKind::Other`]
//! and left at its version.

mod ends;

use super::{ChangeSet, KeyRange, Record, Store, StoreError, StoreErrorKind};
use ends::{TxEnd, TxEnds};
use js_sys::{Array, Function, JsString, Object, Promise, Reflect, Uint8Array};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    Event, IdbDatabase, IdbFactory, IdbKeyRange, IdbObjectStore, IdbOpenDbRequest, IdbRequest,
    IdbTransaction, IdbTransactionMode, IdbVersionChangeEvent,
};

/// The IndexedDB schema version (object stores and indexes) this build creates and understands.
pub const SCHEMA_VERSION: u32 = 2;

/// The format version of the records this build writes and understands.
pub const FORMAT_VERSION: u32 = 1;

/// Name of the object store holding the records.
pub const RECORDS_STORE: &str = "records";

/// Name of the object store holding bookkeeping (the format version).
pub const META_STORE: &str = "meta";

/// Key of the format version in [`META_STORE`].
pub const FORMAT_KEY: &str = "format";

/// Key of the writer epoch in [`META_STORE`]: the last epoch claimed by [`IdbStore::take_over`] (absent
/// means 0).
pub const EPOCH_KEY: &str = "epoch";

/// The key in [`META_STORE`] of the marker of writer epoch `epoch` (present once it was claimed).
pub fn claim_key(epoch: u32) -> String {
    format!("claim/{epoch}")
}

/// The key in [`META_STORE`] of the fence record of the writer at `epoch` (module documentation,
/// *Fencing*).
pub fn writer_key(epoch: u32) -> String {
    format!("writer/{epoch}")
}

/// The unique index of [`META_STORE`] that fences stale writers, and the field of the values it indexes.
pub const WRITER_INDEX: &str = "writer";

#[wasm_bindgen]
extern "C" {
    /// An `IDBDatabase`, viewed through the bindings web-sys lacks on stable.
    type DbExt;

    /// `IDBDatabase.transaction(names, mode, options)`. web-sys only offers it behind
    /// `--cfg=web_sys_unstable_apis`; a plain options object works in every browser (unknown members are
    /// ignored where durability is not supported).
    #[wasm_bindgen(catch, method, js_name = transaction)]
    fn transaction_with_options(
        this: &DbExt,
        store_names: &JsValue,
        mode: IdbTransactionMode,
        options: &Object,
    ) -> Result<IdbTransaction, JsValue>;

    /// An `IDBObjectStore`, viewed through a binding of `createIndex` without web-sys's index features.
    type ObjectStoreExt;

    /// `IDBObjectStore.createIndex(name, keyPath, options)`, in a `versionchange` transaction.
    #[wasm_bindgen(catch, method, js_name = createIndex)]
    fn create_index(
        this: &ObjectStoreExt,
        name: &str,
        key_path: &str,
        options: &Object,
    ) -> Result<JsValue, JsValue>;

    /// An `IDBTransaction`, viewed through the bindings web-sys marks deprecated or lacks.
    type TxExt;

    /// `IDBTransaction.objectStore(name)` with a name made once (web-sys takes a `&str`, which makes a
    /// new JS string at every call).
    #[wasm_bindgen(catch, method, js_name = objectStore)]
    fn object_store_named(this: &TxExt, name: &JsValue) -> Result<IdbObjectStore, JsValue>;

    /// `IDBTransaction.commit()`: commit as soon as the issued requests are done. web-sys marks it
    /// deprecated; it is standard and absent only in old browsers (where the call fails harmlessly).
    #[wasm_bindgen(catch, method, js_name = commit)]
    fn commit_now(this: &TxExt) -> Result<(), JsValue>;
}

/// How hard a commit waits for the disk, IndexedDB's transaction `durability` hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The data is flushed to disk before the commit reports success. What the [`Store`] contract asks.
    #[default]
    Strict,
    /// The commit reports success once the browser has the data; a power loss or OS crash right after may
    /// lose it (a tab or browser crash does not). Faster.
    Relaxed,
    /// The browser's own default (relaxed in current Chromium).
    BrowserDefault,
}

impl Durability {
    fn as_str(self) -> Option<&'static str> {
        match self {
            Durability::Strict => Some("strict"),
            Durability::Relaxed => Some("relaxed"),
            Durability::BrowserDefault => None,
        }
    }
}

/// What the handlers of an [`IdbStore::open`] request found.
#[derive(Default)]
struct OpenFlags {
    /// The upgrade found a database that is not a queen-edge one (and aborted).
    foreign: Cell<bool>,
    /// The open failed as blocked; its request is still queued.
    gave_up: Cell<bool>,
}

/// Options for [`IdbStore::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdbOptions {
    /// Durability of commit transactions; [`Durability::Strict`] by default.
    pub durability: Durability,
}

/// A [`Store`] over one IndexedDB database. See the module documentation for the layout and guarantees.
///
/// Dropping it closes the connection.
pub struct IdbStore {
    db: IdbDatabase,
    name: String,
    options: IdbOptions,
    /// Set when the connection closed for another connection's upgrade or deletion, or was closed by the
    /// browser.
    closed: Rc<Cell<bool>>,
    /// The writer epoch this connection commits at (see the module documentation, *Fencing*).
    epoch: Cell<u32>,
    /// Set when a commit found a later epoch claimed: this connection may never write again.
    superseded: Cell<bool>,
    /// Keeps the `versionchange` and `close` handler alive while the connection is open.
    _on_versionchange: Closure<dyn FnMut(Event)>,
    /// The ends of this connection's `readwrite` transactions.
    ends: TxEnds,
    /// What every commit uses, made once (module documentation, *Transactions*).
    made: CommitValues,
}

/// The JS values of a commit that do not depend on its changes.
struct CommitValues {
    /// [`RECORDS_STORE`] and [`META_STORE`].
    records: JsValue,
    meta: JsValue,
    /// Both, the scope of a commit's transaction.
    scope: JsValue,
    /// `{durability}` of `readwrite` transactions (none for the browser's default).
    readwrite_options: Option<Object>,
    /// The epoch, key and value of the last fence record made ([`IdbStore::fence_of`]).
    fence: RefCell<Option<(u32, JsValue, JsValue)>>,
}

impl CommitValues {
    fn new(durability: Durability) -> Result<CommitValues, JsValue> {
        let records = JsValue::from_str(RECORDS_STORE);
        let meta = JsValue::from_str(META_STORE);
        let readwrite_options = match durability.as_str() {
            Some(durability) => {
                let options = Object::new();
                Reflect::set(&options, &"durability".into(), &durability.into())?;
                Some(options)
            }
            None => None,
        };
        Ok(CommitValues {
            scope: Array::of2(&records, &meta).into(),
            records,
            meta,
            readwrite_options,
            fence: RefCell::new(None),
        })
    }
}

impl std::fmt::Debug for IdbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdbStore")
            .field("name", &self.name)
            .field("options", &self.options)
            .field("closed", &self.closed.get())
            .field("epoch", &self.epoch.get())
            .field("superseded", &self.superseded.get())
            .finish()
    }
}

impl IdbStore {
    /// Opens the database `name`, creating it when it does not exist.
    ///
    /// Errors: [`StoreErrorKind::Unavailable`] when IndexedDB cannot be used here (no `indexedDB` global,
    /// a security error as in some private modes, storage disabled); [`StoreErrorKind::NewerFormat`] when
    /// the database was written by a newer build; [`StoreErrorKind::Other`] when `name` holds a database
    /// that is not a queen-edge one.
    pub async fn open(name: &str, options: IdbOptions) -> Result<IdbStore, StoreError> {
        let factory = factory()?;
        let request = factory
            .open_with_u32(name, SCHEMA_VERSION)
            .map_err(|e| open_error(name, &e))?;

        let flags = Rc::new(OpenFlags::default());
        let handler_flags = flags.clone();
        let upgrade_request = request.clone();
        // One handler for the request's `upgradeneeded`, the `success` of the format read inside that
        // upgrade (`create_schema`), and the request's `success` once this open gave up.
        let on_upgrade = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
            let upgrade = event.dyn_ref::<IdbVersionChangeEvent>();
            let outcome = if handler_flags.gave_up.get() {
                // The open failed as blocked but its request stays queued: its upgrade aborts (the
                // database is left as it was); a connection it opens anyway is closed.
                if upgrade.is_none() {
                    if let Ok(db) = upgrade_request.result() {
                        db.unchecked_into::<IdbDatabase>().close();
                    }
                    return;
                }
                Err(JsValue::from_str("blocked"))
            } else if let Some(upgrade) = upgrade {
                create_schema(
                    &upgrade_request,
                    upgrade.old_version(),
                    &handler_flags.foreign,
                )
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
                // Aborting the versionchange transaction makes the open request fail with this
                // error's effect (an AbortError), reported below.
                if let Some(tx) = upgrade_request.transaction() {
                    let _ = tx.abort();
                }
                web_sys::console::error_2(&"queen-edge: IndexedDB upgrade failed".into(), &e);
            }
        });
        request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
        let pending = Pending::new(&request);
        // A connection at an older schema version that does not close on `versionchange` blocks the
        // upgrade: fail now rather than wait for it (`blocked` settles `pending` as an error, while the
        // request itself stays pending, so reading its error throws).
        request.set_onblocked(request.onerror().as_ref());
        let opened = pending.finish().await;
        let refused = if opened.is_err() && request.error().is_err() {
            flags.gave_up.set(true);
            request.set_onsuccess(request.onupgradeneeded().as_ref());
            on_upgrade.forget();
            Some((
                StoreErrorKind::Unavailable,
                "IndexedDB: the database is held open at an older version by another tab or worker; \
                 close it and retry",
            ))
        } else {
            request.set_onupgradeneeded(None);
            drop(on_upgrade);
            flags.foreign.get().then_some((
                StoreErrorKind::Other,
                "IndexedDB: the database is not a queen-edge database",
            ))
        };
        if let Some((kind, why)) = refused {
            return Err(StoreError::new(kind, why));
        }
        let db: IdbDatabase = opened
            .map_err(|e| open_error(name, &e))?
            .dyn_into()
            .map_err(|_| StoreError::other("indexedDB.open did not produce a database"))?;

        let closed = Rc::new(Cell::new(false));
        let closed_flag = closed.clone();
        let on_versionchange = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
            if let Some(db) = event
                .target()
                .and_then(|t| t.dyn_into::<IdbDatabase>().ok())
            {
                db.close();
            }
            closed_flag.set(true);
        });
        db.set_onversionchange(Some(on_versionchange.as_ref().unchecked_ref()));
        // `close` fires when the browser closes the connection itself (site data cleared, disk error).
        db.set_onclose(Some(on_versionchange.as_ref().unchecked_ref()));

        let made = CommitValues::new(options.durability)
            .map_err(|e| js_store_error(StoreErrorKind::Other, "transaction options", &e))?;
        let store = IdbStore {
            db,
            name: name.to_string(),
            options,
            closed,
            epoch: Cell::new(0),
            superseded: Cell::new(false),
            _on_versionchange: on_versionchange,
            ends: TxEnds::new(),
            made,
        };
        store.check_format().await?;
        Ok(store)
    }

    /// Deletes the database `name` and everything in it. Open [`IdbStore`]s over it close themselves.
    pub async fn delete_database(name: &str) -> Result<(), StoreError> {
        let factory = factory()?;
        let request = factory
            .delete_database(name)
            .map_err(|e| js_store_error(StoreErrorKind::Unavailable, "deleteDatabase", &e))?;
        Pending::new(&request)
            .finish()
            .await
            .map_err(|e| js_store_error(StoreErrorKind::Other, "deleteDatabase", &e))?;
        Ok(())
    }

    /// The database name this store was opened with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options this store was opened with.
    pub fn options(&self) -> IdbOptions {
        self.options
    }

    /// The writer epoch this connection commits at: the one current when it opened, or the one its last
    /// [`IdbStore::take_over`] claimed.
    pub fn epoch(&self) -> u32 {
        self.epoch.get()
    }

    /// True once a commit found that another connection took over (claimed a later epoch): every later
    /// commit fails with [`StoreErrorKind::Unavailable`]. Only a new [`IdbStore::take_over`] clears it.
    pub fn is_superseded(&self) -> bool {
        self.superseded.get()
    }

    /// Makes this connection the writer: claims the epoch after the current one, so every other
    /// connection's commits fail from now on (module documentation, *Fencing*). Returns the new epoch.
    ///
    /// Commits of other connections that started before the claim are ordered before it by IndexedDB, so a
    /// scan after `take_over` sees everything any earlier writer committed. Call it before loading.
    pub async fn take_over(&self) -> Result<u32, StoreError> {
        let fail =
            |e: JsValue| js_store_error(StoreErrorKind::Other, "claiming the writer epoch", &e);
        // Another connection claiming between our read and our claim makes the claim fail; read again.
        for _ in 0..16 {
            let current = self.read_epoch().await?;
            let next = current.saturating_add(1);
            let tx = self.transaction(&META_STORE.into(), IdbTransactionMode::Readwrite)?;
            let done = self.ends.watch(&tx);
            let meta = object_store(&tx, META_STORE)?;
            // The marker holds `current` in the fence index: the writer at `current` can never put its
            // fence record again (module documentation, *Fencing*).
            let issued = fence_value(current)
                .and_then(|marker| {
                    meta.delete(&writer_key(current).into())?;
                    meta.add_with_key(&marker, &claim_key(next).into())
                })
                .and_then(|_| meta.put_with_key(&next.into(), &EPOCH_KEY.into()));
            if let Err(e) = issued {
                let _ = tx.abort();
                return Err(fail(e));
            }
            let _ = tx.unchecked_ref::<TxExt>().commit_now();
            match done.await {
                Ok(()) => {
                    self.epoch.set(next);
                    self.superseded.set(false);
                    return Ok(next);
                }
                Err(e) if describe(&e).0 == "ConstraintError" => continue,
                Err(e) => return Err(fail(e)),
            }
        }
        Err(StoreError::new(
            StoreErrorKind::Unavailable,
            format!(
                "IndexedDB database \"{}\": could not claim the writer epoch",
                self.name
            ),
        ))
    }

    /// Reads `meta/epoch` (0 when absent).
    async fn read_epoch(&self) -> Result<u32, StoreError> {
        let fail =
            |e: JsValue| js_store_error(StoreErrorKind::Other, "reading the writer epoch", &e);
        let tx = self.transaction(&META_STORE.into(), IdbTransactionMode::Readonly)?;
        let meta = object_store(&tx, META_STORE)?;
        let request = meta.get(&EPOCH_KEY.into()).map_err(fail)?;
        let value = Pending::new(&request).finish().await.map_err(fail)?;
        Ok(value.as_f64().unwrap_or(0.0) as u32)
    }

    /// Reads `meta/format` and refuses data from a newer build; reads the current writer epoch.
    async fn check_format(&self) -> Result<(), StoreError> {
        let fail =
            |e: JsValue| js_store_error(StoreErrorKind::Other, "reading the format version", &e);
        let tx = self.transaction(&META_STORE.into(), IdbTransactionMode::Readonly)?;
        let meta = object_store(&tx, META_STORE)?;
        let request = meta.get(&FORMAT_KEY.into()).map_err(fail)?;
        let epoch = meta.get(&EPOCH_KEY.into()).map_err(fail)?;
        let value = Pending::new(&request);
        let epoch = Pending::new(&epoch);
        let value = value.finish().await.map_err(fail)?;
        self.epoch
            .set(epoch.finish().await.map_err(fail)?.as_f64().unwrap_or(0.0) as u32);
        match value.as_f64() {
            Some(v) if v <= f64::from(FORMAT_VERSION) => Ok(()),
            // Versions are small integers; printed as one (formatting an f64 costs ~14 KB of wasm).
            Some(v) => Err(StoreError::new(
                StoreErrorKind::NewerFormat,
                format!(
                    "IndexedDB database \"{}\" holds data in format version {}, written by a newer \
                     queen-edge; this build understands format version {FORMAT_VERSION} at most. Update \
                     this page or worker (or delete the database to start over).",
                    self.name, v as i64
                ),
            )),
            None => Err(StoreError::other(format!(
                "IndexedDB database \"{}\" has no format version: it is not a queen-edge database",
                self.name
            ))),
        }
    }

    /// A transaction over `store_names` (one name, or an array of names).
    fn transaction(
        &self,
        store_names: &JsValue,
        mode: IdbTransactionMode,
    ) -> Result<IdbTransaction, StoreError> {
        if self.closed.get() {
            return Err(self.closed_error());
        }
        let tx = match (mode, &self.made.readwrite_options) {
            (IdbTransactionMode::Readwrite, Some(options)) => self
                .db
                .unchecked_ref::<DbExt>()
                .transaction_with_options(store_names, mode, options),
            _ => self
                .db
                .transaction_with_str_sequence_and_mode(store_names, mode),
        };
        tx.map_err(|e| {
            if self.closed.get() {
                self.closed_error()
            } else {
                js_store_error(kind_for_commit(&e), "starting a transaction", &e)
            }
        })
    }

    fn superseded_error(&self) -> StoreError {
        StoreError::new(
            StoreErrorKind::Unavailable,
            format!(
                "IndexedDB database \"{}\": another tab or worker took over (epoch {} is stale); nothing \
                 of this commit was written",
                self.name,
                self.epoch.get()
            ),
        )
    }

    fn closed_error(&self) -> StoreError {
        StoreError::new(
            StoreErrorKind::Unavailable,
            format!(
                "IndexedDB database \"{}\" was closed (another connection is upgrading or deleting it, or \
                 the browser closed it); reopen it",
                self.name
            ),
        )
    }
}

impl Drop for IdbStore {
    fn drop(&mut self) {
        self.db.set_onversionchange(None);
        self.db.set_onclose(None);
        self.db.close();
    }
}

impl Store for IdbStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        let tx = self.transaction(&RECORDS_STORE.into(), IdbTransactionMode::Readonly)?;
        let records = object_store(&tx, RECORDS_STORE)?;
        let fail = |e: JsValue| js_store_error(StoreErrorKind::Other, "scan", &e);
        // Issue both requests before awaiting either.
        let (keys, values) = match prefix_range(prefix).map_err(fail)? {
            Some(range) => (
                records.get_all_keys_with_key(&range).map_err(fail)?,
                records.get_all_with_key(&range).map_err(fail)?,
            ),
            None => (
                records.get_all_keys().map_err(fail)?,
                records.get_all().map_err(fail)?,
            ),
        };
        let keys = Pending::new(&keys);
        let values = Pending::new(&values);
        let keys: Array = keys.finish().await.map_err(fail)?.unchecked_into();
        let values: Array = values.finish().await.map_err(fail)?.unchecked_into();
        if keys.length() != values.length() {
            return Err(StoreError::other(format!(
                "scan: {} keys but {} values",
                keys.length(),
                values.length()
            )));
        }
        let mut out = Vec::with_capacity(keys.length() as usize);
        for (key, value) in keys.iter().zip(values.iter()) {
            let key = key.as_string().ok_or_else(|| {
                StoreError::other("scan: a key in the records store is not a string")
            })?;
            let value = value.dyn_into::<Uint8Array>().map_err(|_| {
                StoreError::other(format!("scan: the value of \"{key}\" is not a Uint8Array"))
            })?;
            out.push((key, value.to_vec()));
        }
        // IndexedDB sorts by UTF-16 code units; the contract is UTF-8 byte order (see module docs).
        crate::core::sort::sort_by(&mut out, |a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.transaction(&RECORDS_STORE.into(), IdbTransactionMode::Readonly)?;
        let records = object_store(&tx, RECORDS_STORE)?;
        let fail = |e: JsValue| js_store_error(StoreErrorKind::Other, "get", &e);
        // Every request is issued before the first await: one transaction, one consistent read.
        let pending = keys
            .iter()
            .map(|key| {
                records
                    .get(&JsValue::from_str(key))
                    .map(|request| Pending::new(&request))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let mut out = Vec::with_capacity(keys.len());
        for (key, request) in keys.iter().zip(pending) {
            let value = request.finish().await.map_err(fail)?;
            if value.is_undefined() {
                out.push(None);
                continue;
            }
            let value = value.dyn_into::<Uint8Array>().map_err(|_| {
                StoreError::other(format!("get: the value of \"{key}\" is not a Uint8Array"))
            })?;
            out.push(Some(value.to_vec()));
        }
        Ok(out)
    }

    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.transaction(&RECORDS_STORE.into(), IdbTransactionMode::Readonly)?;
        let records = object_store(&tx, RECORDS_STORE)?;
        let fail = |e: JsValue| js_store_error(StoreErrorKind::Other, "first_keys", &e);
        // Every request is issued before the first await: one transaction, one consistent read.
        let mut pending = Vec::with_capacity(ranges.len());
        for range in ranges {
            let request = match from_range(range).map_err(fail)? {
                Some(bound) => Some(Pending::new(&records.get_key(&bound).map_err(fail)?)),
                None => None,
            };
            pending.push(request);
        }
        let mut out = Vec::with_capacity(ranges.len());
        for (range, request) in ranges.iter().zip(pending) {
            let Some(request) = request else {
                out.push(None);
                continue;
            };
            let key = request.finish().await.map_err(fail)?;
            let key = match key.is_undefined() {
                true => None,
                false => Some(key.as_string().ok_or_else(|| {
                    StoreError::other("first_keys: a key in the records store is not a string")
                })?),
            };
            // Byte order and UTF-16 order agree here (module documentation, "Key order").
            if below_surrogates(&range.from) && key.as_deref().is_none_or(below_surrogates) {
                out.push(key);
            } else {
                let mut keys = self.scan(&range.prefix).await?.into_iter().map(|(k, _)| k);
                out.push(keys.find(|k| *k >= range.from));
            }
        }
        Ok(out)
    }

    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let issued = self.issue_commit(changes, &[], "")?;
        self.finish_commit(issued).await
    }
}

impl IdbStore {
    /// [`Store::commit`], and in the same transaction (so all or nothing is written) `records`: each
    /// `(key, value)` puts `value` at `key` in [`META_STORE`], after deleting the meta keys from `key`'s
    /// prefix (up to its first `/`) up to `prune_below` (exclusive). For the answers of recorded
    /// requests (src/bindings: a request retried after its writer died is answered from the record).
    /// With neither changes nor records, nothing is written.
    pub async fn commit_recording(
        &self,
        changes: &ChangeSet,
        records: &[(String, JsValue)],
        prune_below: &str,
    ) -> Result<(), StoreError> {
        if changes.is_empty() && records.is_empty() {
            return Ok(());
        }
        let issued = self.issue_commit(changes, records, prune_below)?;
        self.finish_commit(issued).await
    }

    /// The synchronous half of [`IdbStore::commit_recording`] (without its shortcut for nothing to
    /// write): creates the transaction and issues every request before returning, so IndexedDB orders
    /// this commit before any transaction created later. [`IdbStore::finish_commit`] awaits its outcome.
    fn issue_commit(
        &self,
        changes: &ChangeSet,
        records: &[(String, JsValue)],
        prune_below: &str,
    ) -> Result<IssuedCommit, StoreError> {
        if self.superseded.get() {
            return Err(self.superseded_error());
        }
        let tx = self.transaction(&self.made.scope, IdbTransactionMode::Readwrite)?;
        let done = self.ends.watch(&tx);
        let ext = tx.unchecked_ref::<TxExt>();
        // Every request is issued here, synchronously: no await until the transaction is complete. The
        // fence first (module documentation, *Fencing*): it aborts the whole transaction if a later epoch
        // was claimed.
        let issued = self
            .fence_of(self.epoch.get())
            .and_then(|(key, value)| {
                ext.object_store_named(&self.made.meta)?
                    .put_with_key(&value, &key)
            })
            .and_then(|_| issue_changes(&ext.object_store_named(&self.made.records)?, changes))
            .and_then(|()| issue_records(&tx, records, prune_below));
        if let Err(e) = issued {
            let _ = tx.abort();
            return Err(js_store_error(kind_for_commit(&e), "commit", &e));
        }
        // Lets the browser commit without waiting for the end of the task; harmless where unsupported.
        let _ = ext.commit_now();
        Ok(IssuedCommit(done))
    }

    /// The key and value of the fence record of a commit at `epoch` (`meta/writer/<epoch>` =
    /// `{writer: epoch}`), made once per epoch: IndexedDB copies a value when it is put, so one object
    /// serves every commit.
    fn fence_of(&self, epoch: u32) -> Result<(JsValue, JsValue), JsValue> {
        let mut made = self.made.fence.borrow_mut();
        if let Some((_, key, value)) = made.as_ref().filter(|(at, _, _)| *at == epoch) {
            return Ok((key.clone(), value.clone()));
        }
        let (key, value): (JsValue, JsValue) = (writer_key(epoch).into(), fence_value(epoch)?);
        *made = Some((epoch, key.clone(), value.clone()));
        Ok((key, value))
    }

    /// Waits for the end of a commit issued by [`IdbStore::issue_commit`] on this store.
    async fn finish_commit(&self, issued: IssuedCommit) -> Result<(), StoreError> {
        issued.0.await.map_err(|e| {
            if self.closed.get() {
                self.closed_error()
            } else if describe(&e).0 == "ConstraintError" {
                // Only the fence record's put can fail this way (the unique `writer` index).
                self.superseded.set(true);
                self.superseded_error()
            } else {
                js_store_error(kind_for_commit(&e), "commit", &e)
            }
        })
    }

    /// The value at `key` in [`META_STORE`] (`undefined` when absent).
    pub async fn read_meta(&self, key: &str) -> Result<JsValue, StoreError> {
        let fail = |e: JsValue| js_store_error(StoreErrorKind::Other, "reading meta", &e);
        let tx = self.transaction(&META_STORE.into(), IdbTransactionMode::Readonly)?;
        let request = object_store(&tx, META_STORE)?
            .get(&key.into())
            .map_err(fail)?;
        Pending::new(&request).finish().await.map_err(fail)
    }
}

/// Asks the browser to make this origin's storage persistent (`navigator.storage.persist()`), so it is
/// not evicted under storage pressure. Returns the browser's answer.
///
/// Errors with [`StoreErrorKind::Unavailable`] where the API does not exist (it is exposed to windows
/// only, not to workers, and not in insecure contexts).
pub async fn persist() -> Result<bool, StoreError> {
    let unavailable = |what: &str| {
        StoreError::new(
            StoreErrorKind::Unavailable,
            format!("navigator.storage.persist() is not available here ({what})"),
        )
    };
    let global = js_sys::global();
    let navigator =
        Reflect::get(&global, &"navigator".into()).map_err(|_| unavailable("no navigator"))?;
    if navigator.is_undefined() || navigator.is_null() {
        return Err(unavailable("no navigator"));
    }
    let storage = Reflect::get(&navigator, &"storage".into())
        .map_err(|_| unavailable("no navigator.storage"))?;
    if storage.is_undefined() || storage.is_null() {
        return Err(unavailable("no navigator.storage"));
    }
    let persist: Function = Reflect::get(&storage, &"persist".into())
        .ok()
        .and_then(|f| f.dyn_into().ok())
        .ok_or_else(|| unavailable("no navigator.storage.persist"))?;
    let promise: Promise = persist
        .call0(&storage)
        .map_err(|e| {
            js_store_error(
                StoreErrorKind::Unavailable,
                "navigator.storage.persist()",
                &e,
            )
        })?
        .dyn_into()
        .map_err(|_| StoreError::other("navigator.storage.persist() did not return a promise"))?;
    let answer = JsFuture::from(promise)
        .await
        .map_err(|e| js_store_error(StoreErrorKind::Other, "navigator.storage.persist()", &e))?;
    Ok(answer.as_bool().unwrap_or(false))
}

/// The `indexedDB` factory of the current global (window or any worker), or `Unavailable`.
fn factory() -> Result<IdbFactory, StoreError> {
    let global = js_sys::global();
    // Reading the property itself throws a SecurityError in some sandboxed or private contexts.
    let value = Reflect::get(&global, &"indexedDB".into())
        .map_err(|e| js_store_error(StoreErrorKind::Unavailable, "accessing indexedDB", &e))?;
    if value.is_undefined() || value.is_null() {
        return Err(StoreError::new(
            StoreErrorKind::Unavailable,
            "IndexedDB is not available in this context (no indexedDB global)",
        ));
    }
    value.dyn_into().map_err(|_| {
        StoreError::new(
            StoreErrorKind::Unavailable,
            "the indexedDB global is not an IDBFactory",
        )
    })
}

/// Creates what `old_version` lacks inside the `versionchange` transaction: the object stores and the
/// format record (version 1), the fence index (version 2). Upgrading a version 1 database that lacks our
/// object stores fails and sets `foreign`; its `meta/format` is read by a request of this transaction
/// whose `success` goes to the request's `upgradeneeded` handler, which aborts the upgrade (and sets
/// `foreign`) when it is not a number.
fn create_schema(
    request: &IdbOpenDbRequest,
    old_version: f64,
    foreign: &Cell<bool>,
) -> Result<(), JsValue> {
    let meta = if old_version < 1.0 {
        let db: IdbDatabase = request.result()?.dyn_into()?;
        db.create_object_store(RECORDS_STORE)?;
        let meta = db.create_object_store(META_STORE)?;
        meta.put_with_key(
            &JsValue::from(FORMAT_VERSION),
            &JsValue::from_str(FORMAT_KEY),
        )?;
        meta
    } else {
        let tx = request
            .transaction()
            .ok_or_else(|| JsValue::from_str("no versionchange transaction"))?;
        let (Ok(_), Ok(meta)) = (tx.object_store(RECORDS_STORE), tx.object_store(META_STORE))
        else {
            foreign.set(true);
            return Err(JsValue::from_str("not a queen-edge database"));
        };
        // Checked by the open request's own handler, which aborts the upgrade when it is not a number.
        let format = meta.get(&FORMAT_KEY.into())?;
        format.set_onsuccess(request.onupgradeneeded().as_ref());
        meta
    };
    if old_version < 2.0 {
        let options = Object::new();
        Reflect::set(&options, &"unique".into(), &JsValue::TRUE)?;
        meta.unchecked_ref::<ObjectStoreExt>().create_index(
            WRITER_INDEX,
            WRITER_INDEX,
            &options,
        )?;
    }
    Ok(())
}

/// `{writer: epoch}`: the value of a fence record or claim marker that takes `epoch`'s place in the
/// unique `writer` index.
fn fence_value(epoch: u32) -> Result<JsValue, JsValue> {
    let value = Object::new();
    Reflect::set(&value, &WRITER_INDEX.into(), &epoch.into())?;
    Ok(value.into())
}

fn object_store(tx: &IdbTransaction, name: &str) -> Result<IdbObjectStore, StoreError> {
    tx.object_store(name).map_err(|e| {
        js_store_error(
            StoreErrorKind::Other,
            &format!("opening object store \"{name}\" (not a queen-edge database?)"),
            &e,
        )
    })
}

/// Issues the records of [`IdbStore::commit_recording`]: for each, deletes the meta keys in
/// `[prefix, prune_below)`, where `prefix` is its key up to and including the first `/` (nothing when it
/// has none; once per prefix), then puts its value at its key.
fn issue_records(
    tx: &IdbTransaction,
    records: &[(String, JsValue)],
    prune_below: &str,
) -> Result<(), JsValue> {
    if records.is_empty() {
        return Ok(());
    }
    let meta = tx.object_store(META_STORE)?;
    let mut pruned: Vec<&str> = Vec::new();
    for (key, value) in records {
        let prefix = key.find('/').map(|i| &key[..=i]);
        if let Some(prefix) = prefix.filter(|p| *p < prune_below && !pruned.contains(p)) {
            let range = IdbKeyRange::bound_with_lower_open_and_upper_open(
                &prefix.into(),
                &prune_below.into(),
                false,
                true,
            )?;
            meta.delete(&range)?;
            pruned.push(prefix);
        }
        meta.put_with_key(value, &key.into())?;
    }
    Ok(())
}

/// Issues one request per put and delete in `records`. Any synchronous failure is returned; the caller
/// aborts.
fn issue_changes(records: &IdbObjectStore, changes: &ChangeSet) -> Result<(), JsValue> {
    for key in changes.deletes() {
        records.delete(&JsValue::from_str(key))?;
    }
    for (key, value) in changes.puts() {
        // `from` copies the bytes out of wasm memory into a buffer of exactly this length.
        let bytes = Uint8Array::from(value.as_slice());
        records.put_with_key(&bytes, &JsValue::from_str(key))?;
    }
    Ok(())
}

/// The key range of all strings starting with `prefix` in IndexedDB (UTF-16 code unit) order, or `None`
/// for everything.
fn prefix_range(prefix: &str) -> Result<Option<IdbKeyRange>, JsValue> {
    if prefix.is_empty() {
        return Ok(None);
    }
    bounded(prefix, prefix).map(Some)
}

/// The IndexedDB key range of the keys of `range` that start at `range.from` or at its prefix, whichever
/// is later (in byte order, which is IndexedDB's for strings below U+D800), or `None` when no key can be
/// in it (`from` after every key that starts with the prefix).
fn from_range(range: &KeyRange) -> Result<Option<IdbKeyRange>, JsValue> {
    let (prefix, from) = (range.prefix.as_str(), range.from.as_str());
    if from > prefix && !from.starts_with(prefix) {
        return Ok(None);
    }
    bounded(from.max(prefix), prefix).map(Some)
}

/// The keys from `lower` on that start with `prefix` (which `lower` starts with). Upper bound: the prefix
/// with trailing U+FFFF units dropped and its last unit incremented, exclusive; none when nothing is left.
fn bounded(lower: &str, prefix: &str) -> Result<IdbKeyRange, JsValue> {
    let mut units: Vec<u16> = prefix.encode_utf16().collect();
    while units.last() == Some(&0xFFFF) {
        units.pop();
    }
    let lower = JsValue::from_str(lower);
    match units.last_mut() {
        None => IdbKeyRange::lower_bound(&lower),
        Some(last) => {
            *last += 1;
            // May hold a lone surrogate, which JS strings allow and Rust strings do not.
            let upper: JsValue = JsString::from_char_code(&units).into();
            IdbKeyRange::bound_with_lower_open_and_upper_open(&lower, &upper, false, true)
        }
    }
}

/// True when every character of `key` is below U+D800, where UTF-16 order and byte order agree.
fn below_surrogates(key: &str) -> bool {
    key.chars().all(|c| (c as u32) < 0xD800)
}

/// A request with its `success`/`error` handlers attached at creation, so no event can be missed.
struct Pending {
    request: IdbRequest,
    settled: JsFuture,
}

impl Pending {
    fn new(request: &IdbRequest) -> Pending {
        let promise = Promise::new(&mut |resolve, reject| {
            request.set_onsuccess(Some(&resolve));
            request.set_onerror(Some(&reject));
        });
        Pending {
            request: request.clone(),
            settled: JsFuture::from(promise),
        }
    }

    /// The request's result, or its error (a `DOMException`).
    async fn finish(self) -> Result<JsValue, JsValue> {
        let outcome = self.settled.await;
        self.request.set_onsuccess(None);
        self.request.set_onerror(None);
        match outcome {
            Ok(_) => self.request.result(),
            Err(event) => Err(self
                .request
                .error()
                .ok()
                .flatten()
                .map(JsValue::from)
                .unwrap_or(event)),
        }
    }
}

/// A commit whose requests are all issued: [`IdbStore::issue_commit`].
struct IssuedCommit(TxEnd);

/// The `name` and `message` of a thrown value (a `DOMException`, an `Error`, or anything else).
fn describe(e: &JsValue) -> (String, String) {
    let field = |f: &str| {
        Reflect::get(e, &f.into())
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default()
    };
    let (name, message) = (field("name"), field("message"));
    if name.is_empty() && message.is_empty() {
        (
            String::new(),
            // JSON rather than `{:?}`: a JsValue's Debug pulls a large formatter into the glue.
            e.as_string()
                .or_else(|| js_sys::JSON::stringify(e).ok().and_then(|s| s.as_string()))
                .unwrap_or_else(|| "a thrown value that is not an Error".to_string()),
        )
    } else {
        (name, message)
    }
}

/// The kind of a failure during a commit (or any transaction), from the error's name.
fn kind_for_commit(e: &JsValue) -> StoreErrorKind {
    kind_for_name(&describe(e).0, StoreErrorKind::Other)
}

/// Maps a `DOMException` name to a kind; `fallback` for names without a special meaning.
fn kind_for_name(name: &str, fallback: StoreErrorKind) -> StoreErrorKind {
    match name {
        "QuotaExceededError" => StoreErrorKind::QuotaExceeded,
        "VersionError" => StoreErrorKind::NewerFormat,
        "SecurityError" => StoreErrorKind::Unavailable,
        _ => fallback,
    }
}

fn js_store_error(kind: StoreErrorKind, what: &str, e: &JsValue) -> StoreError {
    let (name, message) = describe(e);
    let kind = kind_for_name(&name, kind);
    StoreError::new(kind, format!("IndexedDB {what} failed: {name}: {message}"))
}

/// An error while opening: a `VersionError` means a newer build upgraded the schema; anything else means
/// IndexedDB cannot be used here (private mode, storage disabled, a broken profile).
fn open_error(name: &str, e: &JsValue) -> StoreError {
    let (error_name, message) = describe(e);
    match kind_for_name(&error_name, StoreErrorKind::Unavailable) {
        StoreErrorKind::NewerFormat => StoreError::new(
            StoreErrorKind::NewerFormat,
            format!(
                "IndexedDB database \"{name}\" has a newer schema than this build's version \
                 {SCHEMA_VERSION} ({message}); it was written by a newer queen-edge. Update this page or \
                 worker (or delete the database to start over)."
            ),
        ),
        kind => StoreError::new(
            kind,
            format!("IndexedDB database \"{name}\" cannot be opened: {error_name}: {message}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    #[wasm_bindgen_test]
    fn error_names_map_to_kinds() {
        use StoreErrorKind::*;
        assert_eq!(kind_for_name("QuotaExceededError", Other), QuotaExceeded);
        assert_eq!(kind_for_name("VersionError", Unavailable), NewerFormat);
        assert_eq!(kind_for_name("SecurityError", Other), Unavailable);
        assert_eq!(kind_for_name("AbortError", Other), Other);
        assert_eq!(kind_for_name("InvalidStateError", Unavailable), Unavailable);
    }

    #[wasm_bindgen_test]
    fn describe_reads_dom_exceptions_and_strings() {
        let e = web_sys::DomException::new_with_message_and_name("full", "QuotaExceededError")
            .expect("DOMException constructor exists in browsers and node 17+");
        assert_eq!(
            describe(&e.into()),
            ("QuotaExceededError".to_string(), "full".to_string())
        );
        assert_eq!(
            describe(&JsValue::from_str("boom")),
            (String::new(), "boom".to_string())
        );
    }
}
