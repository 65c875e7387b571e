//! The set of turns already mined (tree `memory_extracted`): turn id → when it was mined
//! (seconds, big-endian). A job delivered again, or queued again after a restart, finds its
//! turn here and is acknowledged without a second extraction. Entries older than
//! [`MINED_KEPT_SECS`] are forgotten by the memory sweep, so the set does not grow with every
//! turn ever answered.

use crate::store::tree::Tree;
use crate::store::StoreError;

/// How long a mined turn is remembered: far beyond any redelivery of its job (a few
/// deliveries, `memory.extract_ack_wait_secs` apart) and any restart's queueing of a job whose
/// note was cut off. A turn mined again after this is merged with what it wrote the first
/// time, not piled up.
pub(super) const MINED_KEPT_SECS: i64 = 30 * 24 * 3600;

/// Mark `turn_id` as mined at `now` (Unix seconds).
pub(super) fn mark(mined: &Tree, turn_id: &str, now: i64) -> Result<(), StoreError> {
    mined.insert(turn_id.as_bytes(), &now.to_be_bytes())
}

/// Forget the turns mined more than [`MINED_KEPT_SECS`] before `now`; how many were. An entry
/// whose time cannot be read is kept.
pub(super) fn forget_old(mined: &Tree, now: i64) -> Result<usize, StoreError> {
    let cutoff = now - MINED_KEPT_SECS;
    let mut forgotten = 0;
    for entry in mined.iter() {
        let (turn, at) = entry?;
        let at = <[u8; 8]>::try_from(at.as_slice()).map(i64::from_be_bytes);
        if at.is_ok_and(|at| at < cutoff) {
            mined.remove(&turn)?;
            forgotten += 1;
        }
    }
    Ok(forgotten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::durability::Mode;
    use crate::store::tree::temporary;

    #[test]
    fn turns_mined_long_ago_are_forgotten_and_recent_ones_kept() {
        let db = temporary(Mode::Batch(std::time::Duration::from_millis(5))).unwrap();
        let mined = Tree::open(&db, "memory_extracted").unwrap();
        let now = 1_800_000_000;
        mark(&mined, "old", now - MINED_KEPT_SECS - 1).unwrap();
        mark(&mined, "recent", now - 3600).unwrap();
        mined.insert(b"unreadable", b"?").unwrap();
        assert_eq!(forget_old(&mined, now).unwrap(), 1);
        assert!(!mined.contains_key(b"old").unwrap());
        assert!(mined.contains_key(b"recent").unwrap());
        assert!(mined.contains_key(b"unreadable").unwrap());
        assert_eq!(forget_old(&mined, now).unwrap(), 0);
    }
}
