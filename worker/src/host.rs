//! [`WorkerHost`]: the engine's [`Host`] inside workerd (clock, timers, entropy).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures::future::LocalBoxFuture;
use queen_edge::engine::Host;
use wasm_bindgen::{JsCast, JsValue};

use crate::auto_sharing::AutoSharing;

/// Clock from `Date.now()`, sleeps through `setTimeout` (`worker::Delay`), entropy from
/// `crypto.getRandomValues`; when [`Sharing`] says so, a commit's leader gathers through one
/// `setTimeout(0)`, during which workerd delivers the requests it holds.
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
        Some(Box::pin(worker::Delay::from(Duration::from_millis(0))))
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
