//! Engine commands for maintenance mode and traces (core modules `maintenance` and `traces`).
//!
//! Draining the push buffer reads the buffered items from the store (they are never held in memory)
//! and pushes them a chunk at a time; each chunk's push and the removal of its records commit together.

use super::{Engine, EngineError, EngineResult, Host};
use crate::core::api::*;
use crate::core::maintenance::{buffer_key, decode_buffered, BufferedResult};
use crate::core::traces::TraceRequest;
use crate::store::{Store, StoreError};

/// What became of a push: applied, or buffered (push maintenance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// Applied to the queues.
    Pushed(Vec<PushResult>),
    /// Stored in the maintenance buffer.
    Buffered(Vec<BufferedResult>),
}

impl<S: Store, H: Host> Engine<S, H> {
    /// True when a push must take [`Self::push_or_buffer`]: push maintenance is on, or items are still
    /// buffered (they go first).
    pub fn push_needs_buffer_path(&self) -> bool {
        self.read(|b, _| b.mode().push_paused || b.mode().buffered() > 0)
    }

    /// Pushes `items`, or buffers them while push maintenance is on. Items still buffered after
    /// maintenance was turned off are drained first, so a push never overtakes a buffered message.
    pub async fn push_or_buffer(&self, items: Vec<PushItem>) -> EngineResult<PushOutcome> {
        loop {
            if self.read(|b, _| b.mode().push_paused) {
                let buffered = self
                    .run_plain(|b, now| {
                        Ok(b.mode().push_paused.then(|| b.buffer_push(now, &items)))
                    })
                    .await?;
                match buffered {
                    Some(results) => return Ok(PushOutcome::Buffered(results)),
                    None => continue,
                }
            }
            self.drain_push_buffer().await?;
            let pushed = self
                .run(
                    |b, _| b.segments_needed_for_push(&items),
                    |b, now| {
                        if b.mode().push_paused || b.mode().buffered() > 0 {
                            return Ok(None);
                        }
                        b.push(now, items.clone()).map(Some)
                    },
                )
                .await?;
            if let Some(results) = pushed {
                return Ok(PushOutcome::Pushed(results));
            }
        }
    }

    /// Turns push maintenance on or off; off, drains the buffer into the queues (in order) before it
    /// returns. Returns the items still buffered.
    pub async fn set_push_maintenance(&self, on: bool) -> EngineResult<u64> {
        self.run_plain(|b, now| {
            b.set_push_maintenance(now, on);
            Ok(())
        })
        .await?;
        if !on {
            self.drain_push_buffer().await?;
        }
        Ok(self.read(|b, _| b.mode().buffered()))
    }

    /// Turns pop maintenance on or off (off wakes every parked pop).
    pub async fn set_pop_maintenance(&self, on: bool) -> EngineResult<()> {
        self.run_plain(|b, now| {
            b.set_pop_maintenance(now, on);
            Ok(())
        })
        .await
    }

    /// Pushes every buffered item into its queue, a chunk per commit, unless push maintenance is on.
    /// Returns how many this call pushed.
    pub async fn drain_push_buffer(&self) -> EngineResult<u64> {
        let mut drained = 0;
        loop {
            // Committed bounds only: a buffered item is read from the store.
            let (first, end) = self.read_loaded(|b, _| b.next_drain_span()).await?;
            if first == end {
                return Ok(drained);
            }
            let keys: Vec<String> = (first..end).map(buffer_key).collect();
            let values = self.store.get(&keys).await?;
            let mut items = Vec::with_capacity(keys.len());
            let mut taken_meanwhile = false;
            for (key, value) in keys.iter().zip(values) {
                match value {
                    Some(bytes) => items.push(decode_buffered(key, &bytes)?),
                    None => {
                        taken_meanwhile = self.read(|b, _| b.mode().first_seq != first);
                        if !taken_meanwhile {
                            return Err(EngineError::Store(StoreError::other(format!(
                                "storage is damaged: buffered push item \"{key}\" is counted but not stored"
                            ))));
                        }
                        break;
                    }
                }
            }
            if taken_meanwhile {
                continue;
            }
            drained += self
                .run(
                    |b, _| b.segments_needed_for_push(&items),
                    |b, now| b.drain_buffer(now, first, &items),
                )
                .await?;
        }
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
