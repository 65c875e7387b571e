//! How a listener waits after a failed `accept` (out of file descriptors, most often): as
//! mini-redis does, 1 s doubling to 64 s, back to 1 s after a connection is accepted — so a
//! listener neither spins at full CPU logging a warning per iteration nor gives up for good.

use std::time::Duration;

/// The pause after the first failed accept.
pub const FIRST: Duration = Duration::from_secs(1);
/// The longest pause.
pub const MAX: Duration = Duration::from_secs(64);

/// The pause before the next accept.
#[derive(Debug, Clone)]
pub struct AcceptBackoff {
    next: Duration,
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self { next: FIRST }
    }
}

impl AcceptBackoff {
    /// An accept failed: how long to wait before the next one.
    pub fn failed(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(MAX);
        pause
    }

    /// A connection was accepted: the next failure waits [`FIRST`] again.
    pub fn accepted(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_accepts_wait_one_second_doubling_to_64_and_a_success_starts_over() {
        let mut backoff = AcceptBackoff::default();
        let waits: Vec<u64> = (0..9).map(|_| backoff.failed().as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 64, 64, 64]);
        backoff.accepted();
        assert_eq!(backoff.failed(), FIRST);
    }
}
