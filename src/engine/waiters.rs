//! Parked long-polls, keyed by queue name.

use futures::channel::oneshot;
use std::cell::RefCell;

/// The parked pops, woken when a queue gets claimable work.
///
/// A plain list of (queue, sender): parked pops are few (one per waiting client), and a list keeps a
/// B-tree key/value type out of the browser module (docs/decisions.md).
#[derive(Default)]
pub(crate) struct Waiters {
    parked: RefCell<Vec<(String, oneshot::Sender<()>)>>,
}

impl Waiters {
    /// Parks a pop on `queue`; the returned future completes when the queue is woken (or the waiter
    /// list is dropped).
    pub(crate) fn register(&self, queue: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut parked = self.parked.borrow_mut();
        // Drop senders whose pop gave up (deadline passed or the client went away).
        parked.retain(|(_, s)| !s.is_canceled());
        parked.push((queue.to_string(), tx));
        rx
    }

    /// Wakes every pop parked on one of `queues`.
    pub(crate) fn wake<'a>(&self, queues: impl IntoIterator<Item = &'a String>) {
        let queues: Vec<&String> = queues.into_iter().collect();
        if queues.is_empty() {
            return;
        }
        let woken: Vec<oneshot::Sender<()>> = {
            let mut parked = self.parked.borrow_mut();
            let (woken, still): (Vec<_>, Vec<_>) = std::mem::take(&mut *parked)
                .into_iter()
                .partition(|(queue, _)| queues.contains(&queue));
            *parked = still;
            woken.into_iter().map(|(_, tx)| tx).collect()
        };
        for tx in woken {
            let _ = tx.send(());
        }
    }

    /// Wakes every parked pop.
    pub(crate) fn wake_all(&self) {
        let all = std::mem::take(&mut *self.parked.borrow_mut());
        for (_, tx) in all {
            let _ = tx.send(());
        }
    }
}
