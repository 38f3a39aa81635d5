//! The command gate: one command at a time, served first come, first served.
//!
//! `futures::lock::Mutex` lets a newcomer take the lock before waiters it already woke, so under a steady
//! stream of calls an early call can wait for seconds while later ones pass it. Here the lock is handed
//! straight to the oldest waiter when it is released: no call is overtaken by one that arrived after it.
//! A waiter that gave up (its future was dropped) is skipped.

use futures::channel::oneshot;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// A first-come-first-served async lock for one thread.
#[derive(Default)]
pub(crate) struct Gate {
    held: Cell<bool>,
    waiting: RefCell<VecDeque<oneshot::Sender<()>>>,
}

/// Holding the gate; dropping it hands the gate to the oldest waiter.
pub(crate) struct GateGuard<'a> {
    gate: &'a Gate,
}

impl Gate {
    /// Waits for the gate, behind every call that asked for it earlier.
    pub(crate) async fn enter(&self) -> GateGuard<'_> {
        if !self.held.get() {
            self.held.set(true);
            return GateGuard { gate: self };
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.borrow_mut().push_back(tx);
        // The sender is only dropped unsent when the gate itself is dropped, with no guard alive.
        let _ = rx.await;
        GateGuard { gate: self }
    }

    /// Releases a gate kept past its guard ([`GateGuard::keep`]).
    pub(crate) fn release_kept(&self) {
        self.hand_on();
    }

    fn hand_on(&self) {
        let mut waiting = self.waiting.borrow_mut();
        while let Some(next) = waiting.pop_front() {
            if next.send(()).is_ok() {
                return; // still held, now by `next`
            }
        }
        self.held.set(false);
    }
}

impl GateGuard<'_> {
    /// Keeps the gate held after this guard is gone, until [`Gate::release_kept`] (a recorded request
    /// keeps it across its commands, see `Recording` in the engine).
    pub(crate) fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        self.gate.hand_on();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use futures::future::join_all;
    use std::cell::RefCell;
    use std::future::Future;

    /// Pending once (so every caller queues before the first is done), then ready.
    async fn yield_now() {
        let mut yielded = false;
        futures::future::poll_fn(|cx| {
            if yielded {
                std::task::Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
        })
        .await
    }

    #[test]
    fn callers_are_served_in_arrival_order_even_when_newcomers_keep_coming() {
        let gate = Gate::default();
        let arrived = RefCell::new(Vec::new());
        let served = RefCell::new(Vec::new());
        let call = |i: usize| {
            let (gate, arrived, served) = (&gate, &arrived, &served);
            async move {
                for _ in 0..(i % 5) {
                    yield_now().await; // newcomers keep arriving while the gate is busy
                }
                arrived.borrow_mut().push(i);
                let _guard = gate.enter().await;
                yield_now().await; // hold it across an await, as a command does
                served.borrow_mut().push(i);
            }
        };
        block_on(join_all((0..100).map(call)));
        assert_eq!(served.borrow().len(), 100);
        assert_eq!(
            *served.borrow(),
            *arrived.borrow(),
            "no caller overtakes an earlier one"
        );
    }

    #[test]
    fn a_waiter_that_gave_up_is_skipped() {
        let gate = Gate::default();
        let first = block_on(gate.enter());
        let mut abandoned = Box::pin(gate.enter());
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(abandoned.as_mut().poll(&mut cx).is_pending());
        drop(abandoned);
        drop(first);
        let _again = block_on(gate.enter());
    }
}
