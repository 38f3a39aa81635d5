//! [`WorkerHost`]: the engine's [`Host`] inside workerd (clock, timers, entropy).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures::future::LocalBoxFuture;
use queen_edge::engine::Host;
use wasm_bindgen::{JsCast, JsValue};

use crate::auto_sharing::AutoSharing;

/// How many event-loop turns (`setTimeout(0)`, one after the other) a commit's leader gathers for.
///
/// While a commit blocks the object (SQLite's `fsync` on a self-hosted workerd with its state on disk),
/// the other clients' requests wait in workerd; after it they reach the object over several turns of
/// the event loop (a request goes through the entry Worker and the hop to the object before its body
/// is read), not all in the first. A leader that yields for one turn takes only those already there;
/// a few turns let more of them ride in its commit, so fewer commits are made per request. A lone
/// request pays the turns only at the leads the engine's backoff still gathers at
/// (`queen_edge::engine`'s group commit, *Gathering*). The count is measured, not derived:
/// docs/decisions.md, "More requests per shared commit on disk".
pub const GATHER_TURNS: u32 = 4;

/// Clock from `Date.now()`, sleeps through `setTimeout` (`worker::Delay`), entropy from
/// `crypto.getRandomValues`; when [`Sharing`] says so, a commit's leader gathers through
/// [`GATHER_TURNS`] `setTimeout(0)`s in a row, during which workerd delivers the requests it holds.
///
/// In a deployed Worker `Date.now()` advances only across I/O (Spectre mitigation); the engine only needs it
/// to be monotonic per request, which it is.
#[derive(Debug, Clone, Default)]
pub struct WorkerHost {
    /// Whether [`Host::gather`] offers a wait (`COMMIT_SHARING`).
    pub sharing: Sharing,
}

/// Whether commits are shared (`COMMIT_SHARING`, [`crate::config::CommitSharing`]): never, always, or as the
/// object's [`AutoSharing`] decides now (the `Broker` object feeds it every answer).
#[derive(Debug, Clone, Default)]
pub enum Sharing {
    /// Every commit at once.
    #[default]
    Off,
    /// Every leader gathers (with the engine's backoff for a lone request).
    On,
    /// Leaders gather while the policy says so.
    Auto(Rc<RefCell<AutoSharing>>),
}

impl Sharing {
    /// Whether a commit's leader gathers now.
    pub fn now(&self) -> bool {
        match self {
            Sharing::Off => false,
            Sharing::On => true,
            Sharing::Auto(policy) => policy.borrow().shares(),
        }
    }
}

impl Host for WorkerHost {
    fn now_ms(&self) -> i64 {
        js_sys::Date::now() as i64
    }

    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        // setTimeout takes an i32 of milliseconds.
        let ms = ms.min(i32::MAX as u64);
        Box::pin(worker::Delay::from(Duration::from_millis(ms)))
    }

    fn gather(&self) -> Option<LocalBoxFuture<'static, ()>> {
        if !self.sharing.now() {
            return None;
        }
        Some(Box::pin(async {
            for _ in 0..GATHER_TURNS {
                worker::Delay::from(Duration::from_millis(0)).await;
            }
        }))
    }

    fn entropy(&self) -> u64 {
        random_u64().unwrap_or_else(|| {
            // No crypto (never the case in workerd): fall back to the clock's bits mixed with Math.random.
            let now = js_sys::Date::now() as u64;
            let r = (js_sys::Math::random() * (u32::MAX as f64)) as u64;
            now.rotate_left(17) ^ (r << 32) ^ r
        })
    }
}

/// 64 bits from `crypto.getRandomValues`, if the global has it.
fn random_u64() -> Option<u64> {
    let crypto = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("crypto")).ok()?;
    let get = js_sys::Reflect::get(&crypto, &JsValue::from_str("getRandomValues"))
        .ok()?
        .dyn_into::<js_sys::Function>()
        .ok()?;
    let buf = js_sys::Uint8Array::new_with_length(8);
    get.call1(&crypto, &buf).ok()?;
    let mut bytes = [0u8; 8];
    buf.copy_to(&mut bytes);
    Some(u64::from_le_bytes(bytes))
}
