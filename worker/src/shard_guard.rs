//! Refusing a changed `SHARDS` over existing data.
//!
//! A queue lives on the shard its name hashes to among `SHARDS` shards (`crate::shards`), and the ids a
//! shard minted carry its index: with another count, queues would be looked for on the wrong shard. So each
//! broker object records, the first time it opens, which shard of how many it is (storage key
//! [`PLACEMENT_KEY`]), and refuses to open (every request 503 with the reason) when the Worker now says
//! another count. An object with data but no record was written before shards existed: it counts as one
//! shard. A shard other than 0 also asks shard 0 before it records anything, so starting `SHARDS=4` over a
//! one-shard broker refuses on every shard, not only on the old object.
//!
//! The migration that moves queues between shard counts is `POST /api/v1/system/reshard`
//! ([`crate::reshard`]): the refusal says how to run it, and the migration records the new placements.

use serde::{Deserialize, Serialize};

/// The storage key of the object's [`Placement`].
pub const PLACEMENT_KEY: &str = "queen-shard-placement";

/// Which shard of how many an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The shard index.
    pub index: u16,
    /// The shard count.
    pub count: u16,
}

/// What an object does with its placement when it opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Open; record the placement first when `record` (none was recorded).
    Open {
        /// No placement is recorded yet.
        record: bool,
    },
    /// Refuse to open, with this reason.
    Refuse(String),
}

/// Decides whether an object recorded as `stored` (holding data when `has_data`) may open as shard
/// `index` of `count`.
pub fn decide(stored: Option<Placement>, index: u16, count: u16, has_data: bool) -> Decision {
    match stored {
        Some(p) if p.count != count => Decision::Refuse(refusal(p.count, count)),
        Some(p) if p.index != index => Decision::Refuse(format!(
            "this object is shard {} but was asked to serve shard {index}; the broker's shard layout is \
             inconsistent",
            p.index
        )),
        Some(_) => Decision::Open { record: false },
        None if has_data && count != 1 => Decision::Refuse(refusal(1, count)),
        None => Decision::Open { record: true },
    }
}

/// The reason given when the data was written with `written` shards and the Worker now runs `now`.
pub fn refusal(written: u16, now: u16) -> String {
    format!(
        "SHARDS is {now} but this broker's data was written with SHARDS={written}: changing the shard \
         count over existing data needs the migration that moves queues between shards. Either set SHARDS \
         back to {written}, or set RESHARD_FROM={written} and call POST /api/v1/system/reshard (admin) \
         until it answers done (README, \"Changing SHARDS\")"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_count_is_refused() {
        let four = Placement { index: 1, count: 4 };
        assert_eq!(
            decide(Some(four), 1, 4, true),
            Decision::Open { record: false }
        );
        match decide(Some(four), 1, 2, true) {
            Decision::Refuse(m) => {
                assert!(
                    m.contains("SHARDS=4") && m.contains("RESHARD_FROM=4"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        // Data from before shards counts as one shard.
        assert_eq!(decide(None, 0, 1, true), Decision::Open { record: true });
        assert!(matches!(decide(None, 0, 4, true), Decision::Refuse(_)));
        assert_eq!(decide(None, 2, 4, false), Decision::Open { record: true });
        assert!(matches!(
            decide(Some(four), 2, 4, false),
            Decision::Refuse(_)
        ));
    }
}
