//! The in-memory bookkeeping of one embedded durable queue: which stored messages are ready,
//! which are delayed by a nak, which are in flight (and until when), and how often each was
//! delivered. Pure and clock-free (callers pass `now`), so every redelivery rule is unit-tested
//! here; `durable.rs` owns the sled storage and the waiting.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::bus::DurableOptions;

/// One outstanding delivery.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    delivery: u64,
    deadline: Instant,
    ack_wait: Duration,
}

/// What a consumer should do next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Hand message `seq` out as delivery number `delivery`.
    Deliver { seq: u64, delivery: u64 },
    /// `seq` was delivered `deliveries` times (the limit) and never acked: drop it.
    Exhausted { seq: u64, deliveries: u64 },
    /// Nothing ready; something becomes due at this instant (or never, until a state change).
    Wait(Option<Instant>),
}

#[derive(Debug, Default)]
pub(crate) struct QueueState {
    ready: BTreeSet<u64>,
    delayed: HashMap<u64, Instant>,
    in_flight: HashMap<u64, InFlight>,
    deliveries: HashMap<u64, u64>,
}

impl QueueState {
    /// State after a (re)start: every stored message is ready, with its recorded deliveries.
    pub(crate) fn recovered(
        stored: impl IntoIterator<Item = u64>,
        deliveries: HashMap<u64, u64>,
    ) -> Self {
        Self {
            ready: stored.into_iter().collect(),
            deliveries,
            ..Self::default()
        }
    }

    /// A newly stored message.
    pub(crate) fn push(&mut self, seq: u64) {
        self.ready.insert(seq);
    }

    /// Pick the next delivery for a consumer with `options`, moving overdue in-flight and
    /// delayed messages back to ready first. The oldest ready message goes first.
    pub(crate) fn next(&mut self, now: Instant, options: &DurableOptions) -> Next {
        self.promote_due(now);
        let Some(seq) = self.ready.pop_first() else {
            return Next::Wait(self.next_due());
        };
        let done = self.deliveries.get(&seq).copied().unwrap_or(0);
        if options.max_deliver > 0 && done >= options.max_deliver {
            self.deliveries.remove(&seq);
            return Next::Exhausted {
                seq,
                deliveries: done,
            };
        }
        let delivery = done + 1;
        self.deliveries.insert(seq, delivery);
        self.in_flight.insert(
            seq,
            InFlight {
                delivery,
                deadline: now + options.ack_wait,
                ack_wait: options.ack_wait,
            },
        );
        Next::Deliver { seq, delivery }
    }

    fn promote_due(&mut self, now: Instant) {
        let overdue: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(seq, _)| *seq)
            .collect();
        for seq in overdue {
            self.in_flight.remove(&seq);
            self.ready.insert(seq);
        }
        let due: Vec<u64> = self
            .delayed
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(seq, _)| *seq)
            .collect();
        for seq in due {
            self.delayed.remove(&seq);
            self.ready.insert(seq);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        let deadlines = self.in_flight.values().map(|f| f.deadline);
        deadlines.chain(self.delayed.values().copied()).min()
    }

    /// Messages handed out exactly once and not settled.
    pub(crate) fn delivered_once(&self) -> Vec<u64> {
        let once = self.deliveries.iter().filter(|(_, &n)| n == 1);
        once.map(|(&seq, _)| seq).collect()
    }

    /// The message is acked (or gone from storage): forget it everywhere. Returns how many
    /// times it was delivered (0 if never).
    pub(crate) fn settle(&mut self, seq: u64) -> u64 {
        self.ready.remove(&seq);
        self.delayed.remove(&seq);
        self.in_flight.remove(&seq);
        self.deliveries.remove(&seq).unwrap_or(0)
    }

    /// Delivery `delivery` of `seq` failed: make it ready again now or after `delay`. A nak for
    /// an older delivery (the message has been redelivered since) changes nothing.
    pub(crate) fn nak(&mut self, seq: u64, delivery: u64, delay: Option<Duration>, now: Instant) {
        if !self.is_current(seq, delivery) {
            return;
        }
        self.in_flight.remove(&seq);
        match delay.filter(|d| !d.is_zero()) {
            Some(delay) => {
                self.delayed.insert(seq, now + delay);
            }
            None => {
                self.ready.insert(seq);
            }
        }
    }

    /// Delivery `delivery` of `seq` is still being worked on: push its deadline back by one
    /// `ack_wait` from now.
    pub(crate) fn extend(&mut self, seq: u64, delivery: u64, now: Instant) {
        if let Some(f) = self.in_flight.get_mut(&seq) {
            if f.delivery == delivery {
                f.deadline = now + f.ack_wait;
            }
        }
    }

    fn is_current(&self, seq: u64, delivery: u64) -> bool {
        self.in_flight
            .get(&seq)
            .is_some_and(|f| f.delivery == delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(ack_wait_ms: u64, max_deliver: u64) -> DurableOptions {
        DurableOptions {
            ack_wait: Duration::from_millis(ack_wait_ms),
            max_deliver,
            ..Default::default()
        }
    }

    #[test]
    fn oldest_message_is_delivered_first_and_once() {
        let now = Instant::now();
        let mut s = QueueState::default();
        s.push(7);
        s.push(3);
        let o = opts(1000, 5);
        assert_eq!(
            s.next(now, &o),
            Next::Deliver {
                seq: 3,
                delivery: 1
            }
        );
        assert_eq!(
            s.next(now, &o),
            Next::Deliver {
                seq: 7,
                delivery: 1
            }
        );
        let deadline = now + Duration::from_millis(1000);
        assert_eq!(s.next(now, &o), Next::Wait(Some(deadline)));
    }

    #[test]
    fn unacked_delivery_comes_back_after_ack_wait_with_next_count() {
        let now = Instant::now();
        let mut s = QueueState::default();
        s.push(1);
        let o = opts(100, 5);
        assert_eq!(
            s.next(now, &o),
            Next::Deliver {
                seq: 1,
                delivery: 1
            }
        );
        let early = now + Duration::from_millis(99);
        assert!(matches!(s.next(early, &o), Next::Wait(Some(_))));
        let late = now + Duration::from_millis(100);
        assert_eq!(
            s.next(late, &o),
            Next::Deliver {
                seq: 1,
                delivery: 2
            }
        );
    }

    #[test]
    fn in_progress_pushes_the_deadline_back() {
        let now = Instant::now();
        let mut s = QueueState::default();
        s.push(1);
        let o = opts(100, 5);
        s.next(now, &o);
        s.extend(1, 1, now + Duration::from_millis(80));
        let at = now + Duration::from_millis(150);
        assert_eq!(
            s.next(at, &o),
            Next::Wait(Some(now + Duration::from_millis(180)))
        );
    }

    #[test]
    fn nak_with_delay_waits_and_stale_nak_is_ignored() {
        let now = Instant::now();
        let mut s = QueueState::default();
        s.push(1);
        let o = opts(10_000, 5);
        s.next(now, &o);
        s.nak(1, 7, None, now); // not the current delivery: ignored
        assert!(matches!(s.next(now, &o), Next::Wait(Some(_))));
        s.nak(1, 1, Some(Duration::from_millis(50)), now);
        assert_eq!(
            s.next(now, &o),
            Next::Wait(Some(now + Duration::from_millis(50)))
        );
        let later = now + Duration::from_millis(50);
        assert_eq!(
            s.next(later, &o),
            Next::Deliver {
                seq: 1,
                delivery: 2
            }
        );
    }

    #[test]
    fn message_past_max_deliver_is_exhausted() {
        let now = Instant::now();
        let mut s = QueueState::recovered([4], HashMap::from([(4, 2)]));
        let o = opts(100, 3);
        assert_eq!(
            s.next(now, &o),
            Next::Deliver {
                seq: 4,
                delivery: 3
            }
        );
        s.nak(4, 3, None, now);
        assert_eq!(
            s.next(now, &o),
            Next::Exhausted {
                seq: 4,
                deliveries: 3
            }
        );
        assert_eq!(s.next(now, &o), Next::Wait(None));
    }

    #[test]
    fn settled_message_is_never_delivered_again() {
        let now = Instant::now();
        let mut s = QueueState::default();
        s.push(1);
        let o = opts(10, 0);
        s.next(now, &o);
        s.settle(1);
        assert_eq!(s.next(now + Duration::from_secs(1), &o), Next::Wait(None));
    }
}
