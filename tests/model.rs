//! Model-based property test (tier 3): random command sequences run against the broker and against a
//! small reference model of one partition with two consumer groups, written straight from the tables
//! of docs/protocol.md §4 with no ready sets, timers, segments or persistence. After every command the
//! deliveries, per-item ack outcomes, cursors, budgets and dead letters must agree. Restarts rebuild the
//! broker from its committed records, so persistence is checked too.
//!
//! `PROPTEST_CASES=5000 cargo test --release --test native model::` runs longer.

use crate::support;

use proptest::prelude::*;
use queen_edge::core::api::*;
use support::Harness;

const LEASE_MS: i64 = 5_000;
const RETRY_LIMIT: u32 = 2;
const RETRY_DELAY_MS: i64 = 500;
const GROUPS: [&str; 2] = [QUEUE_MODE_GROUP, "g"];

#[derive(Debug, Clone)]
enum Cmd {
    Push(usize),
    Pop {
        group: usize,
        batch: u32,
    },
    Ack {
        claim: usize,
        statuses: Vec<u8>,
        fenced: bool,
    },
    Advance(i64),
    Extend {
        claim: usize,
    },
    Seek {
        group: usize,
        to_end: bool,
    },
    Restart,
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        3 => (1usize..4).prop_map(Cmd::Push),
        3 => (0usize..2, 1u32..6).prop_map(|(group, batch)| Cmd::Pop { group, batch }),
        4 => (0usize..4, prop::collection::vec(0u8..8, 1..6), prop::bool::weighted(0.8))
            .prop_map(|(claim, statuses, fenced)| Cmd::Ack { claim, statuses, fenced }),
        2 => prop_oneof![Just(0i64), Just(200), Just(600), Just(6_000)].prop_map(Cmd::Advance),
        1 => (0usize..4).prop_map(|claim| Cmd::Extend { claim }),
        1 => (0usize..2, any::<bool>()).prop_map(|(group, to_end)| Cmd::Seek { group, to_end }),
        1 => Just(Cmd::Restart),
    ]
}

#[derive(Debug, Clone, Default)]
struct ModelLane {
    c: i64,
    lease: Option<(String, i64)>,
    e: i64,
    r: u32,
    a: u32,
    s: i64,
    h: i64,
    /// The broker has the lane: a pop found a message for the group. Until then a seek moves nothing.
    made: bool,
}

#[derive(Debug, Default)]
struct Model {
    now: i64,
    n: u64,
    lanes: [ModelLane; 2],
    dlq: Vec<(usize, u64, u32)>,
}

impl Model {
    fn live(&self, g: usize) -> Option<&str> {
        self.lanes[g]
            .lease
            .as_ref()
            .filter(|(_, x)| *x > self.now)
            .map(|(id, _)| id.as_str())
    }

    /// Returns the span (start, end) and deliveryAttempt the model expects, or None.
    fn pop(&mut self, g: usize, batch: u32) -> Option<(u64, u64, u32)> {
        let now = self.now;
        let live = self.live(g).is_some();
        let lane = &mut self.lanes[g];
        if live || lane.h > now || (lane.c + 1) as u64 >= self.n {
            return None;
        }
        let start = lane.c + 1;
        let end = (start + batch as i64 - 1).min(self.n as i64 - 1);
        lane.a = if start == lane.s { lane.a + 1 } else { 0 };
        lane.s = start;
        lane.e = end;
        lane.h = 0;
        Some((start as u64, end as u64, lane.a + 1))
    }

    /// Expected per-item success, given (offset, status) items and the fence.
    fn ack(&mut self, g: usize, items: &[(u64, AckStatus)], fence: Option<&str>) -> Vec<bool> {
        let live = self.live(g).map(str::to_string);
        let mut ok = vec![false; items.len()];
        let mut accepted = Vec::new();
        for (i, (offset, status)) in items.iter().enumerate() {
            if let Some(f) = fence {
                if live.as_deref() != Some(f) {
                    continue;
                }
            }
            if live.is_some() && *offset as i64 > self.lanes[g].e {
                continue;
            }
            ok[i] = true;
            accepted.push((*offset, status.clone()));
        }
        if accepted.is_empty() {
            return ok;
        }
        let c = self.lanes[g].c;
        let signal = accepted
            .iter()
            .filter(|(o, s)| *s != AckStatus::Completed && *o as i64 > c)
            .min_by_key(|(o, _)| *o)
            .cloned();
        let p = accepted
            .iter()
            .filter(|(o, s)| {
                *s == AckStatus::Completed && signal.as_ref().is_none_or(|(so, _)| o < so)
            })
            .map(|(o, _)| *o as i64)
            .max()
            .unwrap_or(-1);
        let now = self.now;
        let lane = &mut self.lanes[g];
        match signal.map(|(_, s)| s) {
            None => {
                lane.c = lane.c.max(p);
                if lane.c >= lane.e {
                    lane.lease = None;
                    lane.r = 0;
                    lane.a = 0;
                }
            }
            Some(AckStatus::Retry) => {
                lane.c = lane.c.max(p);
                lane.lease = None;
            }
            Some(AckStatus::Failed) if lane.r < RETRY_LIMIT => {
                lane.c = lane.c.max(p);
                lane.r += 1;
                lane.h = now + RETRY_DELAY_MS;
                lane.lease = None;
            }
            Some(_) => {
                let head = lane.c.max(p) + 1;
                self.dlq.push((g, head as u64, lane.r));
                lane.c = head;
                lane.r = 0;
                lane.a = 0;
                lane.h = 0;
                lane.lease = None;
            }
        }
        ok
    }
}

fn status_of(code: u8) -> AckStatus {
    match code {
        0..=3 => AckStatus::Completed,
        4 => AckStatus::Failed,
        5 => AckStatus::Retry,
        6 => AckStatus::Dlq,
        _ => AckStatus::Completed,
    }
}

struct Claim {
    group: usize,
    reply: PopReply,
}

fn run(cmds: Vec<Cmd>) -> Result<(), TestCaseError> {
    let mut h = Harness::new();
    h.configure(
        "q",
        OptionsPatch {
            lease_time_s: Some((LEASE_MS / 1000) as u64),
            retry_limit: Some(RETRY_LIMIT),
            retry_delay_ms: Some(RETRY_DELAY_MS as u64),
            ..Default::default()
        },
    );
    let mut m = Model {
        now: h.now,
        ..Default::default()
    };
    m.lanes = [
        ModelLane {
            c: -1,
            e: -1,
            s: -1,
            ..Default::default()
        },
        ModelLane {
            c: -1,
            e: -1,
            s: -1,
            ..Default::default()
        },
    ];
    let mut claims: Vec<Claim> = Vec::new();
    for (step, cmd) in cmds.into_iter().enumerate() {
        match cmd {
            Cmd::Push(k) => {
                h.push_n("q", k);
                m.n += k as u64;
            }
            Cmd::Pop { group, batch } => {
                let reply = h.pop(
                    "q",
                    Some(GROUPS[group]).filter(|g| *g != QUEUE_MODE_GROUP),
                    batch,
                );
                m.lanes[group].made |= m.n > 0;
                let expected = m.pop(group, batch);
                let got = reply.messages.first().map(|f| {
                    (
                        f.offset,
                        reply.messages.last().unwrap().offset,
                        f.delivery_attempt,
                    )
                });
                prop_assert_eq!(
                    got,
                    expected,
                    "step {}: pop {} batch {}",
                    step,
                    GROUPS[group],
                    batch
                );
                if !reply.messages.is_empty() {
                    m.lanes[group].lease = Some((reply.lease_id.clone(), m.now + LEASE_MS));
                    claims.push(Claim { group, reply });
                }
            }
            Cmd::Ack {
                claim,
                statuses,
                fenced,
            } => {
                if claims.is_empty() {
                    continue;
                }
                let c = &claims[claim % claims.len()];
                let g = c.group;
                let items: Vec<(u64, AckStatus, &DeliveredMessage)> = statuses
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| {
                        c.reply
                            .messages
                            .get(i)
                            .map(|msg| (msg.offset, status_of(*s), msg))
                    })
                    .collect();
                let ack_items: Vec<AckItem> = items
                    .iter()
                    .map(|(_, s, msg)| {
                        let it = AckItem::new(&msg.transaction_id, &msg.partition_id, s.clone());
                        if fenced {
                            it.with_lease(&c.reply.lease_id)
                        } else {
                            it
                        }
                    })
                    .collect();
                let model_items: Vec<(u64, AckStatus)> =
                    items.iter().map(|(o, s, _)| (*o, s.clone())).collect();
                let fence = fenced.then_some(c.reply.lease_id.clone());
                let got = h.ack(
                    Some(GROUPS[g]).filter(|x| *x != QUEUE_MODE_GROUP),
                    ack_items,
                );
                let expected = m.ack(g, &model_items, fence.as_deref());
                let got_ok: Vec<bool> = got.iter().map(|r| r.success).collect();
                prop_assert_eq!(got_ok, expected, "step {}: ack {:?}", step, model_items);
            }
            Cmd::Advance(ms) => {
                h.advance(ms);
                m.now += ms;
            }
            Cmd::Extend { claim } => {
                if claims.is_empty() {
                    continue;
                }
                let c = &claims[claim % claims.len()];
                let reply = h.broker.extend_lease(h.now, &c.reply.lease_id, 5);
                h.commit();
                let lane = &mut m.lanes[c.group];
                let live = lane
                    .lease
                    .as_ref()
                    .is_some_and(|(id, x)| *id == c.reply.lease_id && *x > m.now);
                prop_assert_eq!(reply.renewed > 0, live, "step {}: extend", step);
                if live {
                    let lease = lane.lease.as_mut().unwrap();
                    lease.1 = lease.1.max(m.now + 5_000);
                }
            }
            Cmd::Seek { group, to_end } => {
                let target = if to_end {
                    SeekTarget::End
                } else {
                    SeekTarget::Timestamp(support::T0 - 1)
                };
                let reply = h.broker.seek(h.now, GROUPS[group], "q", target).unwrap();
                h.commit();
                let lane = &mut m.lanes[group];
                // A seek moves the cursors the group has, and makes none.
                prop_assert_eq!(
                    reply.partitions_updated,
                    lane.made as u32,
                    "step {}: seek",
                    step
                );
                if lane.made {
                    lane.c = if to_end { m.n as i64 - 1 } else { -1 };
                    lane.lease = None;
                    lane.r = 0;
                    lane.a = 0;
                    lane.s = -1;
                    lane.h = 0;
                    lane.e = lane.c;
                }
            }
            Cmd::Restart => h.restart(),
        }
        // Cursors and budgets agree after every command.
        if m.n > 0 {
            let q = h.broker.queue_view(h.now, "q").unwrap();
            let p = &q.partitions[0];
            for (g, name) in GROUPS.iter().enumerate() {
                let lane = p.lanes.iter().find(|l| l.consumer_group == *name);
                // A group no pop has found a message for may have no lane yet; any other has one.
                prop_assert!(
                    lane.is_some() || !m.lanes[g].made,
                    "step {}: the lane of {} is lost (model cursor {})",
                    step,
                    name,
                    m.lanes[g].c
                );
                if let Some(lane) = lane {
                    prop_assert_eq!(
                        lane.committed,
                        m.lanes[g].c,
                        "step {}: cursor of {}",
                        step,
                        name
                    );
                    prop_assert_eq!(
                        lane.retry_count,
                        m.lanes[g].r,
                        "step {}: budget of {}",
                        step,
                        name
                    );
                }
            }
        }
        let dlq = h.broker.dead_letters(&DlqQuery {
            limit: 10_000,
            ..Default::default()
        });
        let mut got: Vec<(usize, u64, u32)> = dlq
            .iter()
            .map(|d| {
                (
                    GROUPS.iter().position(|g| *g == d.consumer_group).unwrap(),
                    d.offset,
                    d.retry_count,
                )
            })
            .collect();
        got.reverse();
        prop_assert_eq!(&got, &m.dlq, "step {}: dead letters", step);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn broker_matches_the_reference_model(cmds in prop::collection::vec(cmd(), 1..80)) {
        run(cmds)?;
    }
}
