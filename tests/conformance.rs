//! Conformance scenarios from wire-contract.md: the worked examples W1 to W13 (§3.5), each subtle
//! behaviour of §7.1, the lane transition-table rows (src/core/lane.rs) and the DECIDE choices, run on
//! the sans-IO core with an explicit clock.

mod support;

use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use serde_json::json;
use support::*;

const D_MS: i64 = 1000;

/// One lane, C=-1, a pop delivered offsets 0..=4 (E=4) under lease L; R=0, A=0, N=3, DLQ on.
fn w_setup(h: &mut Harness) -> PopReply {
    h.configure("q", OptionsPatch::default());
    h.push_n("q", 5);
    let reply = h.pop("q", None, 5);
    assert_eq!(offsets(&reply), vec![0, 1, 2, 3, 4]);
    reply
}

fn all(reply: &PopReply, s: AckStatus) -> Vec<(usize, AckStatus)> {
    (0..reply.messages.len()).map(|i| (i, s.clone())).collect()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w1_batch_ack_completes_and_releases() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let res = h.ack_msgs(&r, &all(&r, C));
    assert!(res
        .iter()
        .all(|x| x.success && x.lease_released && x.error.is_none()));
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!(
        (lane.committed, lane.lease_id, lane.retry_count),
        (4, None, 0)
    );
    assert!(h.pop("q", None, 5).messages.is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w2_partial_ack_keeps_lease_until_batch_end() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let res = h.ack_msgs(&r, &[(0, C), (1, C)]);
    assert!(res.iter().all(|x| x.success && !x.lease_released));
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!(lane.committed, 1);
    assert_eq!(lane.lease_id.as_deref(), Some(r.lease_id.as_str()));
    let res = h.ack_msgs(&r, &[(2, C), (3, C), (4, C)]);
    assert!(res.iter().all(|x| x.success && x.lease_released));
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).committed, 4);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w3_failed_in_the_middle_charges_and_holds_for_retry_delay() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let res = h.ack_msgs(&r, &[(0, C), (1, C), (2, F), (3, C), (4, C)]);
    assert!(res
        .iter()
        .all(|x| x.success && x.lease_released && !x.dlq && x.error.is_none()));
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!(
        (lane.committed, lane.retry_count, lane.lease_id.is_none()),
        (1, 1, true)
    );
    assert!(
        h.pop("q", None, 5).messages.is_empty(),
        "held for retryDelay"
    );
    h.advance(D_MS);
    let again = h.pop("q", None, 5);
    assert_eq!(offsets(&again), vec![2, 3, 4]);
    assert!(
        again.messages.iter().all(|m| m.delivery_attempt == 1),
        "a new start reports attempt 1 (§3.4)"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w4_retry_redelivers_at_once_without_charge() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let res = h.ack_msgs(&r, &[(0, C), (1, R), (2, C)]);
    assert!(res.iter().all(|x| x.success && x.lease_released));
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!((lane.committed, lane.retry_count), (0, 0));
    assert_eq!(offsets(&h.pop("q", None, 5)), vec![1, 2, 3, 4]);
}

/// Fails the head three times (R -> 3), leaving a fresh claim of 0..=4.
fn exhaust_budget(h: &mut Harness) -> PopReply {
    let mut r = w_setup(h);
    for expected_r in 1..=3 {
        h.ack_msgs(&r, &[(0, F)]);
        assert_eq!(h.lane("q", QUEUE_MODE_GROUP).retry_count, expected_r);
        h.advance(D_MS);
        r = h.pop("q", None, 5);
        assert_eq!(offsets(&r), vec![0, 1, 2, 3, 4]);
    }
    r
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w5_exhausted_failed_files_to_dlq_and_passes_the_poison_message() {
    let mut h = Harness::new();
    let r = exhaust_budget(&mut h);
    let mut items: Vec<AckItem> = r
        .messages
        .iter()
        .map(|m| AckItem::new(&m.transaction_id, &m.partition_id, C).with_lease(&m.lease_id))
        .collect();
    items[0].status = C;
    items[1].status = C;
    items[2] = items[2].clone().with_error("boom");
    items[2].status = F;
    let res = h.ack(None, items);
    assert!(res.iter().all(|x| x.success && x.error.is_none()));
    assert_eq!(
        res.iter().map(|x| x.dlq).collect::<Vec<_>>(),
        vec![false, false, true, false, false]
    );
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!(
        (
            lane.committed,
            lane.retry_count,
            lane.attempt_count,
            lane.lease_id
        ),
        (2, 0, 0, None)
    );
    let dlq = h.dlq("q");
    assert_eq!(dlq.len(), 1);
    assert_eq!(
        (
            dlq[0].offset,
            dlq[0].error_message.as_str(),
            dlq[0].retry_count
        ),
        (2, "boom", 3)
    );
    assert_eq!(
        offsets(&h.pop("q", None, 5)),
        vec![3, 4],
        "redelivered even though acked"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w6_exhausted_failed_with_both_dlq_flags_off_drops() {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            dead_letter_queue: Some(false),
            dlq_after_max_retries: Some(false),
            ..Default::default()
        },
    );
    let mut r;
    h.push_n("q", 5);
    r = h.pop("q", None, 5);
    for _ in 0..3 {
        h.ack_msgs(&r, &[(0, F)]);
        h.advance(D_MS);
        r = h.pop("q", None, 5);
    }
    let res = h.ack_msgs(&r, &[(0, C), (1, C), (2, F), (3, C), (4, C)]);
    assert!(res.iter().all(|x| x.success && !x.dlq));
    assert!(h.dlq("q").is_empty());
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!((lane.committed, lane.retry_count), (2, 0));
    assert_eq!(offsets(&h.pop("q", None, 5)), vec![3, 4]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w7_dlq_status_files_at_once_with_retries_exhausted() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let res = h.ack_msgs(&r, &[(0, D)]);
    assert!(res[0].success && res[0].dlq && res[0].lease_released);
    let dlq = h.dlq("q");
    assert_eq!(
        (
            dlq[0].offset,
            dlq[0].error_message.as_str(),
            dlq[0].retry_count
        ),
        (0, "Retries exhausted", 0)
    );
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).committed, 0);
    assert_eq!(offsets(&h.pop("q", None, 5)), vec![1, 2, 3, 4]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w8_lease_expiry_redelivers_with_higher_attempt_and_no_charge() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.advance(300_000);
    let again = h.pop("q", None, 5);
    assert_eq!(offsets(&again), vec![0, 1, 2, 3, 4]);
    assert!(again.messages.iter().all(|m| m.delivery_attempt == 2));
    assert_ne!(again.lease_id, r.lease_id);
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!((lane.retry_count, lane.committed), (0, -1));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w9_ack_with_a_superseded_lease_is_refused() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.advance(300_000);
    let _l2 = h.pop("q", None, 5);
    let res = h.ack_msgs(&r, &[(0, C)]);
    assert!(!res[0].success);
    assert_eq!(res[0].error.as_deref(), Some("Invalid or expired lease"));
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).committed, -1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w10_unfenced_ack_completes_another_workers_batch() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.advance(300_000);
    let l2 = h.pop("q", None, 5);
    let items = r
        .messages
        .iter()
        .map(|m| AckItem::new(&m.transaction_id, &m.partition_id, C))
        .collect();
    let res = h.ack(None, items);
    assert!(res.iter().all(|x| x.success && x.lease_released));
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!((lane.committed, lane.lease_id), (4, None));
    let _ = l2;
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w11_same_head_failing_reaches_dlq_on_the_fourth_failure() {
    let mut h = Harness::new();
    let mut r = w_setup(&mut h);
    let mut deliveries = 1;
    loop {
        let res = h.ack_msgs(&r, &[(0, F)]);
        if res[0].dlq {
            break;
        }
        h.advance(D_MS);
        r = h.pop("q", None, 5);
        deliveries += 1;
        assert!(deliveries <= 4);
    }
    assert_eq!(deliveries, 4, "retryLimit 3 -> N+1 deliveries");
    assert_eq!(h.dlq("q")[0].retry_count, 3);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w12_extend_with_empty_body_renews_to_now_plus_60() {
    let mut h = Harness::new();
    h.push_n("q", 1);
    let mut req = PopRequest::queue("q");
    req.lease_seconds = Some(10);
    let r = h.pop_with(req);
    let t0 = h.now;
    let ext = h.broker.extend_lease(t0, &r.lease_id, 60);
    assert_eq!(
        (ext.renewed, ext.expires_at_ms, ext.error),
        (1, Some(t0 + 60_000), None)
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn w13_extend_never_shortens() {
    let mut h = Harness::new();
    h.push_n("q", 1);
    let mut req = PopRequest::queue("q");
    req.lease_seconds = Some(30);
    let r = h.pop_with(req);
    let ext = h.broker.extend_lease(h.now, &r.lease_id, 5);
    assert_eq!((ext.renewed, ext.expires_at_ms), (1, Some(h.now + 30_000)));
}

// ---------------------------------------------------------------------------------------------
// §7.1 subtle behaviours
// ---------------------------------------------------------------------------------------------

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s1_expiry_does_not_increment_retry_count_queen_default() {
    let mut h = Harness::new();
    w_setup(&mut h);
    for attempt in 2..=10 {
        h.advance(300_001);
        let r = h.pop("q", None, 5);
        assert_eq!(r.messages[0].delivery_attempt, attempt);
        assert_eq!(h.lane("q", QUEUE_MODE_GROUP).retry_count, 0);
    }
    assert!(h.dlq("q").is_empty(), "a crash loop never reaches the DLQ");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s2_only_failed_charges_once_per_call_and_the_budget_is_per_lane() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.ack_msgs(&r, &[(1, F), (3, F)]);
    assert_eq!(
        h.lane("q", QUEUE_MODE_GROUP).retry_count,
        1,
        "charged once per call"
    );
    h.advance(D_MS);
    let r = h.pop("q", None, 5);
    h.ack_msgs(&r, &[(0, R)]);
    assert_eq!(
        h.lane("q", QUEUE_MODE_GROUP).retry_count,
        1,
        "retry never charges"
    );
    let r = h.pop("q", None, 5);
    // A different message failing shares the same lane budget.
    h.ack_msgs(&r, &[(0, C), (1, F)]);
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).retry_count, 2);
    h.advance(D_MS);
    let r = h.pop("q", None, 5);
    h.ack_msgs(&r, &all(&r, C));
    assert_eq!(
        h.lane("q", QUEUE_MODE_GROUP).retry_count,
        0,
        "a clean completion resets R"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s3_release_wakes_the_queue_and_failed_waits_for_retry_delay() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.broker.ack(
        h.now,
        None,
        &[AckItem::new(
            &r.messages[0].transaction_id,
            &r.messages[0].partition_id,
            R,
        )],
    );
    assert!(
        h.broker.take_woken_queues().iter().any(|q| q == "q"),
        "a release wakes parked pops"
    );
    h.commit();
    let r = h.pop("q", None, 5);
    h.broker.ack(
        h.now,
        None,
        &[AckItem::new(
            &r.messages[0].transaction_id,
            &r.messages[0].partition_id,
            F,
        )],
    );
    h.commit();
    assert_eq!(
        h.broker.next_deadline_ms(),
        Some(h.now + D_MS),
        "the hold end is a timer the engine sleeps to"
    );
    assert!(h.pop("q", None, 5).messages.is_empty());
    h.advance(D_MS);
    assert_eq!(h.pop("q", None, 5).messages.len(), 5);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s4_cursor_stops_at_the_lowest_message_that_will_come_back() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.ack_msgs(&r, &[(4, C), (3, C), (2, R), (0, C), (1, C)]);
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).committed, 1);
    assert_eq!(offsets(&h.pop("q", None, 5)), vec![2, 3, 4]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s5_error_chain_uses_any_error_in_the_call() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let m = &r.messages;
    let items = vec![
        AckItem::new(&m[0].transaction_id, &m[0].partition_id, D).with_lease(&r.lease_id),
        AckItem::new(&m[1].transaction_id, &m[1].partition_id, C)
            .with_lease(&r.lease_id)
            .with_error("from another item"),
    ];
    h.ack(None, items);
    assert_eq!(h.dlq("q")[0].error_message, "from another item");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s7_dlq_is_on_when_either_flag_is_on() {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            dead_letter_queue: Some(false),
            retry_limit: Some(0),
            ..Default::default()
        },
    );
    h.push_n("q", 1);
    let r = h.pop("q", None, 1);
    let res = h.ack_msgs(&r, &[(0, F)]);
    assert!(res[0].dlq, "dlqAfterMaxRetries alone keeps the DLQ on");
    assert_eq!(h.dlq("q").len(), 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s8_expired_lease_cannot_be_extended() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.advance(300_001);
    let ext = h.broker.extend_lease(h.now, &r.lease_id, 60);
    assert_eq!((ext.renewed, ext.expires_at_ms), (0, None));
    assert_eq!(ext.error.as_deref(), Some("Lease already expired"));
    let none = h.broker.extend_lease(h.now, "no-such-lease", 60);
    assert_eq!(none.error.as_deref(), Some("Lease not found"));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s9_multi_partition_pop_shares_one_lease_and_auto_ack_has_none() {
    let mut h = Harness::new();
    for p in ["a", "b", "c"] {
        h.push_to("q", p, vec![json!(p), json!(p)]);
    }
    let mut req = PopRequest::queue("q");
    req.batch = Some(10);
    req.partitions = Some(3);
    let r = h.pop_with(req);
    assert_eq!(r.partitions_claimed, 3);
    assert_eq!(r.messages.len(), 6);
    assert!(r
        .messages
        .iter()
        .all(|m| m.lease_id == r.lease_id && !r.lease_id.is_empty()));
    let ext = h.broker.extend_lease(h.now, &r.lease_id, 600);
    assert_eq!(ext.renewed, 3, "one extend renews every lane of the lease");

    h.push_to("auto", "Default", vec![json!(1), json!(2)]);
    let mut req = PopRequest::queue("auto");
    req.batch = Some(10);
    req.auto_ack = true;
    let r = h.pop_with(req);
    assert_eq!(r.lease_id, "");
    assert!(r.messages.iter().all(|m| m.lease_id.is_empty()));
    assert_eq!(h.lane("auto", QUEUE_MODE_GROUP).committed, 1);
    assert!(h.pop("auto", None, 10).messages.is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s10_effective_lease_precedence() {
    let mut h = Harness::new();
    h.push_n("pushed", 1);
    let r = h.pop("pushed", None, 1);
    assert_eq!(
        h.lane("pushed", QUEUE_MODE_GROUP).lease_expires_at_ms,
        Some(h.now + 60_000),
        "push-created: 60 s"
    );
    let _ = r;
    h.configure("conf", OptionsPatch::default());
    h.push_n("conf", 2);
    h.pop("conf", None, 1);
    assert_eq!(
        h.lane("conf", QUEUE_MODE_GROUP).lease_expires_at_ms,
        Some(h.now + 300_000),
        "after /configure: 300 s"
    );
    h.advance(300_001);
    let mut req = PopRequest::queue("conf");
    req.lease_seconds = Some(7);
    h.pop_with(req);
    assert_eq!(
        h.lane("conf", QUEUE_MODE_GROUP).lease_expires_at_ms,
        Some(h.now + 7_000),
        "leaseSeconds wins"
    );
    // Discovery ignores the queue's leaseTime.
    h.configure("billing.x", OptionsPatch::default());
    let mut cfg = ConfigureRequest {
        queue: "disc".into(),
        namespace: Some("billing".into()),
        task: Some("t".into()),
        options: OptionsPatch::default(),
    };
    cfg.options.lease_time_s = Some(900);
    h.broker.configure(h.now, cfg).unwrap();
    h.commit();
    h.push_n("disc", 1);
    let mut req = PopRequest::queue("disc");
    req.target = PopTarget::Discovery {
        namespace: Some("billing".into()),
        task: Some("t".into()),
    };
    let r = h.pop_with(req);
    assert_eq!(r.messages.len(), 1);
    assert_eq!(
        h.lane("disc", QUEUE_MODE_GROUP).lease_expires_at_ms,
        Some(h.now + 60_000)
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s11_dlq_listing_newest_first_with_paging() {
    let mut h = Harness::new();
    h.push_n("q", 3);
    for _ in 0..3 {
        let r = h.pop("q", None, 1);
        h.ack_msgs(&r, &[(0, D)]);
        h.advance(10);
    }
    let all = h.dlq("q");
    assert_eq!(
        all.iter().map(|d| d.offset).collect::<Vec<_>>(),
        vec![2, 1, 0]
    );
    let page = h.broker.dead_letters(&DlqQuery {
        queue: Some("q".into()),
        limit: 2,
        offset: 1,
        ..Default::default()
    });
    assert_eq!(
        page.iter().map(|d| d.offset).collect::<Vec<_>>(),
        vec![1, 0]
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s12_replay_is_atomic_idempotent_and_seen_by_every_group() {
    let mut h = Harness::new();
    h.push_n("q", 1);
    let ra = h.pop("q", Some("a"), 1);
    let rb = h.pop("q", Some("b"), 1);
    h.ack_msgs(&ra, &[(0, D)]);
    h.ack_msgs(&rb, &[(0, C)]);
    let letter = h.dlq("q")[0].clone();
    let replay = h.broker.replay_dead_letter(h.now, &letter.id).unwrap();
    h.commit();
    assert_eq!(replay.transaction_id, format!("dlq:{}", letter.id));
    assert_eq!(replay.status, PushStatus::Queued);
    assert!(h.dlq("q").is_empty());
    let again = h.broker.replay_dead_letter(h.now, &letter.id).unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound);
    for g in ["a", "b"] {
        let r = h.pop("q", Some(g), 5);
        assert_eq!(r.messages.len(), 1, "group {g} sees the replay");
        assert_eq!(r.messages[0].transaction_id, replay.transaction_id);
        assert_eq!(r.messages[0].offset, 1);
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s12_replay_by_address_replays_newest_row_once_and_removes_all() {
    let mut h = Harness::new();
    h.push_n("q", 1);
    let ra = h.pop("q", Some("a"), 1);
    let rb = h.pop("q", Some("b"), 1);
    h.ack_msgs(&ra, &[(0, D)]);
    h.advance(5);
    h.ack_msgs(&rb, &[(0, D)]);
    let newest = h.dlq("q")[0].clone();
    assert_eq!(newest.consumer_group, "b");
    let reply = h
        .broker
        .replay_address(h.now, &newest.partition_id, &newest.transaction_id)
        .unwrap();
    h.commit();
    assert_eq!(
        (reply.rows_removed, reply.transaction_id),
        (2, format!("dlq:{}", newest.id))
    );
    assert!(h.dlq("q").is_empty());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s13_delete_removes_only_dead_letter_rows() {
    let mut h = Harness::new();
    let pushed = h.push_n("q", 2);
    let r = h.pop("q", None, 1);
    h.ack_msgs(&r, &[(0, D)]);
    let err = h
        .broker
        .delete_dead_letters(h.now, &pushed[1].partition_id, &pushed[1].transaction_id)
        .unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::NotFound,
        "a live message cannot be deleted"
    );
    let n = h
        .broker
        .delete_dead_letters(h.now, &pushed[0].partition_id, &pushed[0].transaction_id)
        .unwrap();
    assert_eq!(n, 1);
    h.commit();
    assert!(h.dlq("q").is_empty());
    assert!(h
        .broker
        .message(&pushed[1].partition_id, &pushed[1].transaction_id)
        .is_some());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s15_subscription_start_fixed_by_first_pop_default_new() {
    let mut h = Harness::with_config(BrokerConfig::default());
    h.push_n("q", 3);
    h.advance(1);
    assert!(
        h.pop("q", Some("late"), 10).messages.is_empty(),
        "default mode new skips history"
    );
    h.advance(1);
    h.push_n("q", 1);
    let r = h.pop("q", Some("late"), 10);
    assert_eq!(offsets(&r), vec![3]);
    // A later pop with mode=all changes nothing.
    let mut req = PopRequest::queue("q");
    req.group = Some("late".into());
    req.subscription = Some(SubscriptionStart::All);
    h.advance(400_000);
    assert_eq!(offsets(&h.pop_with(req)), vec![3]);
    // Queue mode always starts from the oldest.
    assert_eq!(offsets(&h.pop("q", None, 10)), vec![0, 1, 2, 3]);
    // mode=all reads the backlog.
    let mut req = PopRequest::queue("q");
    req.group = Some("all".into());
    req.subscription = Some(SubscriptionStart::All);
    req.batch = Some(10);
    assert_eq!(offsets(&h.pop_with(req)), vec![0, 1, 2, 3]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s15_new_group_on_many_partitions_skips_history_everywhere() {
    let mut h = Harness::with_config(BrokerConfig::default());
    for p in 0..500 {
        h.push_to("q", &format!("p{p}"), vec![json!(p)]);
    }
    h.advance(1);
    let mut req = PopRequest::queue("q");
    req.group = Some("fresh".into());
    req.partitions = Some(64);
    req.batch = Some(1000);
    assert!(h.pop_with(req.clone()).messages.is_empty());
    h.restart();
    assert!(
        h.pop_with(req.clone()).messages.is_empty(),
        "the start survives a restart"
    );
    h.advance(1);
    h.push_to("q", "p7", vec![json!("new")]);
    h.push_to("q", "brand-new-partition", vec![json!("new")]);
    let r = h.pop_with(req);
    assert_eq!(r.messages.len(), 2);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s15_seek_releases_live_leases_and_resets_counters() {
    let mut h = Harness::new();
    h.push_n("q", 5);
    let r = h.pop("q", Some("g"), 5);
    h.ack_msgs(&r, &[(0, F)]);
    h.advance(D_MS);
    let r = h.pop("q", Some("g"), 5);
    let seek = h.broker.seek(h.now, "g", "q", SeekTarget::End).unwrap();
    h.commit();
    assert_eq!(seek.partitions_updated, 1);
    let lane = h.lane("q", "g");
    assert_eq!(
        (
            lane.committed,
            lane.lease_id,
            lane.retry_count,
            lane.attempt_count
        ),
        (4, None, 0, 0)
    );
    let res = h.ack_msgs(&r, &[(0, C)]);
    assert_eq!(res[0].error.as_deref(), Some("Invalid or expired lease"));
    // Seek backwards: everything deliverable again at once.
    h.broker
        .seek(h.now, "g", "q", SeekTarget::Timestamp(T0 - 1))
        .unwrap();
    h.commit();
    assert_eq!(offsets(&h.pop("q", Some("g"), 10)), vec![0, 1, 2, 3, 4]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s16_conflation_delivers_newest_and_answers_empty_pops() {
    let mut h = Harness::new();
    h.push_n("cmd", 4);
    let mut req = PopRequest::queue("cmd");
    req.group = Some("latest".into());
    req.conflation = true;
    req.batch = Some(10);
    let r = h.pop_with(req.clone());
    assert_eq!(offsets(&r), vec![3]);
    assert!(r.conflation);
    h.ack_msgs(&r, &[(0, C)]);
    let empty = h.pop_with(req.clone());
    assert!(empty.messages.is_empty() && empty.conflation);
    let mut bad = req.clone();
    bad.auto_ack = true;
    assert_eq!(
        h.broker.pop(h.now, &bad).unwrap_err().kind,
        ErrorKind::BadRequest
    );
    let mut bad = req;
    bad.group = None;
    assert_eq!(
        h.broker.pop(h.now, &bad).unwrap_err().kind,
        ErrorKind::BadRequest
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s16_autopilot_never_overrides_sent_parameters() {
    let mut h = Harness::new();
    for p in 0..4 {
        h.push_to("q", &format!("p{p}"), (0..200).map(|i| json!(i)).collect());
    }
    let mut req = PopRequest::queue("q");
    req.autopilot = true;
    let r = h.pop_with(req.clone());
    let echo = r.autopilot.unwrap();
    assert!(echo.batch >= 100 && echo.batch <= 1000);
    assert_eq!(r.messages.len() as u32, echo.batch);
    let mut req = PopRequest::queue("q");
    req.autopilot = true;
    req.batch = Some(3);
    req.partitions = Some(1);
    h.advance(100_000);
    let r = h.pop_with(req);
    assert_eq!(r.messages.len(), 3);
    assert_eq!(r.autopilot.unwrap().batch, 3);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn s17_partitions_range_and_batch_is_the_whole_budget() {
    let mut h = Harness::new();
    for p in 0..3 {
        h.push_to("q", &format!("p{p}"), (0..5).map(|i| json!(i)).collect());
    }
    for bad in [0, 65] {
        let mut req = PopRequest::queue("q");
        req.partitions = Some(bad);
        assert_eq!(
            h.broker.pop(h.now, &req).unwrap_err().kind,
            ErrorKind::BadRequest
        );
    }
    let mut req = PopRequest::queue("q");
    req.partitions = Some(3);
    req.batch = Some(7);
    let r = h.pop_with(req);
    assert_eq!(r.messages.len(), 7);
    assert_eq!(r.partitions_claimed, 2);
}

// ---------------------------------------------------------------------------------------------
// Lane transition-table rows: one unit test per row in src/core/lane.rs; here, the expiry row seen
// through the broker (the worked examples above exercise the other rows end to end)
// ---------------------------------------------------------------------------------------------

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn row_claim_and_row8_expire() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let lane = h.lane("q", QUEUE_MODE_GROUP);
    assert_eq!(
        (lane.batch_end, lane.lease_id.as_deref()),
        (Some(4), Some(r.lease_id.as_str()))
    );
    h.advance(300_000);
    assert!(
        h.lane("q", QUEUE_MODE_GROUP).lease_id.is_none(),
        "expired leases are not live"
    );
}

// ---------------------------------------------------------------------------------------------
// DECIDE choices and other contract points
// ---------------------------------------------------------------------------------------------

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn decide_delivery_attempt_resets_when_the_claim_starts_elsewhere() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.advance(300_000);
    let r2 = h.pop("q", None, 5);
    assert_eq!(r2.messages[0].delivery_attempt, 2);
    h.ack_msgs(&r2, &[(0, C), (1, C), (2, R)]);
    let r3 = h.pop("q", None, 5);
    assert_eq!(r3.messages[0].offset, 2);
    assert_eq!(
        r3.messages[0].delivery_attempt, 1,
        "§3.4 quirk: a nack at 2 of a batch from 0 restarts at attempt 1"
    );
    let _ = r;
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn decide_filing_takes_the_head_after_the_prefix_when_gaps_are_left() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    // Acks 0 but leaves 1 un-acked, and sends dlq for 3.
    let res = h.ack_msgs(&r, &[(0, C), (3, D)]);
    assert!(res.iter().all(|x| x.success));
    let dlq = h.dlq("q");
    assert_eq!(
        dlq[0].offset, 1,
        "the head after the committed prefix is filed, never silently skipped"
    );
    assert_eq!(h.lane("q", QUEUE_MODE_GROUP).committed, 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn decide_completed_beyond_batch_end_is_refused_while_leased() {
    let mut h = Harness::new();
    h.push_n("q", 4);
    let r = h.pop("q", None, 2);
    let later = h.pop("q", Some("other"), 4);
    let m3 = &later.messages[3];
    let res = h.ack(
        None,
        vec![AckItem::new(&m3.transaction_id, &m3.partition_id, C)],
    );
    assert_eq!(res[0].error.as_deref(), Some("Message not in leased span"));
    let _ = r;
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn decide_items_above_the_signal_report_success_and_release() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let res = h.ack_msgs(&r, &[(1, R), (3, C)]);
    assert!(res[1].success && res[1].lease_released && !res[1].dlq && res[1].error.is_none());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn decide_explicit_dlq_files_even_with_dlq_disabled() {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            dead_letter_queue: Some(false),
            dlq_after_max_retries: Some(false),
            ..Default::default()
        },
    );
    h.push_n("q", 1);
    let r = h.pop("q", None, 1);
    assert!(h.ack_msgs(&r, &[(0, D)])[0].dlq);
    assert_eq!(h.dlq("q").len(), 1);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn unknown_messages_and_statuses_are_refused_per_item() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let m = &r.messages[0];
    let res = h.ack(
        None,
        vec![
            AckItem::new("nope", &m.partition_id, C),
            AckItem::new(&m.transaction_id, "999", C),
            AckItem::new(
                &m.transaction_id,
                &m.partition_id,
                AckStatus::parse(Some("maybe")),
            ),
        ],
    );
    assert!(res
        .iter()
        .all(|x| !x.success && x.error.as_deref().is_some_and(|e| !e.is_empty())));
    assert_eq!(res[0].error.as_deref(), Some("Message not found"));
    assert_eq!(res[2].error.as_deref(), Some("Invalid status: maybe"));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn push_dedup_reports_the_winner() {
    let mut h = Harness::new();
    let item = |tx: &str, p: &str| PushItem {
        transaction_id: Some(tx.into()),
        partition: p.into(),
        ..PushItem::new("q", json!(tx))
    };
    let res = h
        .broker
        .push(
            h.now,
            vec![
                item("a", "Default"),
                item("a", "Default"),
                item("a", "other"),
            ],
        )
        .unwrap();
    h.commit();
    assert_eq!(res[0].status, PushStatus::Queued);
    assert_eq!(res[1].status, PushStatus::Duplicate);
    assert_eq!(
        res[1].message_id, res[0].message_id,
        "duplicates report the winner's id"
    );
    assert_eq!(
        res[2].status,
        PushStatus::Queued,
        "same id on another partition is another message"
    );
    h.restart();
    let res2 = h.broker.push(h.now, vec![item("a", "Default")]).unwrap();
    assert_eq!(
        (res2[0].status.clone(), res2[0].message_id.clone()),
        (PushStatus::Duplicate, res[0].message_id.clone())
    );
}

/// Payloads are JSON text: kept as sent (whitespace inside, number spelling), even JSON a
/// `serde_json::Value` cannot hold, through a restart (segments read back) and the dead-letter queue.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn payload_text_survives_restart_and_the_dead_letter_queue() {
    let mut h = Harness::new();
    let texts = [
        r#"{ "b" : 2.50, "a": [1,  "\u00e9"] }"#,
        "1e400",
        r#""\ud800""#,
    ];
    let items: Vec<PushItem> = texts
        .iter()
        .map(|t| PushItem::new("q", Payload::from_json(t.to_string()).unwrap()))
        .collect();
    h.broker.push(h.now, items).unwrap();
    h.restart();
    for sent in texts {
        // One message per claim: an ack call files only the first message it fails.
        let r = h.pop("q", None, 1);
        let m = &r.messages[0];
        assert_eq!(m.payload.get(), sent);
        let item = AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Dlq)
            .with_lease(&r.lease_id);
        let acked = h.ack(None, vec![item]);
        assert!(acked[0].dlq, "{acked:?}");
    }
    h.commit();
    h.restart();
    let mut filed: Vec<String> = h
        .dlq("q")
        .iter()
        .map(|d| d.payload.get().to_string())
        .collect();
    filed.sort();
    let mut want: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
    want.sort();
    assert_eq!(filed, want);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn payloads_of_any_json_and_two_megabytes_round_trip() {
    let mut h = Harness::new();
    let big = "x".repeat(2 * 1024 * 1024 + 3);
    let payloads = vec![
        json!(null),
        json!({}),
        json!([1, "two", 3.5]),
        json!(big),
        json!(false),
    ];
    h.push_to("q", "Default", payloads.clone());
    h.restart();
    let r = h.pop("q", None, 10);
    assert_eq!(
        r.messages
            .iter()
            .map(|m| m.payload.to_value().unwrap())
            .collect::<Vec<_>>(),
        payloads
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn delayed_processing_and_window_buffer() {
    let mut h = Harness::new();
    h.configure(
        "delayed",
        OptionsPatch {
            delayed_processing_s: Some(2),
            ..Default::default()
        },
    );
    h.push_n("delayed", 1);
    h.advance(1000);
    h.push_n("delayed", 1);
    assert!(h.pop("delayed", None, 10).messages.is_empty());
    h.advance(1000);
    assert_eq!(
        offsets(&h.pop("delayed", None, 10)),
        vec![0],
        "reading stops at the first message not yet due"
    );

    h.configure(
        "win",
        OptionsPatch {
            window_buffer_s: Some(2),
            ..Default::default()
        },
    );
    for _ in 0..3 {
        h.push_n("win", 1);
        h.advance(500);
    }
    assert!(h.pop("win", None, 10).messages.is_empty());
    h.advance(1500);
    assert_eq!(h.pop("win", None, 10).messages.len(), 3);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn configure_overwrites_every_option_and_labels() {
    let mut h = Harness::new();
    h.push_n("billing.invoices.v2", 1);
    let q = h.broker.queue_view(h.now, "billing.invoices.v2").unwrap();
    assert_eq!(
        (
            q.namespace.as_str(),
            q.task.as_str(),
            q.options.lease_time_s
        ),
        ("billing", "invoices", 60)
    );
    h.configure(
        "billing.invoices.v2",
        OptionsPatch {
            retry_limit: Some(9),
            ..Default::default()
        },
    );
    let q = h.broker.queue_view(h.now, "billing.invoices.v2").unwrap();
    assert_eq!(
        (
            q.namespace.as_str(),
            q.options.lease_time_s,
            q.options.retry_limit
        ),
        ("", 300, 9)
    );
    h.configure("billing.invoices.v2", OptionsPatch::default());
    assert_eq!(
        h.broker
            .queue_view(h.now, "billing.invoices.v2")
            .unwrap()
            .options
            .retry_limit,
        3,
        "not a merge"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn transactions_are_all_or_nothing_and_count_duplicates() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    let m = &r.messages[0];
    let ops = vec![
        TxOperation::Push(vec![PushItem {
            transaction_id: Some("t1".into()),
            ..PushItem::new("out", json!(1))
        }]),
        TxOperation::Ack {
            item: AckItem::new(&m.transaction_id, &m.partition_id, C).with_lease(&r.lease_id),
            group: None,
        },
        TxOperation::Ack {
            item: AckItem::new("missing", &m.partition_id, C),
            group: None,
        },
    ];
    let reply = h.broker.transaction(h.now, ops).unwrap();
    assert!(!reply.success);
    assert_eq!(reply.error.as_deref(), Some("Message not found"));
    assert!(
        h.broker.take_changes().is_empty(),
        "a refused transaction writes nothing"
    );

    let ops = vec![
        TxOperation::Push(vec![PushItem {
            transaction_id: Some("t1".into()),
            ..PushItem::new("out", json!(1))
        }]),
        TxOperation::Ack {
            item: AckItem::new(&m.transaction_id, &m.partition_id, C).with_lease(&r.lease_id),
            group: None,
        },
    ];
    let ok = h.broker.transaction(h.now, ops.clone()).unwrap();
    h.commit();
    assert!(ok.success);
    assert_eq!(ok.results.len(), 2);
    let retried = h.broker.transaction(h.now, vec![ops[0].clone()]).unwrap();
    h.commit();
    assert!(retried.success);
    assert!(matches!(&retried.results[0], TxResult::Push(p) if p.status == PushStatus::Duplicate));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn transaction_failing_midway_asks_the_engine_to_roll_back() {
    let mut h = Harness::new();
    let pushed = h.push_n("q", 3);
    let r = h.pop("q", None, 1);
    let m = &r.messages[0];
    // The ack of the leased message passes; the ack of a message past the leased span, under the same
    // lease, is refused when the acks are resolved (the precheck sees a live lease): a push and an ack
    // were applied by then, so the core asks for a reload.
    let ops = vec![
        TxOperation::Push(vec![PushItem::new("out", json!(1))]),
        TxOperation::Ack {
            item: AckItem::new(&m.transaction_id, &m.partition_id, C).with_lease(&r.lease_id),
            group: None,
        },
        TxOperation::Ack {
            item: AckItem::new(&pushed[2].transaction_id, &m.partition_id, C)
                .with_lease(&r.lease_id),
            group: None,
        },
    ];
    let reply = h.broker.transaction(h.now, ops).unwrap();
    assert!(!reply.success);
    assert_eq!(
        reply.results.len(),
        3,
        "the results end at the failing ack's"
    );
    assert!(h.broker.take_discard_flag());
    assert!(h.broker.take_changes().is_empty());
}

/// Contract §3.5: the ack ops of a transaction are one ack call, resolved per lane in any order. Two
/// acks under one lease both see the lease the transaction found (the first does not release it
/// under the second), whatever their order and statuses.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_transactions_acks_under_one_lease_resolve_together_in_any_order() {
    for statuses in [[C, C], [F, C], [F, F]] {
        let mut h = Harness::new();
        h.push_n("q", 2);
        let r = h.pop("q", None, 2);
        // The later message first: alone, its completed ack would leave the lease live, and a failed
        // one would release it under the other ack.
        let ops = [1, 0]
            .into_iter()
            .zip(statuses.clone())
            .map(|(i, status)| {
                let m = &r.messages[i];
                TxOperation::Ack {
                    item: AckItem::new(&m.transaction_id, &m.partition_id, status)
                        .with_lease(&r.lease_id),
                    group: None,
                }
            })
            .chain([TxOperation::Push(vec![PushItem::new("out", json!(1))])])
            .collect();
        let reply = h.broker.transaction(h.now, ops).unwrap();
        h.commit();
        assert!(reply.success, "{statuses:?}: {:?}", reply.error);
        let indexes: Vec<usize> = reply
            .results
            .iter()
            .map(|r| match r {
                TxResult::Ack(a) => a.index,
                TxResult::Push(p) => p.index,
            })
            .collect();
        assert_eq!(
            indexes,
            [0, 1, 2],
            "{statuses:?}: results in operation order"
        );
    }
}

/// Contract §3.5, row 4: a `failed` charges a lane's budget once per ack call, and a transaction's acks
/// are one call: three nacks of one batch in one transaction count one retry, as one `/ack/batch` does.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_transactions_nacks_of_one_batch_charge_the_budget_once() {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            retry_limit: Some(3),
            retry_delay_ms: Some(0),
            ..Default::default()
        },
    );
    h.push_n("q", 3);
    for expected_retry_count in [0, 1, 2] {
        let r = h.pop("q", None, 3);
        assert_eq!(r.messages.len(), 3);
        assert!(
            r.messages
                .iter()
                .all(|m| m.retry_count == expected_retry_count),
            "{:?}",
            r.messages.iter().map(|m| m.retry_count).collect::<Vec<_>>()
        );
        // Unfenced, as Queen's JS client sends a transaction's acks.
        let ops = r
            .messages
            .iter()
            .map(|m| TxOperation::Ack {
                item: AckItem::new(&m.transaction_id, &m.partition_id, F),
                group: None,
            })
            .collect();
        let reply = h.broker.transaction(h.now, ops).unwrap();
        h.commit();
        assert!(reply.success, "{:?}", reply.error);
    }
    // Budget spent (R = N), nothing filed yet: the fourth delivery still holds all three.
    let r = h.pop("q", None, 3);
    assert_eq!(r.messages.len(), 3);
    assert!(r.messages.iter().all(|m| m.retry_count == 3));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn delete_queue_removes_everything_including_group_metadata() {
    let mut h = Harness::new();
    h.push_n("q", 2);
    let r = h.pop("q", Some("g"), 1);
    h.ack_msgs(&r, &[(0, D)]);
    assert!(h.broker.delete_queue(h.now, "q"));
    h.commit();
    assert!(
        h.records.keys().all(|k| k == "m/format"),
        "left behind: {:?}",
        h.records.keys().collect::<Vec<_>>()
    );
    assert!(!h.broker.delete_queue(h.now, "q"));
    assert!(
        h.pop("q", None, 1).messages.is_empty(),
        "a pop on a missing queue is empty, not an error"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn deleting_a_queue_leaves_the_partitions_and_leases_of_others_whole() {
    let mut h = Harness::new();
    // Partition ids interleave across the queues: a/p0, b/p0, c/p0, a/p1, b/p1, c/p1.
    for partition in ["p0", "p1"] {
        for queue in ["a", "b", "c"] {
            h.push_to(
                queue,
                partition,
                vec![json!(format!("{queue}/{partition}"))],
            );
        }
    }
    let a = h.pop("a", None, 1);
    let b = h.pop("b", None, 1);
    assert_eq!((a.messages.len(), b.messages.len()), (1, 1));
    assert!(h.broker.delete_queue(h.now, "a"));
    h.commit();
    let leased = b.messages[0].partition.clone();
    for restarted in [false, true] {
        if restarted {
            h.restart();
        }
        h.broker.check_invariants().unwrap();
        let partitions = h.records.keys().filter(|k| k.starts_with("p/")).count();
        assert_eq!(partitions, 4, "b's and c's, restarted: {restarted}");
        let c = h.pop("c", Some(&format!("g{restarted}")), 10);
        assert_eq!(
            c.messages.len(),
            1,
            "c's first partition, restarted: {restarted}"
        );
    }
    // b's lease still runs out on time (its timer stayed) and its message comes back.
    h.advance(300_001);
    let mut again = Vec::new();
    for _ in 0..2 {
        again.extend(h.pop("b", None, 10).messages);
    }
    let mut partitions: Vec<_> = again.iter().map(|m| m.partition.clone()).collect();
    partitions.sort();
    assert_eq!(
        partitions,
        ["p0", "p1"],
        "b's expired lease on {leased} and its other partition"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn delete_group_allows_reconsume() {
    let mut h = Harness::new();
    h.push_n("q", 2);
    let r = h.pop("q", Some("g"), 2);
    h.ack_msgs(&r, &all(&r, C));
    let del = h.broker.delete_group(h.now, "g", None, true);
    h.commit();
    assert_eq!((del.deleted_partitions, del.metadata_deleted), (1, true));
    assert_eq!(h.pop("q", Some("g"), 5).messages.len(), 2);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn eviction_of_a_leased_span_ends_its_lease_and_the_lane_delivers_what_follows() {
    let mut h = Harness::new();
    h.configure(
        "e",
        OptionsPatch {
            max_wait_time_s: Some(2),
            lease_time_s: Some(300),
            ..Default::default()
        },
    );
    h.push_n("e", 2);
    for group in [None, Some("g")] {
        let r = h.pop("e", group, 2);
        assert_eq!(offsets(&r), vec![0, 1]);
    }
    h.advance(3_000);
    h.push_n("e", 1);
    h.broker.maintain(h.now);
    h.commit();
    h.broker.check_invariants().unwrap();
    for group in [None, Some("g")] {
        assert_eq!(
            offsets(&h.pop("e", group, 10)),
            vec![2],
            "{group:?}: delivered now, not after the evicted span's 300 s lease"
        );
    }
    h.restart();
    h.broker.check_invariants().unwrap();
}

/// A span released by a `failed` ack (a retry hold, one unit of the budget used) and then evicted whole:
/// the hold and the budget go with it (lane row `raise_floor`), so the next message is delivered at once,
/// with its whole budget: its own first `failed` ack holds it for a retry instead of dropping it. Found
/// by session 36's QA pass: the next message waited out the old hold (and was evicted in turn, never
/// delivered) or was dropped at its first failure.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn eviction_of_a_failed_span_takes_its_hold_and_retry_budget_with_it() {
    let mut h = Harness::new();
    h.configure(
        "e",
        OptionsPatch {
            max_wait_time_s: Some(2),
            retry_limit: Some(1),
            retry_delay_ms: Some(8_000),
            dead_letter_queue: Some(false),
            dlq_after_max_retries: Some(false),
            ..Default::default()
        },
    );
    h.push_n("e", 1);
    let first = h.pop("e", None, 1);
    assert_eq!(offsets(&first), vec![0]);
    h.ack_msgs(&first, &all(&first, F));
    h.advance(3_000);
    h.broker.take_woken_queues();
    h.broker.maintain(h.now);
    assert_eq!(
        h.broker.take_woken_queues(),
        vec!["e".to_string()],
        "a parked pop is told the lane is free"
    );
    h.commit();
    h.broker.check_invariants().unwrap();
    let lane = h.lane("e", QUEUE_MODE_GROUP);
    assert_eq!((lane.committed, lane.retry_count), (0, 0));

    h.push_n("e", 1);
    let next = h.pop("e", None, 1);
    assert_eq!(
        offsets(&next),
        vec![1],
        "delivered now, not after the old hold"
    );
    assert_eq!(next.messages[0].retry_count, 0);
    let res = h.ack_msgs(&next, &all(&next, F));
    assert!(res.iter().all(|x| x.success && !x.dlq));
    h.advance(8_000);
    assert_eq!(
        offsets(&h.pop("e", None, 1)),
        vec![1],
        "its first failure is retried, not dropped"
    );
    h.restart();
    h.broker.check_invariants().unwrap();
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn eviction_takes_a_partition_out_of_the_ready_set_of_a_group_with_no_lane_there() {
    // Found by tests/simulation.rs (seed 77 once it ran maintenance): the trim refreshed the ready sets
    // of the groups with a lane on the partition only.
    let mut h = Harness::new();
    h.configure(
        "e",
        OptionsPatch {
            max_wait_time_s: Some(2),
            ..Default::default()
        },
    );
    h.push_to("e", "a", vec![json!(1)]);
    h.push_to("e", "b", vec![json!(2)]);
    // One partition per pop: queue mode claims one; the other waits in its ready set, with no lane.
    assert_eq!(h.pop("e", None, 1).messages.len(), 1);
    h.advance(3_000);
    assert_eq!(h.broker.maintain(h.now).evicted, 2);
    h.commit();
    h.broker.check_invariants().unwrap();
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn retention_and_eviction_delete_whole_segments() {
    let mut h = Harness::new();
    h.configure(
        "r",
        OptionsPatch {
            retention_enabled: Some(true),
            retention_s: Some(10),
            ..Default::default()
        },
    );
    h.push_n("r", 3);
    h.advance(5_000);
    h.push_n("r", 2);
    h.advance(6_000);
    let report = h.broker.maintain(h.now);
    h.commit();
    assert_eq!((report.retention_deleted, report.segments_deleted), (3, 1));
    assert_eq!(offsets(&h.pop("r", None, 10)), vec![3, 4]);

    h.configure(
        "e",
        OptionsPatch {
            max_wait_time_s: Some(1),
            ..Default::default()
        },
    );
    h.push_n("e", 2);
    h.advance(2_000);
    let report = h.broker.maintain(h.now);
    h.commit();
    assert_eq!(report.evicted, 2);
    assert!(h.pop("e", None, 10).messages.is_empty());
    h.restart();
    assert!(
        h.pop("e", None, 10).messages.is_empty(),
        "trimmed state survives a restart"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn state_survives_restart_mid_lease() {
    let mut h = Harness::new();
    let r = w_setup(&mut h);
    h.ack_msgs(&r, &[(0, C)]);
    h.restart();
    assert!(
        h.pop("q", None, 5).messages.is_empty(),
        "the live lease survives"
    );
    let res = h.ack_msgs(&r, &[(1, C), (2, C), (3, C), (4, C)]);
    assert!(res.iter().all(|x| x.success && x.lease_released));
    assert_eq!(h.broker.extend_lease(h.now, &r.lease_id, 60).renewed, 0);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_push_writes_its_segment_alone_and_every_kth_the_page_of_entries_too() {
    use queen_edge::core::ENTRIES_PER_PAGE;
    let mut h = Harness::new();
    h.push_n("q", 1);
    let puts_of = |h: &mut Harness| {
        let items = (0..100)
            .map(|i| PushItem::new("q", json!({ "i": i })))
            .collect();
        h.broker.push(h.now, items).unwrap();
        let changes = h.commit();
        let count = |prefix: &str| {
            changes
                .puts()
                .filter(|(k, _)| k.starts_with(prefix))
                .count()
        };
        (count("s/"), count("x/"), changes.rows())
    };
    // The first push made segment 1 of the partition; pushes 2 .. K-1 write their segment alone.
    for _ in 1..ENTRIES_PER_PAGE - 1 {
        assert_eq!(
            puts_of(&mut h),
            (1, 0, 1),
            "a push to an existing partition writes its segment, nothing else"
        );
    }
    assert_eq!(
        puts_of(&mut h),
        (1, 1, 2),
        "the Kth segment's push writes the page of the K entries too"
    );
    assert_eq!(puts_of(&mut h), (1, 0, 1), "and the next starts a new page");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn dead_letter_order_survives_restarts() {
    let mut h = Harness::new();
    h.push_n("q", 2);
    let first = h.pop("q", Some("a"), 1);
    h.ack_msgs(&first, &[(0, D)]);
    h.restart();
    let second = h.pop("q", Some("b"), 1);
    h.ack_msgs(&second, &[(0, D)]);
    let dlq = h.dlq("q");
    assert_eq!(
        dlq.iter()
            .map(|d| d.consumer_group.as_str())
            .collect::<Vec<_>>(),
        vec!["b", "a"],
        "newest first"
    );
}

/// The lane records (`l/...`) and dead letters a change set writes or deletes for `group`.
fn lane_writes(changes: &queen_edge::store::ChangeSet, group: &str) -> usize {
    let suffix = format!("/{group}");
    changes
        .puts()
        .map(|(k, _)| k)
        .chain(changes.deletes())
        .filter(|k| k.ends_with(&suffix) || k.starts_with("d/"))
        .count()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn decide_an_ack_for_a_group_without_a_cursor_is_refused_and_makes_nothing() {
    // QA repro: a refused ack made lane X at -1, so X's first pop (mode new) got the history.
    let mut h = Harness::with_config(BrokerConfig::default());
    let pushed = h.push_n("q", 3);
    let item = |i: usize, s: AckStatus| {
        AckItem::new(&pushed[i].transaction_id, &pushed[i].partition_id, s)
    };
    let res = h.ack(
        Some("X"),
        vec![item(1, C).with_lease("01a2470a-0000-7000-8000-000000000000")],
    );
    assert_eq!(res[0].error.as_deref(), Some("Invalid or expired lease"));
    assert_eq!(lane_writes(&h.commit(), "X"), 0);
    assert!(
        h.broker.consumer_groups(h.now).is_empty(),
        "no lane X in memory"
    );
    // Unfenced items are refused too: X never popped, so it has nothing to ack, commit or file.
    for s in [C, F, R, D] {
        let res = h.ack(Some("X"), vec![item(2, s)]);
        assert!(!res[0].success);
        assert_eq!(
            res[0].error.as_deref(),
            Some("Consumer group has no cursor on this partition")
        );
        assert_eq!(lane_writes(&h.commit(), "X"), 0);
    }
    assert!(h.dlq("q").is_empty());
    assert!(h.broker.consumer_groups(h.now).is_empty());
    // A transaction refuses the same ack before applying anything.
    let tx = h
        .broker
        .transaction(
            h.now,
            vec![TxOperation::Ack {
                item: item(0, C),
                group: Some("X".into()),
            }],
        )
        .unwrap();
    assert!(!tx.success);
    assert_eq!(
        tx.error.as_deref(),
        Some("Consumer group has no cursor on this partition")
    );
    assert_eq!(lane_writes(&h.commit(), "X"), 0);
    // X's first pop still applies its mode: only what is pushed after it.
    h.advance(1);
    h.push_n("q", 1);
    h.advance(1);
    assert!(h.pop("q", Some("X"), 10).messages.is_empty());
    h.advance(1);
    h.push_n("q", 1);
    assert_eq!(offsets(&h.pop("q", Some("X"), 10)), vec![4]);
    // Queue mode never popped either: the same refusal, and its first pop starts at the oldest.
    let res = h.ack(None, vec![item(0, C)]);
    assert!(!res[0].success);
    assert_eq!(offsets(&h.pop("q", None, 10)), vec![0, 1, 2, 3, 4]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn seek_moves_only_the_cursors_the_group_has() {
    // Contract §1.9: "for each partition of the queue where the group has a cursor row".
    let mut h = Harness::with_config(BrokerConfig::default());
    h.push_to("q", "p0", vec![json!(0), json!(1)]);
    h.push_to("q", "p1", vec![json!(0), json!(1)]);
    let seek = h
        .broker
        .seek(h.now, "ghost", "q", SeekTarget::Timestamp(0))
        .unwrap();
    assert_eq!(seek.partitions_updated, 0);
    assert_eq!(lane_writes(&h.commit(), "ghost"), 0);
    assert!(h.broker.consumer_groups(h.now).is_empty());
    // ghost's first pop applies its mode (new): no history.
    h.advance(1);
    let mut req = PopRequest::queue("q");
    req.group = Some("ghost".into());
    req.batch = Some(10);
    req.partitions = Some(2);
    assert!(h.pop_with(req.clone()).messages.is_empty());
    h.advance(1);
    h.push_to("q", "p1", vec![json!(2)]);
    assert_eq!(offsets(&h.pop_with(req)), vec![2]);
    // A group with a cursor on one partition only: the seek moves that one and makes no other.
    let mut req = PopRequest::queue("q");
    req.group = Some("g".into());
    req.subscription = Some(SubscriptionStart::All);
    req.batch = Some(10);
    let first = h.pop_with(req.clone());
    assert_eq!(first.messages.len(), 2, "one partition claimed");
    let seek = h.broker.seek(h.now, "g", "q", SeekTarget::End).unwrap();
    h.commit();
    assert_eq!(seek.partitions_updated, 1);
    let other = h.pop_with(req);
    assert_ne!(other.messages[0].partition, first.messages[0].partition);
    assert_eq!(
        offsets(&other)[0],
        0,
        "the other partition's history is still there"
    );
}
