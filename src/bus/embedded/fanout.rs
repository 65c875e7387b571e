//! In-process subject fan-out for the embedded bus: who is subscribed to which pattern, and
//! handing one published message to every plain subscriber and to exactly one member of each
//! queue group whose pattern matches.
//!
//! Each subscription owns a bounded tokio mpsc channel ([`SUBSCRIPTION_CAPACITY`]). Publishing
//! never spawns a task and never needs a particular runtime: it `try_send`s to every target and,
//! only for targets whose channel is full, waits up to [`SLOW_SUBSCRIBER_WAIT`] for room
//! (backpressure). A subscriber still full after that is a *slow consumer*: like NATS, the bus
//! drops that message for it and logs a warning, so one stuck subscriber can never freeze its
//! publishers forever. Dropping the subscription's receiver unsubscribes at once.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc::{self, error::TrySendError};

use crate::bus::{pattern, Message};

/// Messages a subscription buffers before its publishers feel backpressure.
pub(crate) const SUBSCRIPTION_CAPACITY: usize = 4096;

/// How long a publisher waits for room in a full subscription before dropping the message for
/// that subscriber (NATS calls this a slow consumer).
pub(crate) const SLOW_SUBSCRIBER_WAIT: Duration = Duration::from_secs(2);

/// The subscription table, shared by the bus and (weakly) by every live subscription.
pub(crate) struct Fanout {
    state: Mutex<State>,
    slow_wait: Duration,
}

#[derive(Default)]
struct State {
    next_id: u64,
    subs: BTreeMap<u64, Entry>,
    /// Round-robin position per queue group.
    rotation: HashMap<String, usize>,
}

struct Entry {
    pattern: String,
    group: Option<String>,
    tx: mpsc::Sender<Message>,
}

/// Where one published message must go: one plain subscriber, or one of a group's members
/// (listed in the order to try them).
enum Target {
    Plain(mpsc::Sender<Message>),
    Group(Vec<mpsc::Sender<Message>>),
}

enum Offer {
    Accepted,
    Full(mpsc::Sender<Message>),
    Closed,
}

impl Fanout {
    pub(crate) fn new() -> Arc<Self> {
        Self::with_slow_wait(SLOW_SUBSCRIBER_WAIT)
    }

    /// A table whose publishers wait `slow_wait` on a full subscriber before dropping.
    pub(crate) fn with_slow_wait(slow_wait: Duration) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            slow_wait,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the table half-updated (every update
        // is a single insert/remove), so a poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a subscriber; the returned stream unsubscribes when dropped.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        pattern: &str,
        group: Option<&str>,
        capacity: usize,
    ) -> LiveSubscription {
        let (tx, rx) = mpsc::channel(capacity);
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.subs.insert(
            id,
            Entry {
                pattern: pattern.to_string(),
                group: group.map(str::to_string),
                tx,
            },
        );
        LiveSubscription {
            rx,
            _guard: Unsubscribe {
                fanout: Arc::downgrade(self),
                id,
            },
        }
    }

    fn remove(&self, id: u64) {
        self.lock().subs.remove(&id);
    }

    /// Deliver `message`; returns how many subscribers (a queue group counts once) were
    /// interested, which is 0 when nobody listens on the subject.
    pub(crate) async fn publish(&self, message: Message) -> usize {
        let targets = self.targets(&message.subject);
        deliver(targets, message, self.slow_wait).await
    }

    fn targets(&self, subject: &str) -> Vec<Target> {
        let mut state = self.lock();
        state.subs.retain(|_, entry| !entry.tx.is_closed());
        let mut targets = Vec::new();
        let mut groups: BTreeMap<&str, Vec<mpsc::Sender<Message>>> = BTreeMap::new();
        for entry in state.subs.values() {
            if !pattern::matches(&entry.pattern, subject) {
                continue;
            }
            match &entry.group {
                None => targets.push(Target::Plain(entry.tx.clone())),
                Some(group) => groups.entry(group).or_default().push(entry.tx.clone()),
            }
        }
        let groups: Vec<(String, Vec<mpsc::Sender<Message>>)> = groups
            .into_iter()
            .map(|(name, members)| (name.to_string(), members))
            .collect();
        for (name, mut members) in groups {
            let turn = state.rotation.entry(name).or_insert(0);
            let start = *turn % members.len();
            *turn = turn.wrapping_add(1);
            members.rotate_left(start);
            targets.push(Target::Group(members));
        }
        targets
    }
}

/// Offer the message to every target without waiting, then wait (bounded) on the full ones.
async fn deliver(targets: Vec<Target>, message: Message, slow_wait: Duration) -> usize {
    let mut interested = 0;
    let mut full = Vec::new();
    for target in targets {
        match offer(target, &message) {
            Offer::Accepted => interested += 1,
            Offer::Full(tx) => {
                interested += 1;
                full.push(tx);
            }
            Offer::Closed => {}
        }
    }
    let waits = full.into_iter().map(|tx| {
        let message = message.clone();
        async move {
            let subject = message.subject.clone();
            if tokio::time::timeout(slow_wait, tx.send(message))
                .await
                .is_err()
            {
                tracing::warn!(
                    %subject,
                    "slow subscriber: its buffer stayed full for {slow_wait:?}, message dropped \
                     for it; make the handler faster or hand work off to a task"
                );
            }
        }
    });
    futures::future::join_all(waits).await;
    interested
}

/// Try each candidate (a plain subscriber, or a group's members in rotation order) once.
fn offer(target: Target, message: &Message) -> Offer {
    let candidates = match target {
        Target::Plain(tx) => vec![tx],
        Target::Group(members) => members,
    };
    let mut first_full = None;
    for tx in candidates {
        match tx.try_send(message.clone()) {
            Ok(()) => return Offer::Accepted,
            Err(TrySendError::Full(_)) => {
                first_full.get_or_insert(tx);
            }
            Err(TrySendError::Closed(_)) => {}
        }
    }
    first_full.map_or(Offer::Closed, Offer::Full)
}

/// A subscription's receiving end; dropping it removes the subscription.
pub(crate) struct LiveSubscription {
    rx: mpsc::Receiver<Message>,
    _guard: Unsubscribe,
}

impl LiveSubscription {
    pub(crate) async fn recv(&mut self) -> Option<Message> {
        self.rx.recv().await
    }
}

impl Stream for LiveSubscription {
    type Item = Message;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.rx.poll_recv(cx)
    }
}

struct Unsubscribe {
    fanout: Weak<Fanout>,
    id: u64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        if let Some(fanout) = self.fanout.upgrade() {
            fanout.remove(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn message(subject: &str) -> Message {
        Message {
            subject: subject.to_string(),
            reply: None,
            payload: Bytes::from_static(b"x"),
        }
    }

    #[tokio::test]
    async fn dropping_a_subscription_removes_it_from_the_table() {
        let fanout = Fanout::new();
        let sub = fanout.subscribe("a.b", None, 4);
        assert_eq!(fanout.lock().subs.len(), 1);
        drop(sub);
        assert_eq!(fanout.lock().subs.len(), 0);
        assert_eq!(fanout.publish(message("a.b")).await, 0);
    }

    #[tokio::test]
    async fn queue_group_members_take_turns() {
        let fanout = Fanout::new();
        let mut a = fanout.subscribe("q", Some("g"), 16);
        let mut b = fanout.subscribe("q", Some("g"), 16);
        for _ in 0..4 {
            assert_eq!(fanout.publish(message("q")).await, 1);
        }
        let mut counts = [0, 0];
        while a.rx.try_recv().is_ok() {
            counts[0] += 1;
        }
        while b.rx.try_recv().is_ok() {
            counts[1] += 1;
        }
        assert_eq!(counts, [2, 2]);
    }

    #[tokio::test]
    async fn full_group_member_is_skipped_for_one_with_room() {
        let fanout = Fanout::new();
        let mut a = fanout.subscribe("q", Some("g"), 1);
        let mut b = fanout.subscribe("q", Some("g"), 8);
        for _ in 0..5 {
            fanout.publish(message("q")).await;
        }
        let mut got = 0;
        while a.rx.try_recv().is_ok() {
            got += 1;
        }
        while b.rx.try_recv().is_ok() {
            got += 1;
        }
        assert_eq!(got, 5);
    }

    #[tokio::test]
    async fn stuck_subscriber_does_not_block_the_publisher_forever() {
        let wait = Duration::from_millis(50);
        let fanout = Fanout::with_slow_wait(wait);
        let mut stuck = fanout.subscribe("s", None, 1);
        assert_eq!(fanout.publish(message("s")).await, 1);
        // The buffer is full now; the next publish waits `wait`, then drops the message.
        let published = tokio::time::timeout(wait * 20, fanout.publish(message("s"))).await;
        assert_eq!(published.ok(), Some(1));
        assert!(stuck.rx.try_recv().is_ok());
        assert!(
            stuck.rx.try_recv().is_err(),
            "the second message was dropped"
        );
    }
}
