//! The npm module's bindings (wasm32 only): a broker in a page or worker on IndexedDB, answering Queen's
//! HTTP API through [`crate::http::handle`].
//!
//! The JavaScript wrapper (`js/index.js`) builds the fluent client, the writer election across tabs and
//! the Service Worker mode on top of the one class exported here, [`WasmBroker`]:
//!
//! - `WasmBroker.open(name, options)` opens (or creates) the IndexedDB database `name`, loads the broker
//!   and asks for persistent storage; its errors are JS `Error`s with a `code`
//!   (see [`error_code`]);
//! - `broker.handle(method, url, headers, body, requestId)` answers one Queen HTTP request; with a
//!   `requestId` (a request forwarded by another tab) it is recorded: its writes and its answer are
//!   committed together, and a retry of that id after a takeover is answered from the record;
//! - `broker.maintain()` runs retention and eviction (the wrapper calls it from a timer in the writer);
//! - `broker.close()` fences the broker: nothing it does afterwards reaches IndexedDB, so a writer that
//!   hands over to another tab can never write behind the new writer's back.
//!
//! Only one `WasmBroker` may write a database at a time. The wrapper elects it (a Web Lock, or without
//! Web Locks through the fence), and storage enforces it: opening takes over the writer epoch
//! ([`IdbStore::take_over`]: the database's version goes up by one, which closes every other broker's
//! connection first), so the commits of any broker opened earlier fail. A broker whose commit was
//! refused that way is `superseded`: it answers nothing any more, its requests reject with code
//! `"superseded"` (nothing of them was written), and the wrapper steps down to follower.

mod answer;
mod cipher;
mod key_check;

use crate::core::BrokerConfig;
use crate::engine::{Engine, EngineError, Host, Recording};
use crate::http::{self, EncryptionKey, HttpConfig, HttpRequest};
use crate::store::idb::{self, Durability, IdbOptions, IdbStore, SupersededFlag};
use crate::store::{ChangeSet, KeyRange, Note, Record, Store, StoreError, StoreErrorKind};
use futures::future::LocalBoxFuture;
use js_sys::{Array, Function, Object, Promise, Reflect, Uint8Array};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

/// The [`Host`] of a browser global (window, dedicated, shared or service worker): `Date.now()`,
/// `setTimeout` found on the global object, and `crypto.getRandomValues`.
#[derive(Debug, Default, Clone, Copy)]
pub struct BrowserHost;

impl Host for BrowserHost {
    fn now_ms(&self) -> i64 {
        js_sys::Date::now() as i64
    }

    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        // setTimeout takes a signed 32-bit delay; longer ones fire at once, so clamp.
        let delay = ms.min(i32::MAX as u64) as f64;
        let promise = Promise::new(&mut |resolve, _reject| {
            let global = js_sys::global();
            let set_timeout = Reflect::get(&global, &"setTimeout".into())
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok());
            match set_timeout {
                Some(set_timeout) => {
                    if set_timeout
                        .call2(&global, &resolve, &JsValue::from_f64(delay))
                        .is_err()
                    {
                        let _ = resolve.call0(&JsValue::UNDEFINED);
                    }
                }
                // No timers at all (never seen in a browser): wake at once; the engine re-checks and
                // parks again, so this degrades to polling rather than hanging.
                None => {
                    let _ = resolve.call0(&JsValue::UNDEFINED);
                }
            }
        });
        Box::pin(async move {
            let _ = JsFuture::from(promise).await;
        })
    }

    fn entropy(&self) -> u64 {
        let bytes = Uint8Array::new_with_length(8);
        let filled = Reflect::get(&js_sys::global(), &"crypto".into())
            .ok()
            .filter(|c| c.is_object())
            .and_then(|crypto| {
                let get: Function = Reflect::get(&crypto, &"getRandomValues".into())
                    .ok()?
                    .dyn_into()
                    .ok()?;
                get.call1(&crypto, &bytes).ok()
            })
            .is_some();
        let mut out = [0u8; 8];
        if filled {
            bytes.copy_to(&mut out);
        } else {
            // No Web Crypto (never seen in a browser): Math.random is weaker but ids stay unique
            // because they also carry the clock.
            for b in out.iter_mut() {
                *b = (js_sys::Math::random() * 256.0) as u8;
            }
        }
        u64::from_le_bytes(out)
    }
}

/// Prefix of the recorded answers in the `meta` object store: `req/<request id>` (see
/// [`WasmBroker::handle`]).
pub const ANSWER_PREFIX: &str = "req/";

/// How long recorded answers are kept, ms. A request id starts with its creation time (15 digits, ms),
/// so older answers are one key range, deleted with every recorded write.
pub const ANSWER_RETENTION_MS: i64 = 10 * 60 * 1000;

/// A request's future, polled with its [`Recording`] set on the engine (none for a request that is not
/// recorded), so the engine knows which commands are the recorded request's: they hold their group
/// commit open (and the command gate) until [`WasmBroker::handle`] hands the answer over
/// ([`Engine::finish_recording`]).
///
/// Every request goes through it: one call site of the HTTP layer, whose future would otherwise be
/// compiled twice into the module.
struct Recorded<'a, F> {
    recording: Option<Rc<Recording>>,
    engine: &'a BrowserEngine,
    future: std::pin::Pin<Box<F>>,
}

impl<F: std::future::Future> std::future::Future for Recorded<'_, F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = &mut *self;
        if this.recording.is_none() {
            return this.future.as_mut().poll(cx);
        }
        let previous = this.engine.set_recording(this.recording.clone());
        let polled = this.future.as_mut().poll(cx);
        this.engine.set_recording(previous);
        polled
    }
}

/// Releases what a recorded request holds if it ends without [`Engine::finish_recording`] (its future
/// dropped), so a group it held cannot stay held forever.
struct RecordingGuard<'a> {
    recording: Rc<Recording>,
    engine: &'a BrowserEngine,
}

impl Drop for RecordingGuard<'_> {
    fn drop(&mut self) {
        self.engine.abandon_recording(&self.recording);
    }
}

/// An [`IdbStore`] that can be fenced off: after [`FencedStore::fence`] every call fails with
/// [`StoreErrorKind::Unavailable`] and the IndexedDB connection closes once in-flight calls finish. It
/// also refuses every call once another connection took over ([`FencedStore::is_superseded`]). Notes
/// (recorded requests' answers, [`Store::commit_noted`]) go to IndexedDB's `meta` store in the same
/// transaction as their changes.
///
/// A closed broker may still have long-polls parked in its engine; the fence guarantees that when they
/// wake they cannot write to a database another writer now owns.
#[derive(Debug)]
pub struct FencedStore {
    inner: RefCell<Option<Rc<IdbStore>>>,
    /// The wrapped store's own flag, still readable after [`FencedStore::fence`] let the store go.
    superseded: SupersededFlag,
}

impl FencedStore {
    /// Wraps an open store.
    pub fn new(store: IdbStore) -> Self {
        FencedStore {
            superseded: store.superseded_flag(),
            inner: RefCell::new(Some(Rc::new(store))),
        }
    }

    /// Refuses every later call and lets the connection close.
    pub fn fence(&self) {
        self.inner.borrow_mut().take();
    }

    /// True once another connection took over the database (its claim closed this store's connection,
    /// or a commit was refused for it): every later call fails.
    pub fn is_superseded(&self) -> bool {
        self.superseded.get()
    }

    /// True once [`FencedStore::fence`] was called.
    pub fn is_fenced(&self) -> bool {
        self.inner.borrow().is_none()
    }

    fn current(&self) -> Result<Rc<IdbStore>, StoreError> {
        let store = self
            .inner
            .borrow()
            .clone()
            .filter(|_| !self.is_superseded());
        store.ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::Unavailable,
                "this broker was closed (another tab or worker may be the writer now)",
            )
        })
    }
}

impl Store for FencedStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        let store = self.current()?;
        store.scan(prefix).await
    }

    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let store = self.current()?;
        store.get(keys).await
    }

    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        let store = self.current()?;
        store.first_keys(ranges).await
    }

    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        self.commit_noted(changes, &[]).await
    }

    /// Writes each note's bytes at its key in `meta` (the recorded answers, `req/<id>`) in the same
    /// transaction as `changes`, and prunes answers older than [`ANSWER_RETENTION_MS`] in it.
    async fn commit_noted(&self, changes: &ChangeSet, notes: &[Note]) -> Result<(), StoreError> {
        let store = self.current()?;
        let records: Vec<(String, JsValue)> = notes
            .iter()
            .map(|(key, bytes)| (key.clone(), Uint8Array::from(bytes.as_slice()).into()))
            .collect();
        // Pruned only with a note of its own (IdbStore prunes per note's prefix).
        let prune_below = if records.is_empty() {
            String::new()
        } else {
            // Zero-padded by hand: a width in a format string pulls padding code into the module.
            let cutoff = (BrowserHost.now_ms() - ANSWER_RETENTION_MS)
                .max(0)
                .to_string();
            let zeros = "0".repeat(15usize.saturating_sub(cutoff.len()));
            format!("{ANSWER_PREFIX}{zeros}{cutoff}")
        };
        store
            .commit_recording(changes, &records, &prune_below)
            .await
    }
}

/// The `code` of a JS error for a store failure:
/// `"quota_exceeded"`, `"unavailable"`, `"newer_format"` or `"storage"`.
pub fn error_code(kind: StoreErrorKind) -> &'static str {
    match kind {
        StoreErrorKind::QuotaExceeded => "quota_exceeded",
        StoreErrorKind::Unavailable => "unavailable",
        StoreErrorKind::NewerFormat => "newer_format",
        StoreErrorKind::Other => "storage",
    }
}

/// A JS `Error` named `QueenError` with a `code` property.
fn js_error(code: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name("QueenError");
    let _ = Reflect::set(&error, &"code".into(), &code.into());
    error.into()
}

fn store_js_error(e: &StoreError) -> JsValue {
    js_error(error_code(e.kind), &e.message)
}

type BrowserEngine = Engine<FencedStore, BrowserHost>;

struct Inner {
    engine: BrowserEngine,
    config: HttpConfig,
    name: String,
    persisted: Option<bool>,
    epoch: u32,
    closed: Cell<bool>,
    /// Recorded requests answered from their record (retries).
    replayed: Cell<u32>,
    /// The cipher of `config.encryption`, which also seals recorded answers holding opened payloads.
    cipher: Option<cipher::JsCipher>,
}

/// A Queen broker in this page or worker, on the IndexedDB database it was opened with.
///
/// Requests go through [`WasmBroker::handle`] in Queen's HTTP shape. Only one `WasmBroker` writes a
/// database across all tabs and workers: the last one opened (opening takes over the writer epoch; the
/// JS wrapper elects who opens, with a Web Lock or without one through the fence).
#[wasm_bindgen]
pub struct WasmBroker {
    inner: Rc<Inner>,
}

fn read_string(options: &JsValue, key: &str) -> Option<String> {
    if !options.is_object() {
        return None;
    }
    Reflect::get(options, &key.into())
        .ok()
        .and_then(|v| v.as_string())
}

fn read_bool(options: &JsValue, key: &str) -> Option<bool> {
    if !options.is_object() {
        return None;
    }
    Reflect::get(options, &key.into())
        .ok()
        .and_then(|v| v.as_bool())
}

/// A whole number of bytes under `key`: `Ok(None)` when absent, an error when it is anything else.
fn read_byte_count(options: &JsValue, key: &str) -> Result<Option<u64>, JsValue> {
    if !options.is_object() {
        return Ok(None);
    }
    let value = Reflect::get(options, &key.into()).unwrap_or(JsValue::UNDEFINED);
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    match value.as_f64() {
        Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= 9.0e15 => Ok(Some(n as u64)),
        _ => Err(js_error(
            "bad_request",
            &format!("{key} must be a whole number of bytes"),
        )),
    }
}

/// `options.cipher`: absent or `null` is no key; otherwise the JS cipher object `js/local.js` made from
/// `Queen.open`'s `encryptionKey` (see [`cipher`]).
fn js_cipher(options: &JsValue) -> Option<cipher::JsCipher> {
    if !options.is_object() {
        return None;
    }
    let cipher = Reflect::get(options, &"cipher".into()).unwrap_or(JsValue::UNDEFINED);
    if cipher.is_undefined() || cipher.is_null() {
        return None;
    }
    cipher::JsCipher::new(&cipher)
}

fn body_bytes(body: &JsValue) -> Result<Vec<u8>, JsValue> {
    if body.is_undefined() || body.is_null() {
        return Ok(Vec::new());
    }
    if let Some(text) = body.as_string() {
        return Ok(text.into_bytes());
    }
    if let Some(bytes) = body.dyn_ref::<Uint8Array>() {
        return Ok(bytes.to_vec());
    }
    if let Some(buffer) = body.dyn_ref::<js_sys::ArrayBuffer>() {
        return Ok(Uint8Array::new(buffer).to_vec());
    }
    Err(js_error(
        "bad_request",
        "body must be a string, a Uint8Array, an ArrayBuffer, null or undefined",
    ))
}

fn header_pairs(headers: &JsValue) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if headers.is_undefined() || headers.is_null() {
        return out;
    }
    let entries: Array = if Array::is_array(headers) {
        headers.clone().unchecked_into()
    } else if headers.is_object() {
        Object::entries(headers.unchecked_ref())
    } else {
        return out;
    };
    for entry in entries.iter() {
        let pair: Array = match entry.dyn_into() {
            Ok(pair) => pair,
            Err(_) => continue,
        };
        if let (Some(name), Some(value)) = (pair.get(0).as_string(), pair.get(1).as_string()) {
            out.push((name, value));
        }
    }
    out
}

#[wasm_bindgen]
impl WasmBroker {
    /// Opens the broker stored in the IndexedDB database `name`, creating it when it does not exist.
    ///
    /// `options` (all optional): `durability` (`"strict"`, the default: a commit is on disk before its
    /// answer; `"relaxed"`: faster, a power loss right after may lose it; `"default"`: the browser's own),
    /// `persist` (default `true`: ask `navigator.storage.persist()`; the answer is [`WasmBroker::persisted`]),
    /// `maxStoredBytes` (a storage quota: pushes that would pass it are refused with status 507; none by
    /// default, the browser's own quota then answers `quota_exceeded`), `cacheBytes` (the budget of
    /// decoded segments kept in memory),
    /// `onBlocked` (a function called with `true` when the take-over waits for another tab or worker
    /// that keeps the database open, and with `false` once it went through: src/store/idb.rs, *Fencing*),
    /// `cipher` (the JS cipher `js/local.js` makes from `Queen.open`'s `encryptionKey`, see [`cipher`]:
    /// payloads of `encryptionEnabled` queues are stored encrypted; without it such queues are refused).
    ///
    /// Rejects with an `Error` whose `code` is `"unavailable"` (no IndexedDB here, e.g. some private modes), `"newer_format"` (the
    /// database was written by a newer version), `"quota_exceeded"` or `"storage"`.
    pub async fn open(name: String, options: JsValue) -> Result<WasmBroker, JsValue> {
        let durability = match read_string(&options, "durability").as_deref() {
            None | Some("strict") => Durability::Strict,
            Some("relaxed") => Durability::Relaxed,
            Some("default") => Durability::BrowserDefault,
            Some(other) => {
                return Err(js_error(
                    "bad_request",
                    &format!(
                        "durability must be \"strict\", \"relaxed\" or \"default\", not \"{other}\""
                    ),
                ))
            }
        };
        let ask_persist = read_bool(&options, "persist").unwrap_or(true);
        let mut broker_config = BrokerConfig {
            max_stored_bytes: read_byte_count(&options, "maxStoredBytes")?,
            // Group commit, as on the Worker: concurrent requests (consume loops, tabs forwarding to
            // the writer) share IndexedDB transactions. A recorded request's answer rides in its group
            // (`Recorded`, `Engine::finish_recording`).
            group_commit: true,
            ..BrokerConfig::default()
        };
        if let Some(bytes) = read_byte_count(&options, "cacheBytes")? {
            broker_config.cache_bytes = bytes as usize;
        }
        let cipher = js_cipher(&options);
        let encryption = cipher.clone().map(EncryptionKey::from_cipher);
        let on_blocked = Reflect::get(&options, &"onBlocked".into())
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok());
        let store = IdbStore::open_observed(&name, IdbOptions { durability }, on_blocked)
            .await
            .map_err(|e| store_js_error(&e))?;
        // Another key than the one that sealed this database's payloads is refused before taking over.
        let unsealed = match &cipher {
            Some(cipher) => key_check::unset(&store, cipher).await?,
            None => false,
        };
        // Take over before loading: any earlier writer's later commits now fail, and the load below sees
        // everything committed before.
        let epoch = store.take_over().await.map_err(|e| store_js_error(&e))?;
        if let (true, Some(cipher)) = (unsealed, &cipher) {
            key_check::seal(&store, cipher).await?;
        }
        let persisted = if ask_persist {
            // Workers have no persist(); that is an answer too ("not asked"), not an error.
            idb::persist().await.ok()
        } else {
            None
        };
        let host = BrowserHost;
        let started_at_ms = host.now_ms();
        let superseded = store.superseded_flag();
        let engine = Engine::open(FencedStore::new(store), host, broker_config)
            .await
            .map_err(|e| {
                if superseded.get() {
                    // Another context claimed while this one loaded: it is the writer now.
                    js_error(
                        "superseded",
                        "another tab or worker took over the database while this broker was opening",
                    )
                } else {
                    engine_js_error(e)
                }
            })?;
        let config = HttpConfig {
            worker_id: "queen-edge-browser".to_string(),
            started_at_ms,
            encryption,
            ..HttpConfig::default()
        };
        Ok(WasmBroker {
            inner: Rc::new(Inner {
                engine,
                config,
                name,
                persisted,
                epoch,
                closed: Cell::new(false),
                replayed: Cell::new(0),
                cipher,
            }),
        })
    }

    /// Deletes the IndexedDB database `name` and everything in it. Open brokers on it stop working.
    #[wasm_bindgen(js_name = deleteDatabase)]
    pub async fn delete_database(name: String) -> Result<(), JsValue> {
        IdbStore::delete_database(&name)
            .await
            .map_err(|e| store_js_error(&e))
    }

    /// The database name this broker was opened on.
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.inner.name.clone()
    }

    /// The browser's answer to `navigator.storage.persist()` at open: `true` (storage will not be evicted
    /// under pressure), `false` (it may be), or `undefined` (not asked, or not available here, as in
    /// workers).
    #[wasm_bindgen(getter)]
    pub fn persisted(&self) -> Option<bool> {
        self.inner.persisted
    }

    /// The writer epoch this broker took over at open (increases with every broker opened on the database).
    #[wasm_bindgen(getter)]
    pub fn epoch(&self) -> u32 {
        self.inner.epoch
    }

    /// True once [`WasmBroker::close`] was called.
    #[wasm_bindgen(getter)]
    pub fn closed(&self) -> bool {
        self.inner.closed.get()
    }

    /// Answers one Queen HTTP request.
    ///
    /// `url` is a path with an optional query (`/api/v1/pop/queue/q?batch=10`) or a full URL (only its
    /// path and query are used). `headers` is a plain object or an array of `[name, value]` pairs (may be
    /// `undefined`). `body` is a string, a `Uint8Array`, an `ArrayBuffer`, `null` or `undefined`.
    ///
    /// Resolves to `{ status, headers, body }` where `headers` is an object and `body` a `Uint8Array`
    /// (empty for 204). A long-poll pop resolves when messages arrive or its timeout passes. After
    /// [`WasmBroker::close`] every request answers 503.
    ///
    /// With a `requestId` (a forwarded request; it must start with its creation time in ms as 15 digits,
    /// e.g. `000001733000000000:tab:1`) the request is recorded: what it writes is committed together with
    /// its answer under that id, and a request whose id is already recorded (a retry after the writer that
    /// ran it died before answering) is answered from the record without running again. Answers are kept
    /// [`ANSWER_RETENTION_MS`].
    ///
    /// Rejects with an `Error` whose `code` is `"superseded"` when another broker took over the database
    /// (see [`FencedStore::is_superseded`]): before running the request if that was known already, else when
    /// its commit was refused. Either way nothing of the request was written, so it may be sent again to
    /// the current writer.
    #[wasm_bindgen(
        unchecked_return_type = "Promise<{status: number, headers: Record<string, string>, body: Uint8Array}>"
    )]
    pub fn handle(
        &self,
        method: String,
        url: String,
        headers: JsValue,
        body: JsValue,
        request_id: Option<String>,
    ) -> Promise {
        let inner = self.inner.clone();
        let body = body_bytes(&body);
        let headers = header_pairs(&headers);
        future_to_promise(async move {
            let body = body?;
            let target = strip_origin(&url);
            let mut request = HttpRequest::new(&method, target);
            request.headers = headers;
            request.body = body;
            if inner.closed.get() {
                return response_object(&closed_response());
            }
            check_superseded(&inner)?;
            let engine = &inner.engine;
            let mut key = None;
            if let Some(id) = request_id {
                let id = format!("{ANSWER_PREFIX}{id}");
                // A retry of a request some writer already committed: its answer, as it was.
                let recorded = match engine.store().current() {
                    Ok(idb) => idb.read_meta(&id).await,
                    Err(e) => Err(e),
                }
                .map_err(|e| store_js_error(&e))?;
                if let Some(bytes) = recorded.dyn_ref::<Uint8Array>() {
                    let answer = answer::decode(&bytes.to_vec()).ok_or_else(|| {
                        js_error("storage", "the recorded answer of this request is damaged")
                    })?;
                    let answer = answer::open(answer, inner.cipher.as_ref())
                        .await
                        .unwrap_or_else(unkept_answer);
                    inner.replayed.set(inner.replayed.get() + 1);
                    return response_object(&answer);
                }
                if recorded.is_object() {
                    // Recorded by an earlier build, as the answer object itself.
                    inner.replayed.set(inner.replayed.get() + 1);
                    return Ok(recorded);
                }
                key = Some(id);
            }
            // A tab opened with a key expects payloads in plain text; without the key this broker would
            // answer them as stored (ciphertext), so it refuses the request unrun. After the replay above:
            // a request another writer already ran is answered as recorded.
            if inner.cipher.is_none() && request.header(KEYED_HEADER).is_some() {
                return response_object(&keyless_writer_response());
            }
            let recording = key.as_ref().map(|_| Rc::new(Recording::default()));
            let guard = recording
                .clone()
                .map(|recording| RecordingGuard { recording, engine });
            let response = Recorded {
                recording,
                engine,
                future: Box::pin(http::handle(engine, &inner.config, request)),
            }
            .await;
            if let (Some(guard), Some(key)) = (guard, key) {
                // Not answered before the commit that holds the request's changes and this answer
                // succeeded; if it failed, neither was written.
                // An answer holding payloads opened from encrypted queues is kept sealed under the
                // broker's key; if that fails, a retry gets a refusal.
                let sealed;
                let recorded = if guard.recording.holds_opened_payloads() {
                    sealed = match &inner.cipher {
                        Some(cipher) => answer::seal(&response, cipher).await,
                        None => None,
                    }
                    .unwrap_or_else(unkept_answer);
                    &sealed
                } else {
                    &response
                };
                let finished = engine
                    .finish_recording(&guard.recording, || (key, answer::encode(recorded)))
                    .await;
                if let Err(e) = finished {
                    check_superseded(&inner)?;
                    return Err(engine_js_error(e));
                }
            }
            if response.status >= 500 {
                // A store failure after the take-over: the fence refused this request's commit.
                check_superseded(&inner)?;
            }
            response_object(&response)
        })
    }

    /// Runs retention and eviction now. Resolves to `{ retentionDeleted, evicted, segmentsDeleted }`.
    #[wasm_bindgen(
        unchecked_return_type = "Promise<{retentionDeleted: number, evicted: number, segmentsDeleted: number}>"
    )]
    pub fn maintain(&self) -> Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            if inner.closed.get() {
                return Err(js_error("closed", "this broker was closed"));
            }
            let report = inner.engine.maintain().await;
            if report.is_err() {
                check_superseded(&inner)?;
            }
            let report = report.map_err(engine_js_error)?;
            let out = Object::new();
            Reflect::set(
                &out,
                &"retentionDeleted".into(),
                &(report.retention_deleted as f64).into(),
            )?;
            Reflect::set(&out, &"evicted".into(), &(report.evicted as f64).into())?;
            Reflect::set(
                &out,
                &"segmentsDeleted".into(),
                &(report.segments_deleted as f64).into(),
            )?;
            Ok(out.into())
        })
    }

    /// The engine's work counters: `{ commits, rowsWritten, bytesWritten, reloads }`, and `replayed`:
    /// recorded requests answered from their record.
    #[wasm_bindgen(
        unchecked_return_type = "{commits: number, rowsWritten: number, bytesWritten: number, reloads: number, replayed: number}"
    )]
    pub fn counters(&self) -> JsValue {
        let c = self.inner.engine.counters();
        let out = Object::new();
        for (key, value) in [
            ("commits", c.commits),
            ("rowsWritten", c.rows_written),
            ("bytesWritten", c.bytes_written),
            ("reloads", c.reloads),
            ("replayed", u64::from(self.inner.replayed.get())),
        ] {
            let _ = Reflect::set(&out, &key.into(), &(value as f64).into());
        }
        out.into()
    }

    /// Closes the broker: later requests answer 503, nothing more reaches IndexedDB (parked long-polls
    /// included), and the database connection closes once in-flight commits finish.
    pub fn close(&self) {
        self.inner.closed.set(true);
        self.inner.engine.store().fence();
    }
}

/// The JS error of an engine failure: the store's code, or `"storage"`.
fn engine_js_error(e: EngineError) -> JsValue {
    match e {
        EngineError::Store(s) => store_js_error(&s),
        other => js_error("storage", &other.to_string()),
    }
}

/// The JS shape of an answer: `{ status, headers, body }`.
fn response_object(response: &http::HttpResponse) -> Result<JsValue, JsValue> {
    let out = Object::new();
    Reflect::set(&out, &"status".into(), &JsValue::from(response.status))?;
    let headers = Object::new();
    for (name, value) in &response.headers {
        Reflect::set(&headers, &name.as_str().into(), &value.as_str().into())?;
    }
    Reflect::set(&out, &"headers".into(), &headers)?;
    let body = Uint8Array::from(response.body.as_slice());
    Reflect::set(&out, &"body".into(), &body)?;
    Ok(out.into())
}

/// Rejects with code `"superseded"` once another broker took over the database.
fn check_superseded(inner: &Inner) -> Result<(), JsValue> {
    if inner.engine.store().is_superseded() {
        return Err(js_error(
            "superseded",
            "another tab or worker took over; nothing of this request was written",
        ));
    }
    Ok(())
}

/// The path-and-query part of `url` (`https://h/api/v1/x?q` → `/api/v1/x?q`); a path stays as it is.
fn strip_origin(url: &str) -> &str {
    // The scheme ends at the first `:` (a character search: a text pattern would bring the standard
    // library's substring searcher into the browser module for this one use).
    let after_scheme = url
        .find(':')
        .and_then(|i| url.get(i..)?.strip_prefix("://"));
    match after_scheme {
        Some(rest) => rest
            .find('/')
            .and_then(|slash| rest.get(slash..))
            .unwrap_or("/"),
        None => url,
    }
}

/// What a recorded request's retry is answered when its answer held payloads opened from
/// `encryptionEnabled` queues and could not be sealed when it was recorded, or does not open now (the
/// broker's key changed): such an answer is never stored in plain text (docs/decisions.md, "Audit
/// (session 9)" and "Encrypted recorded answers (session 10) — audit2").
fn unkept_answer() -> http::HttpResponse {
    http::HttpResponse {
        status: 503,
        headers: vec![("Content-Type".to_string(), "application/json".to_string())],
        body: br#"{"error":"the writer of this request stopped before answering, and its answer (payloads of an encrypted queue) was not kept sealed or does not open with this key: pop again (without autoAck its messages come back when their lease expires)"}"#.to_vec(),
    }
}

/// The header a follower's forwarded request carries when its tab was opened with an `encryptionKey`
/// (js/local.js `#serveForwarded`).
const KEYED_HEADER: &str = "x-queen-keyed";

/// A keyed tab's request refused by a broker opened without a key (409, `conflict` in the JS module).
fn keyless_writer_response() -> http::HttpResponse {
    http::HttpResponse {
        status: 409,
        headers: vec![("Content-Type".to_string(), "application/json".to_string())],
        body: br#"{"error":"this tab was opened with an encryptionKey, but the writer tab, which serves every tab of this database, was opened without one and would hand over encrypted payloads as stored: pass the same encryptionKey to Queen.open in every tab"}"#.to_vec(),
    }
}

fn closed_response() -> http::HttpResponse {
    http::HttpResponse {
        status: 503,
        headers: vec![("Content-Type".to_string(), "application/json".to_string())],
        body: br#"{"error":"this broker was closed"}"#.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[wasm_bindgen_test::wasm_bindgen_test]
    fn strip_origin_keeps_path_and_query() {
        assert_eq!(
            strip_origin("https://h.example/api/v1/pop?x=1"),
            "/api/v1/pop?x=1"
        );
        assert_eq!(strip_origin("http://h"), "/");
        assert_eq!(strip_origin("/health"), "/health");
    }

    #[wasm_bindgen_test::wasm_bindgen_test]
    fn store_error_kinds_have_codes() {
        assert_eq!(error_code(StoreErrorKind::QuotaExceeded), "quota_exceeded");
        assert_eq!(error_code(StoreErrorKind::Unavailable), "unavailable");
        assert_eq!(error_code(StoreErrorKind::NewerFormat), "newer_format");
        assert_eq!(error_code(StoreErrorKind::Other), "storage");
    }
}
