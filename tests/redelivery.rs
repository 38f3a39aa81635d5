//! Issue 16's per-queue options on the sans-IO core: crash-loop quarantine (`reclaimLimit`), retry
//! backoff (`retryBackoff`) and the delivery log (`deliveryLog`): each option's behaviour, its
//! interaction with the retry budget and the ack table, restarts, and the same workload with every
//! option off (Queen's behaviour).

use crate::support;

use queen_edge::core::api::*;
use support::*;

const LEASE_MS: i64 = 10_000;

fn options(reclaim: Option<u32>, log: Option<DeliveryLogMode>) -> OptionsPatch {
    OptionsPatch {
        lease_time_s: Some(LEASE_MS as u64 / 1000),
        reclaim_limit: reclaim,
        delivery_log: log,
        ..Default::default()
    }
}

/// Pops `batch` in queue mode, then lets the lease run out.
fn pop_and_expire(h: &mut Harness, batch: u32) -> PopReply {
    let r = h.pop("q", None, batch);
    h.advance(LEASE_MS);
    r
}

fn backoff(base_ms: u64, factor: f64, max_ms: u64) -> RetryBackoff {
    RetryBackoff {
        base_ms,
        factor_permille: (factor * 1000.0) as u32,
        max_ms,
    }
}

fn log(h: &Harness, query: DeliveryQuery) -> DeliveryPage {
    h.broker.deliveries(&DeliveryQuery {
        limit: if query.limit == 0 { 100 } else { query.limit },
        ..query
    })
}

fn outcomes(page: &DeliveryPage) -> Vec<&'static str> {
    page.records.iter().map(|r| r.outcome.as_str()).collect()
}

// ---------------------------------------------------------------------------------------------
// reclaimLimit
// ---------------------------------------------------------------------------------------------

#[test]
fn off_by_default_an_expiring_span_is_redelivered_whole_forever() {
    let mut h = Harness::new();
    h.configure("q", options(None, None));
    h.push_n("q", 5);
    for attempt in 1..=8 {
        let r = pop_and_expire(&mut h, 5);
        assert_eq!(offsets(&r), vec![0, 1, 2, 3, 4], "attempt {attempt}");
        assert_eq!(r.messages[0].delivery_attempt, attempt);
    }
    assert!(h.dlq("q").is_empty());
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!((lane.quarantined_offset, lane.retry_count), (None, 0));
    assert_eq!(
        log(&h, DeliveryQuery::default()).total,
        0,
        "no delivery log when off"
    );
}

#[test]
fn reclaim_limit_delivers_the_head_alone_then_dead_letters_it() {
    let mut h = Harness::new();
    h.configure("q", options(Some(2), None));
    h.push_n("q", 5);
    // Two expiries of the whole span from offset 0: the third claim delivers the head alone.
    assert_eq!(offsets(&pop_and_expire(&mut h, 5)), vec![0, 1, 2, 3, 4]);
    assert_eq!(offsets(&pop_and_expire(&mut h, 5)), vec![0, 1, 2, 3, 4]);
    let alone = h.pop("q", None, 5);
    assert_eq!(offsets(&alone), vec![0]);
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!(
        (lane.quarantined_offset, lane.batch_end),
        (Some(0), Some(0))
    );
    // The head alone outlives its lease twice more: the next claim files it and takes the rest.
    h.advance(LEASE_MS);
    assert_eq!(offsets(&pop_and_expire(&mut h, 5)), vec![0]);
    assert!(h.dlq("q").is_empty(), "one expiry alone of two");
    let rest = h.pop("q", None, 5);
    assert_eq!(offsets(&rest), vec![1, 2, 3, 4], "whole spans again");
    let dlq = h.dlq("q");
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].offset, 0);
    assert!(
        dlq[0].error_message.contains("expired 2 times"),
        "{}",
        dlq[0].error_message
    );
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).quarantined_offset, None);
    h.ack_msgs(&rest, &[(0, C), (1, C), (2, C), (3, C)]);
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).committed, 4);
}

#[test]
fn an_acked_head_ends_the_quarantine() {
    let mut h = Harness::new();
    h.configure("q", options(Some(1), None));
    h.push_n("q", 4);
    pop_and_expire(&mut h, 4);
    let alone = h.pop("q", None, 4);
    assert_eq!(offsets(&alone), vec![0]);
    let res = h.ack_msgs(&alone, &[(0, C)]);
    assert!(res[0].success && res[0].lease_released);
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).quarantined_offset, None);
    assert_eq!(offsets(&h.pop("q", None, 4)), vec![1, 2, 3]);
    assert!(h.dlq("q").is_empty());
}

#[test]
fn a_slow_batch_that_makes_progress_is_never_quarantined() {
    let mut h = Harness::new();
    h.configure("q", options(Some(1), None));
    h.push_n("q", 6);
    // Each claim acks its first message, then expires: the next claim starts elsewhere.
    for start in 0..5u64 {
        let r = h.pop("q", None, 6);
        assert_eq!(r.messages[0].offset, start);
        assert_eq!(r.messages.len() as u64, 6 - start, "a whole span");
        h.ack_msgs(&r, &[(0, C)]);
        h.advance(LEASE_MS);
    }
    // An extended lease does not expire at all.
    let r = h.pop("q", None, 6);
    h.advance(LEASE_MS - 1);
    assert_eq!(h.broker.extend_lease(h.now, &r.lease_id, 60).renewed, 1);
    h.advance(LEASE_MS);
    assert!(h.dlq("q").is_empty());
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).quarantined_offset, None);
}

#[test]
fn a_quarantined_head_is_charged_by_failed_like_any_head() {
    let mut h = Harness::new();
    let mut o = options(Some(1), None);
    o.retry_limit = Some(1);
    o.retry_delay_ms = Some(100);
    h.configure("q", o);
    h.push_n("q", 3);
    pop_and_expire(&mut h, 3);
    let alone = h.pop("q", None, 3);
    assert_eq!(offsets(&alone), vec![0]);
    // `failed` with budget left: charged, held, still quarantined (the head comes back alone).
    h.ack_msgs(&alone, &[(0, F)]);
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!((lane.retry_count, lane.quarantined_offset), (1, Some(0)));
    assert!(lane.hold_until_ms.is_some());
    h.advance(100);
    let again = h.pop("q", None, 3);
    assert_eq!(offsets(&again), vec![0]);
    // Budget exhausted: row 5 files it with the consumer's error; claims go back to whole spans.
    let item = AckItem::new(
        &again.messages[0].transaction_id,
        &again.messages[0].partition_id,
        F,
    )
    .with_lease(&again.lease_id)
    .with_error("handler crashed");
    let res = h.ack(None, vec![item]);
    assert!(res[0].dlq);
    assert_eq!(h.dlq("q")[0].error_message, "handler crashed");
    assert_eq!(offsets(&h.pop("q", None, 3)), vec![1, 2]);
}

#[test]
fn with_the_dead_letter_queue_off_the_quarantined_head_is_dropped() {
    let mut h = Harness::new();
    let mut o = options(Some(1), None);
    o.dead_letter_queue = Some(false);
    o.dlq_after_max_retries = Some(false);
    h.configure("q", o);
    h.push_n("q", 3);
    pop_and_expire(&mut h, 3);
    assert_eq!(offsets(&pop_and_expire(&mut h, 3)), vec![0]);
    assert_eq!(offsets(&h.pop("q", None, 3)), vec![1, 2]);
    assert!(h.dlq("q").is_empty());
}

#[test]
fn the_quarantine_and_its_streak_survive_a_restart() {
    let mut h = Harness::new();
    h.configure("q", options(Some(2), None));
    h.push_n("q", 3);
    pop_and_expire(&mut h, 3);
    h.restart();
    pop_and_expire(&mut h, 3);
    h.restart();
    assert_eq!(offsets(&pop_and_expire(&mut h, 3)), vec![0]);
    h.restart();
    assert_eq!(
        h.lane("q", QUEUE_MODE_GROUP).quarantined_offset,
        Some(0),
        "stored in the lane record"
    );
    assert_eq!(offsets(&pop_and_expire(&mut h, 3)), vec![0]);
    h.restart();
    assert_eq!(offsets(&h.pop("q", None, 3)), vec![1, 2]);
    assert_eq!(h.dlq("q").len(), 1);
    h.broker.check_invariants().unwrap();
}

#[test]
fn named_groups_are_quarantined_per_lane() {
    let mut h = Harness::new();
    h.configure("q", options(Some(1), None));
    h.push_n("q", 3);
    let crashing = h.pop("q", Some("crashing"), 3);
    let healthy = h.pop("q", Some("healthy"), 3);
    assert_eq!((crashing.messages.len(), healthy.messages.len()), (3, 3));
    h.ack_msgs(&healthy, &[(0, C), (1, C), (2, C)]);
    h.advance(LEASE_MS);
    assert_eq!(offsets(&h.pop("q", Some("crashing"), 3)), vec![0]);
    h.push_n("q", 1);
    assert_eq!(offsets(&h.pop("q", Some("healthy"), 3)), vec![3]);
}

// ---------------------------------------------------------------------------------------------
// retryBackoff
// ---------------------------------------------------------------------------------------------

/// Fails the head of a fresh claim and returns the hold the lane shows, in ms from now.
fn fail_head(h: &mut Harness) -> i64 {
    let r = h.pop("q", None, 2);
    assert_eq!(r.messages[0].offset, 0, "the same head comes back");
    h.ack_msgs(&r, &[(0, F)]);
    let hold = h.lane("q", QUEUE_MODE_GROUP).hold_until_ms.expect("held");
    assert!(h.pop("q", None, 2).messages.is_empty(), "held");
    hold - h.now
}

#[test]
fn off_by_default_every_failure_waits_retry_delay() {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            retry_delay_ms: Some(250),
            retry_limit: Some(5),
            ..Default::default()
        },
    );
    h.push_n("q", 2);
    for _ in 0..4 {
        assert_eq!(fail_head(&mut h), 250);
        h.advance(250);
    }
}

#[test]
fn backoff_grows_per_charged_failure_up_to_its_cap() {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            retry_delay_ms: Some(5),
            retry_limit: Some(5),
            retry_backoff: Some(backoff(100, 2.0, 500)),
            ..Default::default()
        },
    );
    h.push_n("q", 2);
    let mut holds = Vec::new();
    for _ in 0..5 {
        let hold = fail_head(&mut h);
        holds.push(hold);
        h.advance(hold);
    }
    assert_eq!(holds, vec![100, 200, 400, 500, 500]);
    // The budget is spent: the sixth failure files the head (row 5), the budget restarts, and so
    // does the curve.
    let r = h.pop("q", None, 2);
    let res = h.ack_msgs(&r, &[(0, F)]);
    assert!(res[0].dlq);
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).retry_count, 0);
    assert_eq!(
        fail_head_at(&mut h, 1),
        100,
        "n starts again with the budget"
    );
}

fn fail_head_at(h: &mut Harness, offset: u64) -> i64 {
    let r = h.pop("q", None, 1);
    assert_eq!(r.messages[0].offset, offset);
    h.ack_msgs(&r, &[(0, F)]);
    h.lane("q", QUEUE_MODE_GROUP).hold_until_ms.expect("held") - h.now
}

#[test]
fn a_completed_batch_restarts_the_curve_and_retry_charges_nothing() {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            retry_limit: Some(5),
            retry_backoff: Some(backoff(100, 3.0, 10_000)),
            ..Default::default()
        },
    );
    h.push_n("q", 2);
    assert_eq!(fail_head(&mut h), 100);
    h.advance(100);
    assert_eq!(fail_head(&mut h), 300);
    h.advance(300);
    // `retry` holds nothing and charges nothing.
    let r = h.pop("q", None, 1);
    h.ack_msgs(&r, &[(0, R)]);
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).hold_until_ms, None);
    // Completing the batch resets the budget: the next failure waits baseMs again.
    let r = h.pop("q", None, 1);
    h.ack_msgs(&r, &[(0, C)]);
    assert_eq!(fail_head_at(&mut h, 1), 100);
}

#[test]
fn bad_backoffs_and_reclaim_limits_are_refused_and_change_nothing() {
    let mut h = Harness::new();
    h.configure("q", OptionsPatch::default());
    for bad in [
        backoff(0, 2.0, 100),
        backoff(10, 0.5, 100),
        backoff(100, 2.0, 10),
    ] {
        let e = h
            .broker
            .configure(
                h.now,
                ConfigureRequest {
                    queue: "q".into(),
                    options: OptionsPatch {
                        retry_backoff: Some(bad),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert!(e.message.contains("retryBackoff"), "{}", e.message);
    }
    let e = h
        .broker
        .configure(
            h.now,
            ConfigureRequest {
                queue: "q".into(),
                options: options(Some(1_000_000), None),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(e.message.contains("reclaimLimit"), "{}", e.message);
    assert_eq!(
        h.commit().puts().count(),
        0,
        "a refused configure writes nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// deliveryLog
// ---------------------------------------------------------------------------------------------

#[test]
fn failures_mode_records_every_attempt_that_did_not_complete() {
    let mut h = Harness::new();
    let mut o = options(None, Some(DeliveryLogMode::Failures));
    o.retry_delay_ms = Some(100);
    o.retry_limit = Some(1);
    h.configure("q", o);
    h.push_n("q", 3);
    // completed: not recorded
    let r = h.pop("q", None, 1);
    h.ack_msgs(&r, &[(0, C)]);
    // retry
    let r = h.pop("q", None, 2);
    h.ack_msgs(&r, &[(0, R)]);
    // failed (charged, held)
    let r = h.pop("q", None, 2);
    let item = AckItem::new(
        &r.messages[0].transaction_id,
        &r.messages[0].partition_id,
        F,
    )
    .with_lease(&r.lease_id)
    .with_error("boom");
    h.ack(None, vec![item]);
    h.advance(100);
    // expired
    let expired = pop_and_expire(&mut h, 2);
    h.pop("q", None, 2); // the clock passes the expiry: recorded
    h.advance(LEASE_MS);
    // exhausted: dead-lettered
    let r = h.pop("q", None, 2);
    h.ack_msgs(&r, &[(0, F)]);
    let page = log(&h, DeliveryQuery::default());
    assert_eq!(
        outcomes(&page),
        vec!["dead_lettered", "expired", "expired", "failed", "retry"],
        "newest first"
    );
    let failed = &page.records[3];
    assert_eq!(
        (
            failed.first,
            failed.last,
            failed.offset,
            failed.error.as_deref()
        ),
        (1, 2, Some(1), Some("boom"))
    );
    assert_eq!(failed.hold_until_ms, Some(failed.at_ms + 100));
    let exp = &page.records[2];
    assert_eq!(exp.lease_id.as_deref(), Some(expired.lease_id.as_str()));
    assert_eq!(
        exp.attempt, 3,
        "retry, failed, then this third claim from offset 1"
    );
}

#[test]
fn all_mode_records_completions_and_auto_acks_too() {
    let mut h = Harness::new();
    h.configure("q", options(None, Some(DeliveryLogMode::All)));
    h.push_n("q", 4);
    let r = h.pop("q", None, 2);
    h.ack_msgs(&r, &[(0, C)]);
    assert_eq!(
        log(&h, DeliveryQuery::default()).total,
        0,
        "a partial ack does not end the attempt"
    );
    h.ack_msgs(&r, &[(1, C)]);
    let mut req = PopRequest::queue("q");
    req.batch = Some(2);
    req.auto_ack = true;
    h.pop_with(req);
    let page = log(&h, DeliveryQuery::default());
    assert_eq!(outcomes(&page), vec!["auto_acked", "completed"]);
    assert_eq!((page.records[0].first, page.records[0].last), (2, 3));
    assert_eq!(
        page.records[1].lease_id.as_deref(),
        Some(r.lease_id.as_str())
    );
}

#[test]
fn the_log_is_filtered_paged_and_survives_restarts() {
    let mut h = Harness::new();
    h.configure("q", options(None, Some(DeliveryLogMode::All)));
    h.configure("other", options(None, Some(DeliveryLogMode::All)));
    let pushed = h.push_n("q", 6);
    h.push_to("q", "p2", vec![serde_json::json!(1)]);
    h.push_n("other", 1);
    for group in ["a", "b"] {
        for _ in 0..4 {
            let r = h.pop("q", Some(group), 2);
            let statuses: Vec<_> = (0..r.messages.len()).map(|i| (i, C)).collect();
            h.ack_msgs(&r, &statuses);
        }
    }
    let r = h.pop("other", None, 1);
    h.ack_msgs(&r, &[(0, C)]);
    h.restart();
    let all = log(&h, DeliveryQuery::default());
    assert_eq!(
        all.total, 9,
        "four claims per group and one on the other queue"
    );
    let q = |queue: &str, group: Option<&str>, partition: Option<&str>, tx: Option<&str>| {
        log(
            &h,
            DeliveryQuery {
                queue: Some(queue.into()),
                group: group.map(str::to_string),
                partition: partition.map(str::to_string),
                transaction_id: tx.map(str::to_string),
                ..Default::default()
            },
        )
    };
    assert_eq!(q("other", None, None, None).total, 1);
    let a = q("q", Some("a"), None, None);
    assert!(a.records.iter().all(|r| r.group == "a" && r.queue == "q"));
    let tx = &pushed[3].transaction_id;
    let by_tx = q("q", None, None, Some(tx));
    assert_eq!(
        by_tx.total, 2,
        "one completed attempt per group held offset 3"
    );
    assert!(by_tx
        .records
        .iter()
        .all(|r| (r.first..=r.last).contains(&3)));
    assert_eq!(q("q", None, Some("p2"), None).records.len(), 2);
    let page = log(
        &h,
        DeliveryQuery {
            queue: Some("q".into()),
            limit: 2,
            offset: 1,
            ..Default::default()
        },
    );
    let whole = q("q", None, None, None);
    assert_eq!(page.total, whole.total);
    assert_eq!(page.records, whole.records[1..3].to_vec());
}

#[test]
fn the_unfiltered_log_is_newest_first_across_queues() {
    let mut h = Harness::new();
    h.configure("q", options(None, Some(DeliveryLogMode::All)));
    h.configure("other", options(None, Some(DeliveryLogMode::All)));
    h.push_n("q", 3);
    h.push_n("other", 3);
    for _ in 0..3 {
        for queue in ["q", "other"] {
            let r = h.pop(queue, None, 1);
            h.ack_msgs(&r, &[(0, C)]);
        }
    }
    for restarted in [false, true] {
        if restarted {
            h.restart();
        }
        let all = log(&h, DeliveryQuery::default());
        let order: Vec<(&str, u64)> = all
            .records
            .iter()
            .map(|r| (r.queue.as_str(), r.first))
            .collect();
        assert_eq!(
            order,
            [
                ("other", 2),
                ("q", 2),
                ("other", 1),
                ("q", 1),
                ("other", 0),
                ("q", 0)
            ],
            "restarted: {restarted}"
        );
    }
}

#[test]
fn each_queue_keeps_its_newest_records_up_to_the_bound() {
    let mut h = Harness::new();
    h.configure("q", options(None, Some(DeliveryLogMode::All)));
    h.configure("other", options(None, Some(DeliveryLogMode::All)));
    h.push_n("other", 1);
    let r = h.pop("other", None, 1);
    h.ack_msgs(&r, &[(0, C)]);
    let claims = MAX_RECORDS_PER_QUEUE + 2;
    h.push_n("q", claims);
    for _ in 0..claims {
        let r = h.pop("q", None, 1);
        h.ack_msgs(&r, &[(0, C)]);
    }
    h.commit();
    let q = |h: &Harness| {
        log(
            h,
            DeliveryQuery {
                queue: Some("q".into()),
                limit: 1,
                offset: MAX_RECORDS_PER_QUEUE - 1,
                ..Default::default()
            },
        )
    };
    let oldest = q(&h);
    assert_eq!(oldest.total, MAX_RECORDS_PER_QUEUE);
    assert_eq!(oldest.records[0].first, 2, "the two oldest claims went");
    assert_eq!(
        log(&h, DeliveryQuery::default()).total,
        MAX_RECORDS_PER_QUEUE + 1
    );
    let stored = h.records.keys().filter(|k| k.starts_with("v/")).count();
    assert_eq!(
        stored,
        MAX_RECORDS_PER_QUEUE + 1,
        "the dropped records' keys went too"
    );
    h.restart();
    assert_eq!(q(&h).records, oldest.records);
    let other = DeliveryQuery {
        queue: Some("other".into()),
        ..Default::default()
    };
    assert_eq!(log(&h, other).total, 1, "another queue's record stays");
}

#[test]
fn the_log_is_kept_within_retention_and_goes_with_its_queue() {
    let mut h = Harness::new();
    let mut o = options(None, Some(DeliveryLogMode::All));
    o.retention_enabled = Some(true);
    o.retention_s = Some(60);
    h.configure("q", o);
    h.push_n("q", 2);
    let r = h.pop("q", None, 1);
    h.ack_msgs(&r, &[(0, C)]);
    h.advance(30_000);
    let r = h.pop("q", None, 1);
    h.ack_msgs(&r, &[(0, C)]);
    h.advance(31_000);
    h.broker.maintain(h.now);
    h.commit();
    let page = log(&h, DeliveryQuery::default());
    assert_eq!(page.total, 1, "the record older than retentionSeconds went");
    h.restart();
    assert_eq!(log(&h, DeliveryQuery::default()).total, 1);
    assert!(h.records.keys().any(|k| k.starts_with("v/")));
    h.broker.delete_queue(h.now, "q");
    h.commit();
    assert_eq!(log(&h, DeliveryQuery::default()).total, 0);
    assert!(!h.records.keys().any(|k| k.starts_with("v/")));
}

#[test]
fn expiries_are_recorded_once_even_across_restarts() {
    let mut h = Harness::new();
    h.configure("q", options(None, Some(DeliveryLogMode::Failures)));
    h.push_n("q", 1);
    pop_and_expire(&mut h, 1);
    h.push_n("q", 1); // any command moves the core's clock past the expiry
    assert_eq!(
        outcomes(&log(&h, DeliveryQuery::default())),
        vec!["expired"]
    );
    h.restart();
    h.advance(1);
    h.push_n("q", 1);
    assert_eq!(
        outcomes(&log(&h, DeliveryQuery::default())),
        vec!["expired"],
        "the re-armed timer does not record it again"
    );
}

#[test]
fn reclaim_and_the_log_together() {
    let mut h = Harness::new();
    h.configure("q", options(Some(1), Some(DeliveryLogMode::Failures)));
    h.push_n("q", 3);
    pop_and_expire(&mut h, 3);
    pop_and_expire(&mut h, 3);
    h.pop("q", None, 3);
    let page = log(&h, DeliveryQuery::default());
    assert_eq!(outcomes(&page), vec!["expired", "expired"]);
    assert_eq!(
        (page.records[0].first, page.records[0].last),
        (0, 0),
        "the head alone"
    );
    assert_eq!((page.records[1].first, page.records[1].last), (0, 2));
    assert_eq!(h.dlq("q").len(), 1);
}
