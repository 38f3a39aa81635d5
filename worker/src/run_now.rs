//! Running a request's future to its end inside the call that started it, when it needs no real wait.
//!
//! Durable Object SQLite is synchronous (`sql.exec`), so most requests of a `Broker` object (a push, a
//! pop that finds messages, an ack) finish in one poll: the command gate is free, the store answers at
//! once, the commit is in place before the poll returns. [`run_now`] polls such a future once and hands
//! its output straight back to JS, with no promise, no `queueMicrotask` round and no task of
//! `wasm_bindgen_futures`. A future that must really wait (a long-poll pop that parks, a request behind
//! the gate, the first request of an object, which opens its engine through async storage calls) is
//! returned as a `Promise` that resumes it where the first poll left it.
//!
//! The first poll runs with a [`Handoff`] waker. Some leaf futures keep the waker of their first poll
//! only (workers-rs's `Delay`, the long-poll's timeout, registers its `setTimeout` callback once), so
//! the handoff forwards every wake, for the future's whole life, to the task that resumes it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use wasm_bindgen::JsValue;

/// A waker for the first poll that forwards to the resuming task's waker once that task exists. A wake
/// before then is dropped: the task polls the future anyway when it starts.
#[derive(Default)]
struct Handoff {
    task: Mutex<Option<Waker>>,
}

impl Handoff {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Waker>> {
        // One thread: the lock is never contended, and nothing panics while holding it.
        self.task
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Wake for Handoff {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(task) = self.lock().as_ref() {
            task.wake_by_ref();
        }
    }
}

/// The future after a first poll that was not ready: polled by a `wasm_bindgen_futures` task, whose
/// waker the [`Handoff`] forwards to from then on.
struct Resume<F> {
    future: Pin<Box<F>>,
    handoff: Arc<Handoff>,
}

impl<F: Future> Future for Resume<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        {
            let mut task = self.handoff.lock();
            if !task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        self.future.as_mut().poll(cx)
    }
}

/// Polls `future` once: its output when it is ready, else a `Promise` of its output that resumes it
/// (resolved with the `Ok` value, rejected with the `Err` value).
pub fn run_now<F>(future: F) -> Result<JsValue, JsValue>
where
    F: Future<Output = Result<JsValue, JsValue>> + 'static,
{
    let handoff = Arc::new(Handoff::default());
    let waker = Waker::from(handoff.clone());
    let mut future = Box::pin(future);
    match future.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(output) => output,
        Poll::Pending => {
            Ok(worker::wasm_bindgen_futures::future_to_promise(Resume { future, handoff }).into())
        }
    }
}
