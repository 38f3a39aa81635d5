//! Group commit (issue 11): commands that arrive while a commit is in flight are committed together in
//! the next one; each replies only after the commit that holds its changes; a failed group commit fails
//! every command in it, keeps nothing of them, and the broker goes on from the store.
//!
//! Recorded requests (the browser's forwarded requests, `Engine::set_recording`): each answer is a note
//! committed in the transaction that holds the request's changes, or nowhere; a request holding its
//! group never deadlocks the engine (several commands, a long-poll, a concurrent read).

use crate::support;

use futures::executor::block_on;
use futures::future::join_all;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::{Engine, EngineError, EngineResult, Host, Recording};
use queen_edge::store::{ChangeSet, KeyRange, MemStore, Record, Store, StoreError};
use serde_json::json;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use support::{SlowStore, TestHost, YieldOnce};

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    }
}

fn open() -> (SlowStore, Engine<SlowStore, TestHost>) {
    let store = SlowStore::new(1);
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    (store, engine)
}

fn push_to<S: Store, H: Host>(
    engine: &Engine<S, H>,
    i: u32,
) -> impl Future<Output = Result<Vec<PushResult>, EngineError>> + '_ {
    engine.push(vec![PushItem {
        transaction_id: Some(format!("tx-{i}").into()),
        ..PushItem::new("q", json!({ "i": i }))
    }])
}

/// The payload numbers of every message of queue `q` a new group finds.
fn stored<S: Store, H: Host>(engine: &Engine<S, H>, group: &str) -> Vec<u32> {
    let reply = block_on(engine.pop(
        PopRequest {
            group: Some(group.into()),
            batch: Some(1000),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .unwrap();
    reply
        .messages
        .iter()
        .map(|m| m.payload.to_value().unwrap()["i"].as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn concurrent_commands_share_commits_and_each_reply_follows_its_commit() {
    let (store, engine) = open();
    let results = block_on(join_all((0..20).map(|i| push_to(&engine, i))));
    assert!(results
        .iter()
        .all(|r| r.as_ref().unwrap()[0].status == PushStatus::Queued));
    // The first push commits alone; the other 19 were applied while it was in flight: one commit.
    assert_eq!(store.commits.get(), 2, "20 pushes, 2 commits");
    assert_eq!(engine.counters().commits, 2);
    // Every answered push is stored: a new engine over the same store finds all of them, in order.
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(stored(&reopened, "check"), (0..20).collect::<Vec<_>>());
}

#[test]
fn a_failed_group_commit_fails_every_command_in_it_and_keeps_nothing_of_them() {
    let (store, engine) = open();
    block_on(push_to(&engine, 100)).unwrap();
    // Commit 2 will hold push 0 alone; commit 3 the pushes and the pop applied while 2 was in flight.
    store.fail_commit(3);
    let pushes = join_all((0..6).map(|i| push_to(&engine, i)));
    let pop = engine.pop(
        PopRequest {
            group: Some("eager".into()),
            batch: Some(100),
            ..PopRequest::queue("q")
        },
        None,
    );
    let (pushes, pop) = block_on(futures::future::join(pushes, pop));
    assert!(pushes[0].is_ok(), "push 0 committed alone: {:?}", pushes[0]);
    for (i, r) in pushes.iter().enumerate().skip(1) {
        assert!(
            matches!(r, Err(EngineError::Store(_))),
            "push {i} was in the failed group: {r:?}"
        );
    }
    assert!(
        matches!(pop, Err(EngineError::Store(_))),
        "the pop applied on top of the failed pushes fails too: {pop:?}"
    );
    // Nothing of the failed group is visible, and the broker goes on from the store.
    assert_eq!(stored(&engine, "check"), vec![100, 0]);
    let again = block_on(push_to(&engine, 5)).unwrap();
    assert_eq!(
        (again[0].status.clone(), again[0].offset),
        (PushStatus::Queued, 2)
    );
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let all: Vec<u32> = {
        let r = block_on(reopened.pop(
            PopRequest {
                group: Some("after".into()),
                batch: Some(100),
                ..PopRequest::queue("q")
            },
            None,
        ))
        .unwrap();
        r.messages
            .iter()
            .map(|m| m.payload.to_value().unwrap()["i"].as_u64().unwrap() as u32)
            .collect()
    };
    assert_eq!(all, vec![100, 0, 5]);
}

#[test]
fn with_group_commit_off_each_command_commits_in_its_own_call() {
    let store = SlowStore::new(1);
    let off = BrokerConfig {
        group_commit: false,
        ..config()
    };
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), off)).unwrap();
    let results = block_on(join_all((0..20).map(|i| push_to(&engine, i))));
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(store.commits.get(), 20, "one commit per push");
}

/// A host whose sleeps never end: a parked long-poll wakes only when the engine wakes it.
#[derive(Clone)]
struct ParkHost(TestHost);

impl Host for ParkHost {
    fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }
    fn sleep(&self, _ms: u64) -> futures::future::LocalBoxFuture<'static, ()> {
        Box::pin(futures::future::pending())
    }
    fn entropy(&self) -> u64 {
        self.0.entropy()
    }
}

/// Polls `future` until it is ready, or gives up (`None`) after many polls without an end: a deadlock
/// fails the test instead of hanging it. Every future here is woken only by its own progress, so
/// polling again is harmless.
fn run_bounded<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    for _ in 0..100_000 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
    }
    None
}

/// A request's future polled with its recording set on the engine, as `src/bindings` does.
struct WithRecording<'a, S: Store, H: Host, F> {
    engine: &'a Engine<S, H>,
    recording: Rc<Recording>,
    future: Pin<Box<F>>,
}

impl<S: Store, H: Host, F: Future> Future for WithRecording<'_, S, H, F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let previous = this.engine.set_recording(Some(this.recording.clone()));
        let polled = this.future.as_mut().poll(cx);
        this.engine.set_recording(previous);
        polled
    }
}

/// Runs `request` as a recorded request under `key`: its answer (the text of its outcome) is noted with
/// its changes. Returns the outcome and whether the answer was recorded; asserts that a recorded answer
/// is stored when the request is answered (it is answered after its commit).
async fn recorded<'a, S: Store, H: Host, T: std::fmt::Debug>(
    engine: &'a Engine<S, H>,
    notes: &MemStore,
    key: &str,
    request: impl Future<Output = EngineResult<T>> + 'a,
) -> EngineResult<(T, bool)> {
    let recording = Rc::new(Recording::default());
    let outcome = WithRecording {
        engine,
        recording: recording.clone(),
        future: Box::pin(request),
    }
    .await;
    let answer = format!("{outcome:?}").into_bytes();
    let stored = engine
        .finish_recording(&recording, || (key.to_string(), answer.clone()))
        .await?;
    if stored {
        assert_eq!(
            notes.note(key),
            Some(answer),
            "answered before its note was stored"
        );
    }
    Ok((outcome?, stored))
}

fn pop_request(group: &str) -> PopRequest {
    PopRequest {
        group: Some(group.into()),
        batch: Some(1),
        ..PopRequest::queue("q")
    }
}

#[test]
fn recorded_answers_are_committed_with_their_changes_in_shared_commits() {
    let (store, engine) = open();
    let requests = (0..10).map(|i| {
        let (engine, store) = (&engine, &store);
        async move {
            if i % 2 == 0 {
                recorded(
                    engine,
                    &store.inner,
                    &format!("req/{i}"),
                    push_to(engine, i),
                )
                .await
                .map(|(r, stored)| {
                    assert!(stored, "push {i} changed something: its answer is recorded");
                    r
                })
            } else {
                push_to(engine, i).await
            }
        }
    });
    let results = run_bounded(join_all(requests)).expect("no deadlock");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    // The first request commits alone, the nine applied while it was in flight share one commit.
    assert_eq!(store.commits.get(), 2, "10 pushes (5 recorded), 2 commits");
    for i in (0..10).step_by(2) {
        assert!(
            store.inner.note(&format!("req/{i}")).is_some(),
            "answer {i}"
        );
    }
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(stored(&reopened, "check"), (0..10).collect::<Vec<_>>());
}

#[test]
fn a_failed_group_fails_its_recorded_members_and_no_later_commit_writes_their_answers() {
    let (store, engine) = open();
    block_on(push_to(&engine, 100)).unwrap();
    // Commit 2 holds push 0 alone; commit 3 everything applied while it was in flight, and fails.
    store.fail_commit(3);
    let requests = (0..6).map(|i| {
        let (engine, store) = (&engine, &store);
        async move {
            if i % 2 == 1 {
                recorded(
                    engine,
                    &store.inner,
                    &format!("req/{i}"),
                    push_to(engine, i),
                )
                .await
                .map(|(r, _)| r)
            } else {
                push_to(engine, i).await
            }
        }
    });
    let results = run_bounded(join_all(requests)).expect("no deadlock");
    assert!(
        results[0].is_ok(),
        "push 0 committed alone: {:?}",
        results[0]
    );
    for (i, r) in results.iter().enumerate().skip(1) {
        assert!(
            matches!(r, Err(EngineError::Store(_))),
            "request {i} was in the failed group: {r:?}"
        );
    }
    // A later recorded request commits its own answer, and none of the failed group's.
    let later = run_bounded(recorded(
        &engine,
        &store.inner,
        "req/6",
        push_to(&engine, 6),
    ))
    .expect("no deadlock");
    assert!(later.unwrap().1, "the later answer is recorded");
    for i in [1, 3, 5] {
        assert_eq!(store.inner.note(&format!("req/{i}")), None, "answer {i}");
    }
    assert_eq!(stored(&engine, "check"), vec![100, 0, 6]);
}

#[test]
fn a_recorded_request_waiting_after_its_command_fails_with_the_commit_failed_under_it() {
    // The browser's recorded pop on an encrypted queue: the pop is applied (its lease held in a group),
    // then the request waits for the cipher while an earlier commit fails.
    let (store, engine) = open();
    block_on(push_to(&engine, 100)).unwrap();
    store.fail_commit(2);
    let (cipher_done, cipher) = futures::channel::oneshot::channel::<()>();
    let failing_push = async {
        let outcome = push_to(&engine, 0).await;
        let _ = cipher_done.send(());
        outcome
    };
    let pop = recorded(&engine, &store.inner, "req/pop", async {
        let reply = engine.pop(pop_request("g"), None).await;
        let _ = cipher.await;
        reply
    });
    let (push, pop) = run_bounded(futures::future::join(failing_push, pop)).expect("no deadlock");
    assert!(push.is_err(), "set-up: the push's commit fails");
    assert!(
        matches!(pop, Err(EngineError::Store(_))),
        "the pop's lease was in the group the failure took: {pop:?}"
    );
    assert_eq!(
        store.inner.note("req/pop"),
        None,
        "its answer is not recorded"
    );
    // The message it was going to answer with is not leased: the same group gets it.
    let again = run_bounded(engine.pop(pop_request("g"), None))
        .expect("no deadlock")
        .unwrap();
    assert_eq!(again.messages.len(), 1, "the message is handed out again");
    assert_eq!(
        store.inner.note("req/pop"),
        None,
        "no later commit writes it"
    );
}

#[test]
fn a_recorded_request_of_several_commands_with_a_concurrent_read_does_not_deadlock() {
    let (store, engine) = open();
    let two_pushes = recorded(&engine, &store.inner, "req/two", async {
        push_to(&engine, 0).await?;
        push_to(&engine, 1).await
    });
    let read = engine.read_loaded(|_, now| now);
    let others = join_all((2..5).map(|i| push_to(&engine, i)));
    let (two, read, others) =
        run_bounded(futures::future::join3(two_pushes, read, others)).expect("no deadlock");
    assert!(two.unwrap().1, "its last command's answer is recorded");
    read.unwrap();
    assert!(others.iter().all(|r| r.is_ok()));
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let mut all = stored(&reopened, "check");
    all.sort();
    assert_eq!(all, (0..5).collect::<Vec<_>>());
}

#[test]
fn a_recorded_long_poll_does_not_hold_its_group_while_parked() {
    let store = SlowStore::new(1);
    let engine = block_on(Engine::open(
        store.clone(),
        ParkHost(TestHost::new()),
        config(),
    ))
    .unwrap();
    let long_poll = recorded(&engine, &store.inner, "req/poll", async {
        engine.pop(pop_request("g"), Some(10_000)).await
    });
    // The push that wakes it joins after the long-poll's first, empty attempt.
    let push = async {
        YieldOnce(false).await;
        engine
            .push(vec![PushItem::new("q", json!({ "i": 7 }))])
            .await
    };
    let (polled, pushed) =
        run_bounded(futures::future::join(long_poll, push)).expect("no deadlock");
    pushed.unwrap();
    let (reply, stored) = polled.unwrap();
    assert_eq!(reply.messages.len(), 1, "woken by the push");
    assert!(stored, "the pop that leased it is recorded");
}

// ---- Review (branch review-idb): what happens when a recorded request ends without its answer. ----

/// A recorded request whose future is dropped while it holds its group (what `RecordingGuard` in
/// src/bindings handles with `Engine::abandon_recording`) must not leave the other members of that group
/// waiting for a commit nobody will lead. Here a local push joins the held group (and, finding it held,
/// leaves the commit to the holder); the holder is dropped and abandons; nothing else arrives. The local
/// push must still be answered once its changes are stored.
#[test]
fn review_an_abandoned_recording_does_not_strand_the_other_members_of_its_group() {
    let (store, engine) = open();
    let recording = Rc::new(Recording::default());
    // The recorded request: its push holds the open group, then it waits for something that never
    // ends (a cipher, or a caller that gives up) and is dropped.
    let mut holder = Box::pin(WithRecording {
        engine: &engine,
        recording: recording.clone(),
        future: Box::pin(async {
            let pushed = push_to(&engine, 1).await;
            futures::future::pending::<()>().await;
            pushed
        }),
    });
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(
        holder.as_mut().poll(&mut cx).is_pending(),
        "set-up: it holds its group and waits"
    );
    // A local push joins the held group and waits for its commit.
    let mut local = Box::pin(push_to(&engine, 2));
    assert!(
        local.as_mut().poll(&mut cx).is_pending(),
        "set-up: the held group is not committed"
    );
    // The recorded request ends without an answer, as `RecordingGuard::drop` does it.
    drop(holder);
    engine.abandon_recording(&recording);
    let answered = run_bounded(local);
    assert!(
        answered.is_some(),
        "the local push is never answered: its group was released, but nobody leads its commit \
         (abandon_recording only releases; the members that found the group held wait on it)"
    );
    answered.unwrap().unwrap();
    assert_eq!(store.commits.get(), 1, "the released group is committed");
}

/// One HTTP request against `engine` (the routes of `queen_edge::http`, default configuration).
async fn http<S: Store, H: Host>(
    engine: &Engine<S, H>,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut request = queen_edge::http::HttpRequest::new(method, path);
    if let Some(body) = body {
        request.headers = vec![("Content-Type".into(), "application/json".into())];
        request.body = serde_json::to_vec(&body).unwrap();
    }
    let config = queen_edge::http::HttpConfig::default();
    let response = queen_edge::http::handle(engine, &config, request).await;
    let value = if response.body.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&response.body).unwrap()
    };
    (response.status, value)
}

/// The number of dead letters of queue "d" that `engine` shows.
fn dead_letters(engine: &Engine<SlowStore, TestHost>) -> u64 {
    let (_, dlq) = block_on(http(engine, "GET", "/api/v1/dlq?queue=d&limit=1000", None));
    dlq["total"].as_u64().unwrap()
}

/// A recorded bulk replay (`POST /api/v1/dlq/replay`, under `key`) of queue "d".
fn bulk_replay<'a>(
    engine: &'a Engine<SlowStore, TestHost>,
    store: &'a SlowStore,
    key: &'a str,
) -> impl Future<Output = EngineResult<((u16, serde_json::Value), bool)>> + 'a {
    let request = async move {
        Ok::<_, EngineError>(
            http(
                engine,
                "POST",
                "/api/v1/dlq/replay",
                Some(json!({"queue": "d"})),
            )
            .await,
        )
    };
    recorded(engine, &store.inner, key, request)
}

/// 101 dead letters on queue "d" (one push, then a pop and an ack with status "dlq" for each), then a
/// recorded bulk replay of them (`src/http/dlq_bulk.rs`: one engine command per 100 rows, so two
/// commands) whose commit carrying its answer, so its second chunk, fails. (Review-idb failed commit
/// number 2: the branch it reviewed committed the first chunk alone; with the fix there is one commit.)
/// Returns the replay's outcome.
fn failed_bulk_replay(
    store: &SlowStore,
    engine: &Engine<SlowStore, TestHost>,
) -> EngineResult<((u16, serde_json::Value), bool)> {
    let items: Vec<_> = (0..101)
        .map(|i| json!({"queue": "d", "payload": {"i": i}, "transactionId": format!("d-{i}")}))
        .collect();
    let (status, _) = block_on(http(
        engine,
        "POST",
        "/api/v1/push",
        Some(json!({"items": items})),
    ));
    assert_eq!(status, 201, "set-up: push");
    for _ in 0..101 {
        let (_, popped) = block_on(http(engine, "GET", "/api/v1/pop/queue/d", None));
        let m = &popped["messages"][0];
        let ack = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                         "status": "dlq", "error": "boom", "leaseId": popped["leaseId"]});
        let (status, _) = block_on(http(engine, "POST", "/api/v1/ack", Some(ack)));
        assert_eq!(status, 200, "set-up: a dead letter");
    }
    assert_eq!(dead_letters(engine), 101, "set-up: 101 dead letters");
    store.fail_noted.set(true);
    let outcome = run_bounded(bulk_replay(engine, store, "req/replay")).expect("no deadlock");
    assert!(
        !store.fail_noted.get(),
        "set-up: the commit carrying its answer was tried, and failed"
    );
    assert!(
        outcome.is_err(),
        "set-up: its last commit failed, so it fails: {outcome:?}"
    );
    assert_eq!(store.inner.note("req/replay"), None, "nothing recorded");
    outcome
}

/// A forwarded (recorded) request is all or nothing with its answer: "what it writes is committed
/// together with its answer under that id" (`WasmBroker::handle`'s contract, and what main's per-request
/// slot gave; docs/decisions.md: "A recorded (forwarded) request's answer is written in the store
/// transaction that holds the changes it reports, or nowhere"). A bulk dead-letter replay of more than
/// one chunk commits its first chunk unrecorded when its second command enters the gate (`Recording`:
/// "a request of several commands ... commits its earlier commands unrecorded"); when the commit of its
/// last chunk fails, the request fails although 100 of its rows were replayed and stored.
#[test]
fn review_a_recorded_request_of_several_commands_is_all_or_nothing_with_its_answer() {
    let (store, engine) = open();
    let _ = failed_bulk_replay(&store, &engine);
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let left = dead_letters(&reopened);
    assert_eq!(
        left,
        101,
        "a recorded request that failed left {} of its 101 replays stored without its answer",
        101 - left
    );
}

/// After that failure, the follower re-sends the request under the same id: nothing is recorded, so it
/// runs again, and must replay what is still stored as dead letters. It selects its rows with
/// `Engine::read` (`dlq_bulk.rs`), which reads memory that still holds the failed chunk's refused
/// changes (the engine reloads only when the next command enters the gate; main's bindings reloaded at
/// the start of the request, `recover`), so it answers 200 `replayed: 0` while a dead letter is stored.
#[test]
fn review_the_retry_of_a_failed_recorded_bulk_replay_replays_what_is_stored() {
    let (store, engine) = open();
    let _ = failed_bulk_replay(&store, &engine);
    let stored = {
        let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
        dead_letters(&reopened)
    };
    let ((status, answer), _) = run_bounded(bulk_replay(&engine, &store, "req/replay"))
        .expect("no deadlock")
        .unwrap();
    assert_eq!(status, 200, "the retry is answered");
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(
        (answer["replayed"].as_u64(), dead_letters(&reopened)),
        (Some(stored), 0),
        "{stored} dead letters were stored before the retry; it answered {answer} and left {} stored",
        dead_letters(&reopened)
    );
}

/// The abandoned recording again, where the other member joined its group *before* it was held: a push
/// joins the group that forms while a commit is in flight, the recorded request's command joins and
/// holds it, the commit in flight ends (its leader finds the next group held and stops), then the
/// recorded request is dropped. Its release must wake the push to lead the commit (a recorded request
/// keeps the command gate, so nothing else arrives to do it).
#[test]
fn an_abandoned_recording_wakes_a_member_of_its_group_to_lead_the_commit() {
    let (store, engine) = open();
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut first = Box::pin(push_to(&engine, 0));
    assert!(
        first.as_mut().poll(&mut cx).is_pending(),
        "set-up: commit 1 in flight"
    );
    let mut member = Box::pin(push_to(&engine, 2));
    assert!(
        member.as_mut().poll(&mut cx).is_pending(),
        "set-up: it joined the next group"
    );
    let recording = Rc::new(Recording::default());
    let mut holder = Box::pin(WithRecording {
        engine: &engine,
        recording: recording.clone(),
        future: Box::pin(async {
            let pushed = push_to(&engine, 1).await;
            futures::future::pending::<()>().await;
            pushed
        }),
    });
    assert!(
        holder.as_mut().poll(&mut cx).is_pending(),
        "set-up: it holds that group"
    );
    run_bounded(first).expect("commit 1 ends").unwrap();
    assert_eq!(
        store.commits.get(),
        1,
        "set-up: the held group is not committed"
    );
    assert!(
        member.as_mut().poll(&mut cx).is_pending(),
        "set-up: the member waits"
    );
    drop(holder);
    engine.abandon_recording(&recording);
    let answered = run_bounded(member);
    assert!(
        answered.is_some(),
        "the member is never answered: the released group has nobody to lead its commit"
    );
    answered.unwrap().unwrap();
    assert_eq!(store.commits.get(), 2, "the released group is committed");
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(stored(&reopened, "check"), vec![0, 2, 1]);
}

/// A later command of a recorded request that must be undone (a transaction that rolls back) cannot
/// reload the engine while the request's earlier changes are held uncommitted: the request fails whole,
/// nothing of it is written, and the engine goes on from the store (no deadlock on its own group).
#[test]
fn a_recorded_request_whose_later_command_is_undone_fails_whole_and_keeps_nothing() {
    let (store, engine) = open();
    block_on(push_to(&engine, 100)).unwrap();
    let popped = block_on(engine.pop(pop_request("g"), None)).unwrap();
    let m = &popped.messages[0];
    let ack = TxOperation::Ack {
        item: AckItem {
            lease_id: Some(popped.lease_id.as_str().into()),
            ..AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
        },
        group: Some("g".into()),
    };
    // Under the same lease, the message the request pushes first: past the leased span, so its ack is
    // refused when the transaction's acks are resolved (after the precheck), and the transaction rolls
    // back (the engine must undo the first ack and the request's push).
    let past_span = TxOperation::Ack {
        item: AckItem {
            lease_id: Some(popped.lease_id.as_str().into()),
            ..AckItem::new("tx-0", &m.partition_id, AckStatus::Completed)
        },
        group: Some("g".into()),
    };
    let commits = store.commits.get();
    let outcome = run_bounded(recorded(&engine, &store.inner, "req/undone", async {
        push_to(&engine, 0).await?;
        engine
            .transaction(vec![ack.clone(), past_span.clone()])
            .await
    }))
    .expect("no deadlock");
    assert!(
        matches!(outcome, Err(EngineError::Store(_))),
        "the request fails: {outcome:?}"
    );
    assert_eq!(store.inner.note("req/undone"), None, "nothing recorded");
    assert_eq!(store.commits.get(), commits, "nothing written");
    block_on(push_to(&engine, 1)).unwrap();
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(
        stored(&reopened, "check"),
        vec![100, 1],
        "push 0 was dropped with its request"
    );
}

// Gathering (`Host::gather`, engine module `group`): over a store whose commit completes in the call that
// starts it (Durable Object SQLite), commands meet no commit in flight; a leader that first awaits the
// host's gather commits the commands applied meanwhile together with its own.

/// A `MemStore` whose commits complete in the call that starts them, as Durable Object SQLite's do;
/// counts them and can fail its commit number `n`.
#[derive(Clone)]
struct InstantStore {
    inner: MemStore,
    commits: Rc<Cell<u32>>,
    fail_commit: Rc<Cell<Option<u32>>>,
}

impl Store for InstantStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        self.inner.scan(prefix).await
    }
    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.inner.get(keys).await
    }
    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        self.inner.first_keys(ranges).await
    }
    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        let n = self.commits.get() + 1;
        self.commits.set(n);
        if self.fail_commit.get() == Some(n) {
            return Err(StoreError::other("injected failure of a gathered commit"));
        }
        self.inner.commit(changes).await
    }
}

/// A host whose gather yields to the executor once (the other futures of a `join_all` are polled
/// meanwhile, as the requests a macrotask lets in are served), counting the gathers.
#[derive(Clone)]
struct GatherHost {
    inner: TestHost,
    gathers: Rc<Cell<u32>>,
}

impl Host for GatherHost {
    fn now_ms(&self) -> i64 {
        self.inner.now_ms()
    }
    fn sleep(&self, ms: u64) -> futures::future::LocalBoxFuture<'static, ()> {
        self.inner.sleep(ms)
    }
    fn entropy(&self) -> u64 {
        self.inner.entropy()
    }
    fn gather(&self) -> Option<futures::future::LocalBoxFuture<'static, ()>> {
        self.gathers.set(self.gathers.get() + 1);
        Some(Box::pin(YieldOnce(false)))
    }
}

fn instant_store() -> InstantStore {
    InstantStore {
        inner: MemStore::new(),
        commits: Rc::new(Cell::new(0)),
        fail_commit: Rc::new(Cell::new(None)),
    }
}

fn open_gathering() -> (InstantStore, GatherHost, Engine<InstantStore, GatherHost>) {
    let store = instant_store();
    let host = GatherHost {
        inner: TestHost::new(),
        gathers: Rc::new(Cell::new(0)),
    };
    let engine = block_on(Engine::open(store.clone(), host.clone(), config())).unwrap();
    (store, host, engine)
}

#[test]
fn over_a_store_that_commits_at_once_gathering_commits_concurrent_commands_together() {
    // Without gathering, each command commits alone: nothing is ever in flight.
    let store = instant_store();
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let results = block_on(join_all((0..20).map(|i| push_to(&engine, i))));
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(store.commits.get(), 20, "one commit per push");
    assert_eq!(engine.counters().shared, 0);

    let (store, host, engine) = open_gathering();
    let results = block_on(join_all((0..20).map(|i| push_to(&engine, i))));
    assert!(results
        .iter()
        .all(|r| r.as_ref().unwrap()[0].status == PushStatus::Queued));
    // The first push gathers; the other 19 are applied meanwhile and ride in its commit.
    assert_eq!((store.commits.get(), host.gathers.get()), (1, 1));
    assert_eq!(
        (engine.counters().commits, engine.counters().shared),
        (1, 19)
    );
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(stored(&reopened, "check"), (0..20).collect::<Vec<_>>());
}

#[test]
fn a_failed_gathered_commit_fails_every_member_and_loses_no_acknowledged_write() {
    let (store, _host, engine) = open_gathering();
    // A gathered commit that succeeds: five acknowledged pushes.
    let acked = block_on(join_all((0..5).map(|i| push_to(&engine, i))));
    assert!(acked.iter().all(|r| r.is_ok()));
    assert_eq!(store.commits.get(), 1);
    // The next gathered commit fails: its pushes and the pop applied on top of them.
    store.fail_commit.set(Some(2));
    let pushes = join_all((10..15).map(|i| push_to(&engine, i)));
    let pop = engine.pop(
        PopRequest {
            group: Some("eager".into()),
            batch: Some(100),
            ..PopRequest::queue("q")
        },
        None,
    );
    let (pushes, pop) = block_on(futures::future::join(pushes, pop));
    for (i, r) in pushes.iter().enumerate() {
        assert!(
            matches!(r, Err(EngineError::Store(_))),
            "push {} was in the failed commit: {r:?}",
            10 + i
        );
    }
    assert!(
        matches!(pop, Err(EngineError::Store(_))),
        "the pop gathered into the failed commit fails too: {pop:?}"
    );
    assert_eq!(store.commits.get(), 2, "one commit held them all");
    // Every acknowledged push is there, nothing of the failed commit is, and the broker goes on.
    assert_eq!(stored(&engine, "after"), (0..5).collect::<Vec<_>>());
    let again = block_on(push_to(&engine, 20)).unwrap();
    assert_eq!(
        (again[0].status.clone(), again[0].offset),
        (PushStatus::Queued, 5)
    );
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(stored(&reopened, "check"), vec![0, 1, 2, 3, 4, 20]);
}

#[test]
fn a_lone_command_gathers_again_only_after_commits_without_company() {
    let (store, host, engine) = open_gathering();
    // Company found: gathering goes on at every commit.
    for round in 0..3 {
        let first = 100 + 10 * round;
        let results = block_on(join_all((first..first + 4).map(|i| push_to(&engine, i))));
        assert!(results.iter().all(|r| r.is_ok()));
    }
    assert_eq!((store.commits.get(), host.gathers.get()), (3, 3));
    // One at a time: each gather finds nobody, and the commits without gathering after it double, up to
    // `period`: gathers at the 1st, 3rd, 6th, 11th, 20th lone push, then every `period + 1`.
    let period = queen_edge::engine::GATHER_PROBE_EVERY;
    assert_eq!(period, 16, "the positions below are for 16");
    let mut gathered_at = Vec::new();
    for i in 1..=71 {
        let before = host.gathers.get();
        block_on(push_to(&engine, i)).unwrap();
        if host.gathers.get() > before {
            gathered_at.push(i);
        }
    }
    assert_eq!(gathered_at, vec![1, 3, 6, 11, 20, 37, 54, 71]);
    // Company again, at the next gather: gathering goes on at every commit.
    for i in 72..88 {
        block_on(push_to(&engine, i)).unwrap();
    }
    let gathers = host.gathers.get();
    for round in 0..3 {
        let first = 200 + 10 * round;
        let results = block_on(join_all((first..first + 4).map(|i| push_to(&engine, i))));
        assert!(results.iter().all(|r| r.is_ok()));
    }
    assert_eq!(host.gathers.get(), gathers + 3);
}

#[test]
fn a_leader_dropped_while_it_gathers_has_a_member_lead_the_commit() {
    let (store, _host, engine) = open_gathering();
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut leader = Box::pin(push_to(&engine, 1));
    assert!(leader.as_mut().poll(&mut cx).is_pending(), "it gathers");
    let mut member = Box::pin(push_to(&engine, 2));
    assert!(
        member.as_mut().poll(&mut cx).is_pending(),
        "applied, waits for the gathering leader's commit"
    );
    drop(leader);
    let answered = run_bounded(member).expect("the member leads the stranded group's commit");
    assert_eq!(answered.unwrap()[0].status, PushStatus::Queued);
    assert_eq!(store.commits.get(), 1);
    // The dropped leader's push was applied in that group and is committed with it (never answered).
    assert_eq!(stored(&engine, "check"), vec![1, 2]);
}

#[test]
fn review_a_reload_waiting_for_a_gathering_leader_that_is_dropped_leads_the_commit_itself() {
    // `Engine::reload` (and every flush: `read_loaded`, a reload after a failure) holds the gate and
    // waits for the group in flight. If that group's leader is dropped while it gathers, the flush is
    // the only one left to lead it: nobody else can take the gate and join.
    let (store, _host, engine) = open_gathering();
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut leader = Box::pin(push_to(&engine, 1));
    assert!(leader.as_mut().poll(&mut cx).is_pending(), "it gathers");
    let mut reload = Box::pin(engine.reload());
    assert!(
        reload.as_mut().poll(&mut cx).is_pending(),
        "the reload waits for the gathered group"
    );
    drop(leader);
    let reloaded = run_bounded(reload).expect("the reload leads the stranded group's commit");
    assert_eq!(reloaded, Ok(()));
    assert_eq!(store.commits.get(), 1);
    assert_eq!(stored(&engine, "check"), vec![1]);
}

#[test]
fn review_a_leader_dropped_mid_commit_acknowledges_nothing_applied_on_top_of_that_commit() {
    // The leader's request is cancelled while its commit is in flight: that commit's outcome is
    // unknown (here it never happens). The group formed meanwhile was applied on top of it; `Leading`'s
    // drop calls its members to lead (the gathering change), so one commits it at once. It must not be
    // acknowledged as if the commit under it had landed: here the first push's segment is missing.
    let (store, engine) = open();
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut leader = Box::pin(push_to(&engine, 0));
    assert!(
        leader.as_mut().poll(&mut cx).is_pending(),
        "set-up: commit 1 in flight"
    );
    let mut member = Box::pin(push_to(&engine, 1));
    assert!(
        member.as_mut().poll(&mut cx).is_pending(),
        "set-up: it joined the next group"
    );
    drop(leader);
    let answered = run_bounded(member).expect("the member is answered, not stranded");
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let found = block_on(reopened.pop(
        PopRequest {
            group: Some("check".into()),
            batch: Some(1000),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .map(|reply| {
        reply
            .messages
            .iter()
            .map(|m| m.payload.to_value().unwrap()["i"].as_u64().unwrap() as u32)
            .collect::<Vec<_>>()
    });
    if answered.is_ok() {
        assert_eq!(
            found,
            Ok(vec![1]),
            "push 1 was acknowledged ({answered:?}) but a restart does not find it"
        );
    }
    assert!(
        matches!(answered, Err(EngineError::Store(_))),
        "applied on a commit of unknown outcome, push 1 fails: {answered:?}"
    );
    // The engine goes on from what the store holds.
    block_on(push_to(&engine, 2)).unwrap();
    assert_eq!(engine.counters().reloads, 1);
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert!(stored(&reopened, "check").contains(&2));
}
