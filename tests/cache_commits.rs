//! The segment cache under group commit (docs/decisions.md, "Review of the segment cache order (session
//! 9) — review-cache"): a pushed segment is the cache's only readable copy until its commit lands, so no
//! trim may evict it before the engine reports that commit, with several commands per commit, pops of
//! other groups reading it meanwhile, and a commit failing in the middle.

use crate::support;

use futures::executor::block_on;
use futures::future::{join_all, LocalBoxFuture};
use futures::FutureExt;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use serde_json::json;
use std::future::Future;
use support::{completed_items, SlowStore, TestHost, YieldOnce};

const PARTITIONS: usize = 6;
/// Messages of about 1 KB per push: a segment of about 26 KB decoded.
const BATCH: usize = 25;
const ROUNDS: usize = 12;

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        // Two or three segments: every round's pushes are well over it.
        cache_bytes: 64 * 1024,
        ..BrokerConfig::default()
    }
}

/// A command of a round: `Some((round, partition))` for a push answered `Queued`, `None` for a pop
/// (and its ack), or the error.
type Command<'a> = LocalBoxFuture<'a, Result<Option<(usize, usize)>, String>>;

/// One round: a push to each partition and, interleaved, pops (and acks) of two groups, all issued at
/// once so they share commits. Returns the `(round, partition)` of each push answered `Queued`, and the
/// error of every command that failed.
fn round(engine: &Engine<SlowStore, TestHost>, r: usize) -> (Vec<(usize, usize)>, Vec<String>) {
    let pad = "z".repeat(1000);
    let mut commands: Vec<Command<'_>> = Vec::new();
    for p in 0..PARTITIONS {
        let items = (0..BATCH)
            .map(|i| PushItem {
                partition: format!("p{p}").into(),
                ..PushItem::new("q", json!({ "r": r, "p": p, "i": i, "pad": pad }))
            })
            .collect();
        commands.push(
            engine
                .push(items)
                .map(move |res| match res {
                    Ok(results) if results.iter().all(|x| x.status == PushStatus::Queued) => {
                        Ok(Some((r, p)))
                    }
                    Ok(results) => Err(format!("push answered {:?}", results[0].status)),
                    Err(e) => Err(e.to_string()),
                })
                .boxed_local(),
        );
        for group in ["fast", "slow"] {
            commands.push(
                async move {
                    let reply = engine
                        .pop(
                            PopRequest {
                                group: Some(group.into()),
                                batch: Some(BATCH as u32),
                                ..PopRequest::queue("q")
                            },
                            None,
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    // The slow group acks every other batch (the rest wait for their lease).
                    if group == "fast" || r.is_multiple_of(2) {
                        let items = completed_items(&reply);
                        engine
                            .ack(Some(group.into()), items)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(None)
                }
                .boxed_local(),
            );
        }
    }
    // Staggered: later commands arrive while earlier ones' commits are in flight.
    let staggered = commands
        .into_iter()
        .enumerate()
        .map(|(i, command)| async move {
            for _ in 0..i % 9 {
                YieldOnce(false).await;
            }
            command.await
        });
    let mut queued = Vec::new();
    let mut errors = Vec::new();
    for outcome in block_on(join_all(staggered)) {
        match outcome {
            Ok(Some(pushed)) => queued.push(pushed),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    (queued, errors)
}

#[test]
fn no_pushed_segment_leaves_the_cache_before_its_commit_even_when_a_commit_fails() {
    let store = SlowStore::new(3);
    for n in [5, 11, 12, 30] {
        store.fail_commit(n);
    }
    let host = TestHost::new();
    let engine = block_on(Engine::open(store.clone(), host.clone(), config())).expect("opens");
    let mut queued = Vec::new();
    let mut failed = 0;
    for r in 0..ROUNDS {
        let (pushed, errors) = round(&engine, r);
        queued.extend(pushed);
        for e in errors {
            // Only the failed groups' commands fail, and only because their commit failed.
            assert!(
                e.contains("injected failure") || e.contains("a commit failed"),
                "round {r}: {e}"
            );
            failed += 1;
        }
        host.now.set(host.now.get() + 1);
    }
    assert!(failed > 0, "some commit failed");
    assert!(
        queued.len() < ROUNDS * PARTITIONS && queued.len() > ROUNDS * PARTITIONS / 2,
        "{} pushes of {} queued",
        queued.len(),
        ROUNDS * PARTITIONS
    );
    // Every queued push is stored once: a new engine over the store delivers exactly those.
    let reopened = block_on(Engine::open(store.clone(), host.clone(), config())).expect("reopens");
    let mut seen: Vec<(usize, usize)> = Vec::new();
    loop {
        let reply = block_on(reopened.pop(
            PopRequest {
                group: Some("audit".into()),
                batch: Some(BATCH as u32),
                ..PopRequest::queue("q")
            },
            None,
        ))
        .expect("pop after reopen");
        if reply.messages.is_empty() {
            break;
        }
        let first = reply.messages[0].payload.to_value().expect("json");
        assert!(reply
            .messages
            .iter()
            .all(|m| m.payload.to_value().expect("json")["r"] == first["r"]));
        seen.push((
            first["r"].as_u64().expect("r") as usize,
            first["p"].as_u64().expect("p") as usize,
        ));
        let items = completed_items(&reply);
        block_on(reopened.ack(Some("audit".into()), items)).expect("ack");
    }
    seen.sort();
    queued.sort();
    assert_eq!(seen, queued);
}

/// `n` yields: a command that arrives a moment later.
async fn later(n: usize) {
    for _ in 0..n {
        YieldOnce(false).await;
    }
}

fn push_to<'a>(
    engine: &'a Engine<SlowStore, TestHost>,
    partition: &str,
    tag: &str,
) -> impl Future<Output = Result<(), String>> + 'a {
    let pad = "z".repeat(1000);
    let items = (0..BATCH)
        .map(|i| PushItem {
            partition: partition.into(),
            ..PushItem::new("q", json!({ "tag": tag, "i": i, "pad": pad }))
        })
        .collect();
    engine
        .push(items)
        .map(|r| r.map(|_| ()).map_err(|e| e.to_string()))
}

#[test]
fn a_segment_pushed_while_a_commit_is_in_flight_waits_for_its_own_commit() {
    // For each arrival time of the pop: push B's commit in flight, push C applied meanwhile (its own,
    // later commit), then a pop reading C. C is the farthest from its partition's head, so the first to
    // go once it may; it may only once its own commit landed, not B's.
    for arrival in 0..12 {
        let store = SlowStore::new(3);
        let engine =
            block_on(Engine::open(store.clone(), TestHost::new(), config())).expect("opens");
        block_on(push_to(&engine, "p2", "c0")).expect("push c0");
        let (b, c, pop) = block_on(futures::future::join3(
            push_to(&engine, "p1", "b"),
            async {
                later(1).await;
                push_to(&engine, "p2", "c").await
            },
            async {
                later(arrival).await;
                engine
                    .pop(
                        PopRequest {
                            group: Some("g".into()),
                            batch: Some(2 * BATCH as u32),
                            target: PopTarget::Partition {
                                queue: "q".into(),
                                partition: "p2".into(),
                            },
                            ..PopRequest::queue("q")
                        },
                        None,
                    )
                    .await
                    .map_err(|e| e.to_string())
            },
        ));
        b.expect("push b");
        c.expect("push c");
        let reply = pop.unwrap_or_else(|e| panic!("pop arriving after {arrival} yields: {e}"));
        assert!(reply.messages.len() == BATCH || reply.messages.len() == 2 * BATCH);
    }
}

#[test]
fn a_reload_while_a_commit_is_in_flight_keeps_what_that_commit_acknowledges() {
    let store = SlowStore::new(3);
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).expect("opens");
    let (a, reloaded) = block_on(futures::future::join(push_to(&engine, "p0", "a"), async {
        later(1).await;
        engine.reload().await
    }));
    a.expect("push a");
    reloaded.expect("reload");
    block_on(push_to(&engine, "p0", "b")).expect("push b");
    let reopened =
        block_on(Engine::open(store.clone(), TestHost::new(), config())).expect("reopens");
    let reply = block_on(reopened.pop(
        PopRequest {
            group: Some("audit".into()),
            batch: Some(4 * BATCH as u32),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .expect("pop");
    let tags: Vec<String> = reply
        .messages
        .iter()
        .step_by(BATCH)
        .map(|m| m.payload.to_value().expect("json")["tag"].to_string())
        .collect();
    assert_eq!(
        tags,
        ["\"a\"", "\"b\""],
        "both acknowledged pushes are stored"
    );
}
