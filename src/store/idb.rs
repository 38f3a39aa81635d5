//! [`IdbStore`]: the IndexedDB [`Store`], for the broker in a page or in a dedicated, shared or service
//! worker (wasm32 only).
//!
//! # Layout
//!
//! One database per broker, named by the caller, with two object stores:
//! - `records`: the [`Store`]'s records, out-of-line string keys, each value a `Uint8Array`;
//! - `meta`: bookkeeping that must not show up in a scan: `format`, the format version (a number) of the
//!   data in `records`; `req/<id>`, the answers of recorded requests ([`IdbStore::commit_recording`]).
//!
//! Two version numbers guard against a build reading data it does not understand:
//! - the IndexedDB version. From [`SCHEMA_VERSION`] (3) on it is the writer epoch (see *Fencing*), not a
//!   schema number: a database created by this build starts at 3, and opening a database of schema 1 or
//!   2 (earlier builds) upgrades it to 3, keeping every record and recorded answer and dropping the
//!   earlier fence's bookkeeping (the `writer` index, `epoch`, `claim/<n>` and `writer/<n>` in `meta`).
//!   Builds of schema 1 or 2 open at their own version and so get a `VersionError` from IndexedDB on
//!   such a database: they report it as written by a newer queen-edge. A later build that changes object
//!   stores or indexes must say so in `meta` (a new `format`), since the version no longer can;
//! - the format version ([`FORMAT_VERSION`]) in `meta/format`, bumped when the meaning of records changes.
//!
//! A newer format makes [`IdbStore::open`] fail with [`StoreErrorKind::NewerFormat`].
//!
//! # Transactions
//!
//! [`Store::commit`] runs one `readwrite` transaction per [`ChangeSet`]: every `put` and `delete` request
//! is issued synchronously, before the first `await`, so the transaction cannot auto-commit half way; then
//! it awaits the transaction's `complete` event. An `abort` (a failed request, quota, a closed connection)
//! is an `Err` and nothing of the change set is visible. Durability is `strict` by default (the data is
//! flushed to disk before `complete`); [`Durability::Relaxed`] trades that for speed. A commit carries
//! only its own requests, in scope `records` (and `meta` when it records answers).
//!
//! A connection makes what every commit needs once, when it opens: the `complete` and `abort` handlers
//! that wake the task awaiting a transaction (module `ends`), the commit's scopes and options, the object
//! store names. A commit then only makes its own requests' keys and values.
//!
//! # Fencing
//!
//! Only one connection may write a database at a time; across tabs the JS wrapper elects it (Web Locks, or
//! without them through this fence), and the fence makes the rule hold in storage even when two contexts
//! both believe they are the writer. The writer epoch is the database's IndexedDB version.
//! [`IdbStore::take_over`] claims the next one: it closes its own connection and opens the database at
//! its version + 1. IndexedDB then sends every other connection a `versionchange` event and runs the
//! upgrade only once all of them are closed; connections of this module close themselves on it
//! ([`IdbStore`]'s `versionchange` handler) and mark themselves [superseded](IdbStore::is_superseded).
//! So once the upgrade runs no connection of an earlier epoch is open, and none can ever start a
//! transaction again: a stale writer's commit fails before it issues anything
//! ([`StoreErrorKind::Unavailable`], nothing of it written), and a connection never reopens by itself
//! (only a new `take_over` opens again). Commits a stale connection issued before it closed run to their
//! end first (closing waits for them), so they are ordered before the upgrade and a load after
//! `take_over` reads them. A claim knows it won by its own `upgradeneeded`: when another connection
//! claimed the same version first, the open succeeds without one (or fails with a `VersionError` when the
//! database is already further on), and `take_over` claims the next version from the one it now sees.
//! There is no request per commit: the check is IndexedDB's own ordering of version changes.
//!
//! Liveness: a connection that does not close on `versionchange` (an older build's page, page code or
//! DevTools holding its own connection, a frozen page) blocks the claim. IndexedDB then fires `blocked`
//! on the open request and the claim waits, for as long as it takes, with no write lost or doubled: the
//! blocking connection still commits (it is the only one open at the earlier epoch) and the claim runs
//! once it closes. The `on_blocked` callback of [`IdbStore::open_observed`] is called with `true` when
//! that happens and with `false` once the open went through, so the caller can say so. It sees only the
//! `blocked` event of this store's own request: an open that IndexedDB queues behind another context's
//! held-back claim waits as long with no event, and nothing here can tell (the JS wrapper passes the other
//! context's report on over its channel). A connection that
//! never calls `take_over` writes at the epoch current when it opened, until the next claim.
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
//! When another connection upgrades (claims) or deletes the database ([`IdbStore::delete_database`]), this
//! connection closes itself so it does not block them; later calls fail with
//! [`StoreErrorKind::Unavailable`] (after a claim: [`IdbStore::is_superseded`]).
//!
//! Opening asks for version 3 ([`SCHEMA_VERSION`]); on a database already past it (`VersionError`) it
//! opens at the current version, with no version given. Upgrading a database of schema 1 or 2 checks that
//! it has queen-edge's object stores and a number at `meta/format` inside the upgrade, and aborts
//! otherwise: someone else's database is refused with [`StoreErrorKind::Other`] and left at its version.

mod ends;
mod opening;

use super::{ChangeSet, KeyRange, Record, Store, StoreError, StoreErrorKind};
use ends::{TxEnd, TxEnds};
use js_sys::{Array, Function, JsString, Object, Promise, Reflect, Uint8Array};
use opening::{open_at, Opened};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    Event, IdbDatabase, IdbFactory, IdbKeyRange, IdbObjectStore, IdbRequest, IdbTransaction,
    IdbTransactionMode, IdbVersionChangeEvent,
};

/// The IndexedDB version this build opens a database at, creating it or upgrading one of schema 1 or 2
/// to it: the first whose version is the writer epoch (module documentation, *Fencing*).
pub const SCHEMA_VERSION: u32 = 3;

/// The format version of the records this build writes and understands.
pub const FORMAT_VERSION: u32 = 1;

/// Name of the object store holding the records.
pub const RECORDS_STORE: &str = "records";

/// Name of the object store holding bookkeeping (the format version).
pub const META_STORE: &str = "meta";

/// Key of the format version in [`META_STORE`].
pub const FORMAT_KEY: &str = "format";

/// Schema 1 and 2's key of the writer epoch in [`META_STORE`], dropped by the upgrade to schema 3.
pub const EPOCH_KEY: &str = "epoch";

/// Schema 1 and 2's unique index of [`META_STORE`] (schema 2's fence), dropped by the upgrade to 3.
pub const WRITER_INDEX: &str = "writer";

/// The key prefixes in [`META_STORE`] of schema 1 and 2's claim markers and fence records, dropped by the
/// upgrade to schema 3.
pub const LEGACY_FENCE_PREFIXES: [&str; 2] = ["claim/", "writer/"];

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

/// A store's [`IdbStore::is_superseded`], shared: it reads the store's own flag, so it answers the same
/// as the store, also once the store is gone.
#[derive(Clone, Debug)]
pub struct SupersededFlag(Rc<Cell<bool>>);

impl SupersededFlag {
    /// True once another connection took over the store's database.
    pub fn get(&self) -> bool {
        self.0.get()
    }
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
    /// The connection; replaced by [`IdbStore::take_over`].
    db: RefCell<IdbDatabase>,
    name: String,
    options: IdbOptions,
    /// Set when the connection closed for another connection's claim or deletion, or was closed by the
    /// browser (or by `take_over`, until its new connection is in place).
    closed: Rc<Cell<bool>>,
    /// Set when the connection closed for another connection's claim (a `versionchange` to a version):
    /// this store may never write again unless it claims.
    superseded: Rc<Cell<bool>>,
    /// Called with `true` when an open or claim waits for a connection that does not close, and with
    /// `false` when it went through ([`IdbStore::open_observed`]).
    on_blocked: Option<Function>,
    /// The `versionchange` and `close` handler of every connection this store opens.
    on_versionchange: Closure<dyn FnMut(Event)>,
    /// The ends of this connection's `readwrite` transactions.
    ends: TxEnds,
    /// What every commit uses, made once (module documentation, *Transactions*).
    made: CommitValues,
}

/// The JS values of a commit that do not depend on its changes.
struct CommitValues {
    /// [`RECORDS_STORE`], the scope of a commit without recorded answers.
    records: JsValue,
    /// [`RECORDS_STORE`] and [`META_STORE`], the scope of a commit with recorded answers.
    both: JsValue,
    /// `{durability}` of `readwrite` transactions (none for the browser's default).
    readwrite_options: Option<Object>,
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
            both: Array::of2(&records, &meta).into(),
            records,
            readwrite_options,
        })
    }
}

impl std::fmt::Debug for IdbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdbStore")
            .field("name", &self.name)
            .field("options", &self.options)
            .field("closed", &self.closed.get())
            .field("epoch", &self.epoch())
            .field("superseded", &self.superseded.get())
            .finish()
    }
}

impl IdbStore {
    /// Opens the database `name`, creating it when it does not exist. Its epoch is the one current now;
    /// [`IdbStore::take_over`] claims the next.
    ///
    /// Errors: [`StoreErrorKind::Unavailable`] when IndexedDB cannot be used here (no `indexedDB` global,
    /// a security error as in some private modes, storage disabled); [`StoreErrorKind::NewerFormat`] when
    /// the database was written by a newer build; [`StoreErrorKind::Other`] when `name` holds a database
    /// that is not a queen-edge one.
    pub async fn open(name: &str, options: IdbOptions) -> Result<IdbStore, StoreError> {
        IdbStore::open_observed(name, options, None).await
    }

    /// [`IdbStore::open`], calling `on_blocked(true)` when IndexedDB fires `blocked` on the request of this
    /// open or of a later [`IdbStore::take_over`] (its upgrade waits for another connection that does not
    /// close), and `on_blocked(false)` when that request went through. A request queued behind another
    /// context's blocked open gets no `blocked` event and so no call (module documentation, *Fencing*,
    /// liveness).
    pub async fn open_observed(
        name: &str,
        options: IdbOptions,
        on_blocked: Option<Function>,
    ) -> Result<IdbStore, StoreError> {
        let factory = factory()?;
        let db = match open_at(&factory, name, Some(SCHEMA_VERSION), on_blocked.as_ref()).await? {
            Opened::Database { db, .. } => db,
            Opened::VersionPassed => match open_at(&factory, name, None, None).await? {
                Opened::Database { db, .. } => db,
                Opened::VersionPassed => unreachable!("an open without a version has none to pass"),
            },
        };
        let closed = Rc::new(Cell::new(false));
        let superseded = Rc::new(Cell::new(false));
        let (closed_flag, superseded_flag) = (closed.clone(), superseded.clone());
        let on_versionchange = Closure::<dyn FnMut(Event)>::new(move |event: Event| {
            // A version to go to: another connection claims the next epoch. None: a deletion. Not a
            // version change event at all: `close`, the browser closed the connection.
            let claimed = event
                .dyn_ref::<IdbVersionChangeEvent>()
                .and_then(IdbVersionChangeEvent::new_version)
                .is_some();
            if let Some(db) = event
                .target()
                .and_then(|t| t.dyn_into::<IdbDatabase>().ok())
            {
                db.close();
            }
            closed_flag.set(true);
            if claimed {
                superseded_flag.set(true);
            }
        });
        let made = CommitValues::new(options.durability)
            .map_err(|e| js_store_error(StoreErrorKind::Other, "transaction options", &e))?;
        let store = IdbStore {
            db: RefCell::new(db),
            name: name.to_string(),
            options,
            closed,
            superseded,
            on_blocked,
            on_versionchange,
            ends: TxEnds::new(),
            made,
        };
        store.watch_connection();
        store.check_format().await?;
        Ok(store)
    }

    /// Sets this store's `versionchange` and `close` handler on its connection.
    fn watch_connection(&self) {
        let db = self.db.borrow();
        let handler = self.on_versionchange.as_ref().unchecked_ref();
        db.set_onversionchange(Some(handler));
        // `close` fires when the browser closes the connection itself (site data cleared, disk error).
        db.set_onclose(Some(handler));
    }

    /// Closes the current connection (without its handlers) and puts `db` in its place.
    fn replace_connection(&self, db: IdbDatabase) {
        let old = self.db.replace(db);
        old.set_onversionchange(None);
        old.set_onclose(None);
        old.close();
        self.watch_connection();
        self.closed.set(false);
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

    /// The writer epoch this connection commits at, the database version of its connection: the one
    /// current when it opened, or the one its last [`IdbStore::take_over`] claimed.
    pub fn epoch(&self) -> u32 {
        self.db.borrow().version() as u32
    }

    /// True once another connection took over (claimed a later epoch) and this one closed for it: every
    /// later commit fails with [`StoreErrorKind::Unavailable`]. Only a new [`IdbStore::take_over`] clears
    /// it.
    pub fn is_superseded(&self) -> bool {
        self.superseded.get()
    }

    /// [`IdbStore::is_superseded`], readable without the store (after it moved into a wrapper, or after
    /// the wrapper let it go).
    pub fn superseded_flag(&self) -> SupersededFlag {
        SupersededFlag(self.superseded.clone())
    }

    /// Makes this connection the writer: closes it and opens the database at the next epoch (module
    /// documentation, *Fencing*), waiting while another connection does not close. Returns the new epoch.
    ///
    /// Commits of other connections issued before the claim end before its upgrade, so a scan after
    /// `take_over` sees everything any earlier writer committed. Call it before loading. Commits of this
    /// store issued before the call end before it closes its connection.
    pub async fn take_over(&self) -> Result<u32, StoreError> {
        let factory = factory()?;
        loop {
            let next = self.epoch().saturating_add(1);
            // This store's own connection would block its claim.
            self.closed.set(true);
            self.db.borrow().close();
            let opened =
                open_at(&factory, &self.name, Some(next), self.on_blocked.as_ref()).await?;
            let (db, claimed) = match opened {
                Opened::Database { db, claimed } => (db, claimed),
                // Another connection is further on: start from where it is.
                Opened::VersionPassed => match open_at(&factory, &self.name, None, None).await? {
                    Opened::Database { db, .. } => (db, false),
                    Opened::VersionPassed => {
                        unreachable!("an open without a version has none to pass")
                    }
                },
            };
            self.replace_connection(db);
            if claimed {
                self.superseded.set(false);
                // A build that claimed before this one may have written a newer format.
                self.check_format().await?;
                return Ok(next);
            }
        }
    }

    /// Reads `meta/format` and refuses data from a newer build.
    async fn check_format(&self) -> Result<(), StoreError> {
        let fail =
            |e: JsValue| js_store_error(StoreErrorKind::Other, "reading the format version", &e);
        let tx = self.transaction(&META_STORE.into(), IdbTransactionMode::Readonly)?;
        let meta = object_store(&tx, META_STORE)?;
        let request = meta.get(&FORMAT_KEY.into()).map_err(fail)?;
        let value = Pending::new(&request).finish().await.map_err(fail)?;
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
            return Err(self.closed_error(mode));
        }
        let db = self.db.borrow();
        let tx = match (mode, &self.made.readwrite_options) {
            (IdbTransactionMode::Readwrite, Some(options)) => db
                .unchecked_ref::<DbExt>()
                .transaction_with_options(store_names, mode, options),
            _ => db.transaction_with_str_sequence_and_mode(store_names, mode),
        };
        tx.map_err(|e| {
            if self.closed.get() {
                self.closed_error(mode)
            } else {
                js_store_error(kind_for_commit(&e), "starting a transaction", &e)
            }
        })
    }

    /// Why this store refuses: its connection is closed. `mode` says whether a commit
    /// ([`IdbTransactionMode::Readwrite`]: "nothing of this commit was written") or a read was refused.
    fn closed_error(&self, mode: IdbTransactionMode) -> StoreError {
        let message = match (self.superseded.get(), mode) {
            (true, IdbTransactionMode::Readwrite) => format!(
                "IndexedDB database \"{}\": another tab or worker took over (epoch {} is stale); nothing \
                 of this commit was written",
                self.name,
                self.epoch()
            ),
            (true, _) => format!(
                "IndexedDB database \"{}\": another tab or worker took over this database (epoch {} is \
                 stale); read from the new writer",
                self.name,
                self.epoch()
            ),
            (false, _) => format!(
                "IndexedDB database \"{}\" was closed (another connection is deleting it, or the browser \
                 closed it); reopen it",
                self.name
            ),
        };
        StoreError::new(StoreErrorKind::Unavailable, message)
    }
}

impl Drop for IdbStore {
    fn drop(&mut self) {
        let db = self.db.get_mut();
        db.set_onversionchange(None);
        db.set_onclose(None);
        db.close();
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
        let mut pending = Vec::with_capacity(keys.len());
        for key in keys {
            let request = records.get(&JsValue::from_str(key)).map_err(fail)?;
            pending.push(Pending::new(&request));
        }
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
        let scope = match records.is_empty() {
            true => &self.made.records,
            false => &self.made.both,
        };
        let tx = self.transaction(scope, IdbTransactionMode::Readwrite)?;
        let done = self.ends.watch(&tx);
        let ext = tx.unchecked_ref::<TxExt>();
        // Every request is issued here, synchronously: no await until the transaction is complete. No
        // fence request: a stale connection is closed and cannot start the transaction (module
        // documentation, *Fencing*).
        let issued = ext
            .object_store_named(&self.made.records)
            .and_then(|store| issue_changes(&store, changes))
            .and_then(|()| issue_records(&tx, records, prune_below));
        if let Err(e) = issued {
            let _ = tx.abort();
            return Err(js_store_error(kind_for_commit(&e), "commit", &e));
        }
        // Lets the browser commit without waiting for the end of the task; harmless where unsupported.
        let _ = ext.commit_now();
        Ok(IssuedCommit(done))
    }

    /// Waits for the end of a commit issued by [`IdbStore::issue_commit`] on this store.
    async fn finish_commit(&self, issued: IssuedCommit) -> Result<(), StoreError> {
        issued.0.await.map_err(|e| {
            if self.closed.get() {
                self.closed_error(IdbTransactionMode::Readwrite)
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
        let prefix = key.find('/').and_then(|i| key.get(..=i));
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
