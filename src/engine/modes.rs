//! Engine commands for maintenance mode and traces (core modules `maintenance` and `traces`).
//!
//! Draining the push buffer pushes it a chunk at a time; each chunk's push and the removal of its
//! records commit together.

use super::{Engine, Host};
use crate::store::Store;
#[cfg(feature = "ops")]
use {
    super::EngineResult,
    crate::core::api::*,
    crate::core::maintenance::{BufferedResult, ModeState},
    crate::core::traces::TraceRequest,
};

/// What became of a push: applied, or buffered (push maintenance).
#[cfg(feature = "ops")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// Applied to the queues.
    Pushed(Vec<PushResult>),
    /// Stored in the maintenance buffer.
    Buffered(Vec<BufferedResult>),
}

impl<S: Store, H: Host> Engine<S, H> {
    /// True when a push must take `push_or_buffer` (a build without `ops` refuses it): push
    /// maintenance is on, or items are still buffered (they go first).
    pub fn push_needs_buffer_path(&self) -> bool {
        self.read(|b, _| b.mode().push_paused || b.maintenance().buffered() > 0)
    }
}

#[cfg(feature = "ops")]
impl<S: Store, H: Host> Engine<S, H> {
    /// The maintenance switches, the items and payload bytes in the push buffer.
    pub fn maintenance_state(&self) -> (ModeState, u64, u64) {
        self.read(|b, _| {
            let m = b.maintenance();
            (m.state, m.buffered(), m.buffered_bytes())
        })
    }

    /// Pushes `items`, or buffers them while push maintenance is on. Items still buffered after
    /// maintenance was turned off are drained first, so a push never overtakes a buffered message.
    pub async fn push_or_buffer(&self, items: Vec<PushItem>) -> EngineResult<PushOutcome> {
        loop {
            self.drain_push_buffer().await?;
            let outcome = self
                .run(
                    |b, _| b.segments_needed_for_push(&items),
                    |b, now| {
                        if b.mode().push_paused {
                            b.buffer_push(now, &items)
                                .map(|r| Some(PushOutcome::Buffered(r)))
                        } else if b.maintenance().buffered() > 0 {
                            Ok(None)
                        } else {
                            b.push(now, items.clone())
                                .map(|r| Some(PushOutcome::Pushed(r)))
                        }
                    },
                )
                .await?;
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
        }
    }

    /// Turns push maintenance (`pop` false) or pop maintenance (`pop` true) on or off. Turning push
    /// maintenance off drains the buffer into the queues (in order) before it returns; turning pop
    /// maintenance off wakes every parked pop.
    pub async fn set_maintenance(&self, pop: bool, on: bool) -> EngineResult<()> {
        self.run_plain(|b, now| {
            b.set_maintenance(now, pop, on);
            Ok(())
        })
        .await?;
        self.drain_push_buffer().await
    }

    /// Pushes every buffered item into its queue, a chunk per commit, unless push maintenance is on.
    pub async fn drain_push_buffer(&self) -> EngineResult<()> {
        while self
            .run(
                |b, _| b.segments_needed_for_drain(),
                |b, now| b.drain_buffer(now),
            )
            .await?
            > 0
        {}
        Ok(())
    }

    /// Records a trace event about a retained message; returns its id.
    pub async fn record_trace(&self, request: TraceRequest) -> EngineResult<String> {
        self.run(
            |b, _| b.segments_needed_for_trace(&request),
            |b, now| b.record_trace(now, &request),
        )
        .await
    }
}
