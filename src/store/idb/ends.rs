//! The ends of one connection's `readwrite` transactions, told by one `complete` and one `abort`
//! handler made when the connection opens.
//!
//! A transaction to await is registered with [`TxEnds::watch`]: both handlers are set on it, and it is
//! listed here until it ends. When one of the handlers fires, it takes the event's transaction off the
//! list, records how it ended and wakes the task awaiting it ([`TxEnd`]). So a commit makes no promise
//! and no callbacks of its own (before: a promise, its executor and `JsFuture`'s two callbacks per
//! commit), and its task runs one microtask after the event instead of two (the promise's reaction,
//! then the task).
//!
//! A [`TxEnd`] dropped before its transaction ended takes it off the list and the handlers off it, so a
//! handler only ever fires for a listed transaction. A `TxEnd` borrows nothing from the connection, but
//! every one is awaited inside a method of the connection's `IdbStore`, so none outlives the handlers.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{Event, IdbTransaction};

/// How one watched transaction ended, and who waits for it.
#[derive(Default)]
struct Slot {
    /// `Some(true)` once it completed, `Some(false)` once it aborted.
    ended: Cell<Option<bool>>,
    waker: Cell<Option<Waker>>,
}

/// The watched transactions of one connection that have not ended yet.
#[derive(Default)]
struct Watched(RefCell<Vec<(IdbTransaction, Rc<Slot>)>>);

impl Watched {
    /// Takes the transaction `event` was fired at off the list, records its end, wakes its task.
    fn ended(&self, event: &Event, complete: bool) {
        let slot = {
            let mut open = self.0.borrow_mut();
            // Handlers are only on listed transactions, so a lone one is the event's; with several,
            // the event's target tells which.
            let at = if open.len() == 1 {
                Some(0)
            } else {
                let target: Option<JsValue> = event.target().map(Into::into);
                open.iter()
                    .position(|(tx, _)| target.as_ref().is_some_and(|t| JsValue::eq(tx, t)))
            };
            match at {
                Some(at) => open.swap_remove(at).1,
                None => return,
            }
        };
        slot.ended.set(Some(complete));
        if let Some(waker) = slot.waker.take() {
            waker.wake();
        }
    }
}

/// The `complete` and `abort` handlers of one connection and the transactions they watch.
pub(super) struct TxEnds {
    watched: Rc<Watched>,
    on_complete: Closure<dyn FnMut(Event)>,
    on_abort: Closure<dyn FnMut(Event)>,
}

impl TxEnds {
    /// Makes the two handlers (once per connection).
    pub(super) fn new() -> TxEnds {
        let watched = Rc::new(Watched::default());
        let on = |complete: bool| {
            let watched = watched.clone();
            Closure::<dyn FnMut(Event)>::new(move |event: Event| watched.ended(&event, complete))
        };
        TxEnds {
            on_complete: on(true),
            on_abort: on(false),
            watched,
        }
    }

    /// Watches `tx` (just created, before its first request): the returned future resolves when it
    /// ends, `Ok` on `complete`, the transaction's error on `abort`.
    pub(super) fn watch(&self, tx: &IdbTransaction) -> TxEnd {
        tx.set_oncomplete(Some(self.on_complete.as_ref().unchecked_ref()));
        tx.set_onabort(Some(self.on_abort.as_ref().unchecked_ref()));
        let slot = Rc::new(Slot::default());
        self.watched.0.borrow_mut().push((tx.clone(), slot.clone()));
        TxEnd {
            tx: tx.clone(),
            slot,
            watched: self.watched.clone(),
        }
    }
}

/// The end of one watched transaction ([`TxEnds::watch`]).
pub(super) struct TxEnd {
    tx: IdbTransaction,
    slot: Rc<Slot>,
    watched: Rc<Watched>,
}

impl Future for TxEnd {
    type Output = Result<(), JsValue>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.slot.ended.get() {
            None => {
                self.slot.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
            Some(true) => Poll::Ready(Ok(())),
            Some(false) => {
                Poll::Ready(Err(self.tx.error().map(JsValue::from).unwrap_or_else(
                    || JsValue::from_str("AbortError: the transaction was aborted"),
                )))
            }
        }
    }
}

impl Drop for TxEnd {
    fn drop(&mut self) {
        if self.slot.ended.get().is_none() {
            self.watched
                .0
                .borrow_mut()
                .retain(|(_, slot)| !Rc::ptr_eq(slot, &self.slot));
            self.tx.set_oncomplete(None);
            self.tx.set_onabort(None);
        }
    }
}
