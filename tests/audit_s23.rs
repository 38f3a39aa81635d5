//! Defects found by the session-23 audit of stored copies and multi-step operations (docs/decisions.md,
//! "Audit of stored copies and multi-step operations (session 23) — audit"), each pinned by the test
//! that showed it.

#![cfg(all(not(target_arch = "wasm32"), feature = "ops"))]

use crate::http_support;
use crate::support;

use http_support::*;
use queen_edge::http::{HttpConfig, HttpRequest};
use serde_json::json;

/// Turning push maintenance off commits the switch, then drains the buffer a chunk per commit. When a
/// drain commit fails (or the broker stops mid-drain), the items left in the buffer were pushed and
/// answered `buffered`, yet nothing but a later push (or switching maintenance again) ever drained
/// them: consumers never got them. Maintenance (the Worker's alarm, the page's timer) must finish the
/// drain.
#[test]
fn buffered_messages_left_by_a_failed_drain_reach_consumers_without_another_push() {
    let h = Harness::new();
    let (status, _) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": true})),
    );
    assert_eq!(status, 200);
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "m", "payload": "waits"}]})),
    );
    assert_eq!((status, &body[0]["status"]), (201, &json!("buffered")));
    // The switch commits, the drain's commit fails; then the broker restarts.
    h.store.fail_commit_after(1);
    let (status, body) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": false})),
    );
    assert_eq!(status, 500, "{body}");
    let h = h.restart(HttpConfig::default());
    let (_, mode) = h.call("GET", "/api/v1/system/maintenance", None);
    assert_eq!(mode["maintenanceMode"], false, "{mode}");
    // Maintenance runs (as the alarm or the page's timer would).
    futures::executor::block_on(h.engine.maintain()).expect("maintenance runs");
    let (status, popped) = h.call("GET", "/api/v1/pop/queue/m?batch=10&wait=false", None);
    assert_eq!(
        status, 200,
        "the buffered message was never delivered: {popped}"
    );
    assert_eq!(popped["messages"][0]["data"], json!("waits"));
}

/// The Worker arms its alarm (which runs maintenance) only while the broker has periodic work. Buffered
/// items for a queue that does not exist yet are such work: with queues alone as the test (session 23's
/// condition), a broker whose only content is a stopped drain's buffer never woke to finish it.
#[test]
fn items_left_in_the_buffer_for_a_queue_not_yet_made_are_periodic_work() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": true})),
    );
    let (status, _) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "not-yet", "payload": 1}]})),
    );
    assert_eq!(status, 201);
    h.store.fail_commit_after(1);
    h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": false})),
    );
    let h = h.restart(HttpConfig::default());
    let (queues, buffered) = h
        .engine
        .read(|b, now| (b.stats(now).queues, b.maintenance().buffered()));
    assert_eq!(
        (queues, buffered),
        (0, 1),
        "the scenario: no queue, one item buffered"
    );
    assert!(
        h.engine.read(|b, _| b.has_periodic_work()),
        "a buffered item must keep the maintenance alarm armed"
    );
    futures::executor::block_on(h.engine.maintain()).expect("maintenance runs");
    assert!(h
        .engine
        .read(|b, _| b.stats(0).queues == 1 && b.maintenance().buffered() == 0));
}

/// A `MemStore` whose reads of records by key (segments) yield once before they answer, as IndexedDB's and
/// the Durable Object's do: a command that loads a segment holds the command gate across that wait.
#[derive(Clone)]
struct YieldingGets(queen_edge::store::MemStore);

impl queen_edge::store::Store for YieldingGets {
    async fn scan(&self, prefix: &str) -> Result<Vec<queen_edge::store::Record>, StoreError> {
        self.0.scan(prefix).await
    }
    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        support::YieldOnce(false).await;
        self.0.get(keys).await
    }
    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        self.0.first_keys(ranges).await
    }
    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        self.0.commit(changes).await
    }
    async fn commit_noted(&self, changes: &ChangeSet, notes: &[Note]) -> Result<(), StoreError> {
        self.0.commit_noted(changes, notes).await
    }
}

use queen_edge::store::{ChangeSet, KeyRange, Note, StoreError};

/// What a race of a pop (holding the command gate while it loads a segment), a configure that turns
/// `encryptionEnabled` on, and then `last`, each spawned in that order, left behind.
struct Race {
    engine: std::rc::Rc<queen_edge::engine::Engine<YieldingGets, TestHost>>,
    config: std::rc::Rc<HttpConfig>,
    store: YieldingGets,
    /// (name, status, body) of each request, in the order they were answered.
    answers: Vec<(String, u16, String)>,
}

/// A payload whose text must never be stored in plain text.
const MARKER: &str = "RACING-PLAINTEXT-MARKER";

impl Race {
    /// Runs the race; `last` is (name, path, body) of a POST that carries [`MARKER`] to queue `secret`.
    fn run(last: (&'static str, &str, serde_json::Value)) -> Race {
        use futures::executor::LocalPool;
        use futures::task::LocalSpawnExt;
        use queen_edge::core::BrokerConfig;
        use queen_edge::engine::Engine;
        use queen_edge::http::{handle, EncryptionKey};
        use std::cell::RefCell;
        use std::rc::Rc;

        let store = YieldingGets(queen_edge::store::MemStore::new());
        let host = TestHost::new(T0);
        let config = Rc::new(HttpConfig {
            encryption: Some(
                EncryptionKey::from_hex(
                    "8f1c2e0b5a7d93e4c6b1f0a29d8e7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a291807",
                )
                .unwrap(),
            ),
            ..HttpConfig::default()
        });
        let open = || {
            Rc::new(
                futures::executor::block_on(Engine::open(
                    store.clone(),
                    host.clone(),
                    BrokerConfig::default(),
                ))
                .unwrap(),
            )
        };
        // A message in another queue, then a restart: its segment is not in memory.
        let engine = open();
        let r = futures::executor::block_on(handle(
            &engine,
            &config,
            post(
                "/api/v1/push",
                json!({"items": [{"queue": "other", "payload": 1}]}),
            ),
        ));
        assert_eq!(r.status, 201);
        let engine = open();
        let mut pool = LocalPool::new();
        let answers: Rc<RefCell<Vec<(String, u16, String)>>> = Rc::default();
        let (last_name, last_path, last_body) = last;
        for (name, req) in [
            (
                "pop",
                HttpRequest::new("GET", "/api/v1/pop/queue/other?batch=1"),
            ),
            (
                "configure",
                post(
                    "/api/v1/configure",
                    json!({"queue": "secret", "options": {"encryptionEnabled": true}}),
                ),
            ),
            (last_name, post(last_path, last_body)),
        ] {
            let (engine, config, answers) = (engine.clone(), config.clone(), answers.clone());
            pool.spawner()
                .spawn_local(async move {
                    let r = handle(&engine, &config, req).await;
                    answers.borrow_mut().push((
                        name.to_string(),
                        r.status,
                        String::from_utf8_lossy(&r.body).into_owned(),
                    ));
                })
                .unwrap();
        }
        pool.run_until_stalled();
        let answers = answers.borrow().clone();
        assert_eq!(answers.len(), 3, "{answers:?}");
        let race = Race {
            engine,
            config,
            store,
            answers,
        };
        let options = race.call(HttpRequest::new("GET", "/api/v1/resources/queues/secret"));
        assert!(
            options.1.contains("\"encryptionEnabled\":true"),
            "{}",
            options.1
        );
        race
    }

    /// Answers `req` on the race's engine: (status, body).
    fn call(&self, req: HttpRequest) -> (u16, String) {
        let r =
            futures::executor::block_on(queen_edge::http::handle(&self.engine, &self.config, req));
        (r.status, String::from_utf8_lossy(&r.body).into_owned())
    }

    /// Whether any stored record (segments decoded) holds [`MARKER`] in plain text.
    fn marker_stored(&self) -> bool {
        futures::executor::block_on(queen_edge::store::Store::scan(&self.store.0, ""))
            .unwrap()
            .iter()
            .any(|(k, v)| {
                let text = if k.starts_with("s/") {
                    serde_json::to_string(&queen_edge::core::segment::decode(v).unwrap()).unwrap()
                } else {
                    String::from_utf8_lossy(v).into_owned()
                };
                text.contains(MARKER)
            })
    }
}

/// A POST with a JSON body.
fn post(path: &str, body: serde_json::Value) -> HttpRequest {
    HttpRequest::new("POST", path).with_json(serde_json::to_vec(&body).unwrap())
}

/// The HTTP layer reads a queue's `encryptionEnabled` before the push command runs; a configure that
/// turns it on and is applied between that read and the push (here: both wait for the command gate
/// while a pop loads a segment) let the push store its payload in plain text in a queue that has
/// `encryptionEnabled`. The push must be sealed, or refused.
#[test]
fn a_push_racing_a_configure_that_turns_encryption_on_never_stores_plain_text() {
    let push = || json!({"items": [{"queue": "secret", "payload": {"m": MARKER}}]});
    let race = Race::run(("push", "/api/v1/push", push()));
    let answers = &race.answers;
    assert!(
        !race.marker_stored(),
        "plain text stored in a queue with encryptionEnabled; answers: {answers:?}"
    );
    // The push was refused whole (409, saying to send it again); sent again, it is sealed.
    let refused = &answers[2];
    assert_eq!(
        (refused.0.as_str(), refused.1),
        ("push", 409),
        "{answers:?}"
    );
    assert!(refused.2.contains("send it again"), "{}", refused.2);
    assert_eq!(race.call(post("/api/v1/push", push())).0, 201);
    let (_, popped) = race.call(HttpRequest::new("GET", "/api/v1/pop/queue/secret?batch=10"));
    let popped: serde_json::Value = serde_json::from_str(&popped).unwrap();
    assert_eq!(popped["messages"][0]["data"], json!({"m": MARKER}));
    assert!(
        !race.marker_stored(),
        "the push sent again is stored sealed"
    );
}

/// The same race with a transaction that pushes: refused whole, nothing stored in plain text.
#[test]
fn a_transaction_racing_a_configure_that_turns_encryption_on_never_stores_plain_text() {
    let race = Race::run((
        "transaction",
        "/api/v1/transaction",
        json!({"operations": [{"type": "push", "items": [{"queue": "secret", "payload": {"m": MARKER}}]}]}),
    ));
    let answers = &race.answers;
    assert!(
        !race.marker_stored(),
        "plain text stored in a queue with encryptionEnabled; answers: {answers:?}"
    );
    // Refused whole: `success: false`, saying to send it again.
    let tx = &answers[2];
    assert_eq!((tx.0.as_str(), tx.1), ("transaction", 200), "{answers:?}");
    assert!(
        tx.2.contains("\"success\":false") && tx.2.contains("send it again"),
        "{}",
        tx.2
    );
}
