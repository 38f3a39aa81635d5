//! Parked long-polls, keyed by queue name.

use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// The parked pops, woken when a queue gets claimable work.
#[derive(Default)]
pub(crate) struct Waiters {
    by_queue: RefCell<BTreeMap<String, Vec<oneshot::Sender<()>>>>,
}

impl Waiters {
    /// Parks a pop on `queue`; the returned future completes when the queue is woken (or the waiter
    /// list is dropped).
    pub(crate) fn register(&self, queue: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut by_queue = self.by_queue.borrow_mut();
        let list = by_queue.entry(queue.to_string()).or_default();
        // Drop senders whose pop gave up (deadline passed or the client went away).
        list.retain(|s| !s.is_canceled());
        list.push(tx);
        rx
    }

    /// Wakes every pop parked on one of `queues`.
    pub(crate) fn wake<'a>(&self, queues: impl IntoIterator<Item = &'a String>) {
        let mut by_queue = self.by_queue.borrow_mut();
        for queue in queues {
            if let Some(list) = by_queue.remove(queue) {
                for tx in list {
                    let _ = tx.send(());
                }
            }
        }
    }

    /// Wakes every parked pop.
    pub(crate) fn wake_all(&self) {
        let all = std::mem::take(&mut *self.by_queue.borrow_mut());
        for tx in all.into_values().flatten() {
            let _ = tx.send(());
        }
    }
}
