//! What a live feed of a replicated log's appends has heard of each key's last record, so a
//! reader that only needs to know "has anything been appended since I last looked?" can ask
//! this process' memory instead of the log's leader.
//!
//! The feed (on NATS: [`crate::bus::nats`]'s log feed, an ephemeral consumer that delivers the
//! last record of every key, then every append) writes a [`TailBoard`]; readers ask it through
//! [`HeardTails`]. The board vouches for nothing until the feed has delivered every key's last
//! record, and stops vouching the moment the feed breaks, until it has caught up again: a
//! reader told [`Heard::Unsure`] reads the log as it would without a feed.
//!
//! Keys are kept as a 64-bit hash, not their text, so a million keys cost about 40 MB. Two
//! keys sharing a hash share one slot holding the higher sequence of the two: a reader then
//! sees a sequence other than the one it applied and reads the log, so a collision costs a
//! read, never a missed append.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

/// A 64-bit FNV-1a hash: the fingerprint of a record's bytes (so a reader can tell a record
/// from another at the same sequence of a rebuilt log, which numbers its entries again from 1)
/// and the hash a key is kept under.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    extend(FNV_OFFSET, bytes)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn extend(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The hash key (`a`, `b`) is kept under: that of the text `a.b`, the key's subject below the
/// log's prefix.
fn key_hash(a: &str, b: &str) -> u64 {
    extend(extend(extend(FNV_OFFSET, a.as_bytes()), b"."), b.as_bytes())
}

/// What the feed has heard of one key's last record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The feed cannot vouch now (starting, catching up, or restarting after a break): read
    /// the log.
    Unsure,
    /// The log held no record of the key when the feed caught up, and none came since.
    Nothing,
    /// The key's last record: its sequence and the [`fingerprint`] of its bytes (none when
    /// the record came without one: written by an older version).
    Record { seq: u64, fingerprint: Option<u64> },
}

/// Asks what a live feed of a log has heard of a key's last record.
pub trait HeardTails: Send + Sync + 'static {
    /// The last record of key (`a`, `b`) as heard (see [`Heard`]).
    fn heard(&self, a: &str, b: &str) -> Heard;
}

#[derive(Default)]
struct Board {
    /// Every key's last record has been delivered, and the feed has not broken since.
    live: bool,
    /// Key hash → (sequence, fingerprint) of its last record heard.
    tails: HashMap<u64, (u64, Option<u64>)>,
}

/// The tails a feed has heard, written by the feed and read by anyone.
#[derive(Default)]
pub struct TailBoard {
    board: RwLock<Board>,
}

impl TailBoard {
    /// The feed starts (again): forget everything heard and vouch for nothing until
    /// [`Self::caught_up`].
    pub fn restart(&self) {
        let mut board = self.board.write().unwrap_or_else(PoisonError::into_inner);
        board.live = false;
        board.tails.clear();
    }

    /// The feed delivered the record at `seq` of the key whose subject below the log's prefix
    /// is `key` (`a.b`), with the [`fingerprint`] of its bytes when known.
    pub fn record(&self, key: &str, seq: u64, print: Option<u64>) {
        let slot = extend(FNV_OFFSET, key.as_bytes());
        let mut board = self.board.write().unwrap_or_else(PoisonError::into_inner);
        let tail = board.tails.entry(slot).or_insert((seq, print));
        if seq >= tail.0 {
            *tail = (seq, print);
        }
    }

    /// Every key's last record has been delivered: from now on the board vouches.
    pub fn caught_up(&self) {
        self.board
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .live = true;
    }

    /// Whether the board vouches now.
    pub fn is_live(&self) -> bool {
        self.board
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .live
    }
}

impl HeardTails for TailBoard {
    fn heard(&self, a: &str, b: &str) -> Heard {
        let board = self.board.read().unwrap_or_else(PoisonError::into_inner);
        if !board.live {
            return Heard::Unsure;
        }
        match board.tails.get(&key_hash(a, b)) {
            Some(&(seq, fingerprint)) => Heard::Record { seq, fingerprint },
            None => Heard::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_vouches_only_between_catching_up_and_the_next_restart() {
        let board = TailBoard::default();
        board.record("user.7531", 4, Some(fingerprint(b"first")));
        assert_eq!(
            board.heard("user", "7531"),
            Heard::Unsure,
            "still catching up"
        );
        board.caught_up();
        assert_eq!(
            board.heard("user", "7531"),
            Heard::Record {
                seq: 4,
                fingerprint: Some(fingerprint(b"first"))
            }
        );
        assert_eq!(board.heard("user", "7532"), Heard::Nothing);
        board.restart();
        assert_eq!(board.heard("user", "7531"), Heard::Unsure);
        board.caught_up();
        assert_eq!(
            board.heard("user", "7531"),
            Heard::Nothing,
            "forgotten at restart"
        );
    }

    #[test]
    fn a_later_append_replaces_the_tail_and_an_earlier_one_does_not() {
        let board = TailBoard::default();
        board.caught_up();
        board.record("user.aa", 7, Some(7));
        board.record("user.aa", 9, None);
        board.record("user.aa", 8, Some(8));
        assert_eq!(
            board.heard("user", "aa"),
            Heard::Record {
                seq: 9,
                fingerprint: None
            }
        );
    }

    #[test]
    fn a_key_is_found_by_its_two_parts_as_the_feed_files_it_by_its_subject() {
        assert_eq!(key_hash("user", "7531"), fingerprint(b"user.7531"));
    }
}
