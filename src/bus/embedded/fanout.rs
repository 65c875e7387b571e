//! In-process subject fan-out for the embedded bus: who listens on which pattern, and handing
//! one published message to every plain listener and to exactly one member of each queue group
//! whose pattern matches.
//!
//! A listener is a channel (a [`LiveSubscription`]) or a [`Handler`] (a service registered with
//! `serve`). A handler is *called*, in the publisher's task: a request to an in-process service
//! costs a function call, not a hop to another thread and back. A channel is bounded
//! ([`SUBSCRIPTION_CAPACITY`]); publishing `try_send`s to it and, only when it is full, waits up
//! to [`SLOW_SUBSCRIBER_WAIT`] for room (backpressure). A subscriber still full after that is a
//! *slow consumer*: like NATS, the bus drops that message for it and logs a warning, so one
//! stuck subscriber can never freeze its publishers. Dropping a subscription (or the serving
//! guard) removes it at once. A body published as a value (`Message::local`) goes as it is to
//! the channels that take values and is encoded once, at publish, for everyone else.
//!
//! Lookup: patterns without wildcards sit in a map by subject, wildcard ones in a tree of tokens
//! ([`WildIndex`]), so a publish costs a hash lookup and a walk of its subject's tokens,
//! whatever the number of sessions listening. Which listeners a subject has is remembered until
//! the table changes (at most [`REMEMBERED_SUBJECTS`] subjects): a turn publishes on the same
//! few subjects step after step.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc::{self, error::TrySendError};

use super::wild_index::WildIndex;
use crate::bus::pattern::has_wildcard;
use crate::bus::{Handler, Message};

/// Messages a subscription buffers before its publishers feel backpressure.
pub(crate) const SUBSCRIPTION_CAPACITY: usize = 4096;

/// How long a publisher waits for room in a full subscription before dropping the message for
/// that subscriber (NATS calls this a slow consumer).
pub(crate) const SLOW_SUBSCRIBER_WAIT: Duration = Duration::from_secs(2);

/// Subjects whose listeners the table remembers at most; past that it starts again.
const REMEMBERED_SUBJECTS: usize = 4096;

/// Where a listener's messages go.
#[derive(Clone)]
enum Sink {
    /// `values`: the subscriber takes a body published as a value as it is
    /// ([`Message::local`]); otherwise it reads bytes.
    Channel {
        tx: mpsc::Sender<Message>,
        values: bool,
    },
    Handler(Arc<dyn Handler>),
}

impl Sink {
    fn is_closed(&self) -> bool {
        matches!(self, Sink::Channel { tx, .. } if tx.is_closed())
    }

    fn reads_bytes(&self) -> bool {
        !matches!(self, Sink::Channel { values: true, .. })
    }
}

struct Entry {
    pattern: String,
    group: Option<String>,
    sink: Sink,
}

/// The listener table, shared by the bus and (weakly) by every live listener.
pub(crate) struct Fanout {
    state: Mutex<State>,
    slow_wait: Duration,
}

#[derive(Default)]
struct State {
    next_id: u64,
    entries: BTreeMap<u64, Entry>,
    /// Ids of entries whose pattern has no wildcard, by subject.
    exact: HashMap<String, Vec<u64>>,
    /// Ids of entries whose pattern has a wildcard.
    wild: WildIndex,
    /// Round-robin position per queue group.
    rotation: HashMap<String, usize>,
    /// The ids of each subject's listeners, in table order, as the lookup found them; emptied
    /// whenever a listener comes or goes.
    remembered: HashMap<String, Arc<[u64]>>,
}

impl State {
    /// The ids of the listeners of `subject`, in table order: exact ones, then wildcard ones.
    fn listeners(&mut self, subject: &str) -> Arc<[u64]> {
        if let Some(ids) = self.remembered.get(subject) {
            return ids.clone();
        }
        let mut ids: Vec<u64> = self.exact.get(subject).cloned().unwrap_or_default();
        self.wild.matching(subject, &mut ids);
        let ids: Arc<[u64]> = ids.into();
        if self.remembered.len() >= REMEMBERED_SUBJECTS {
            self.remembered.clear();
        }
        self.remembered.insert(subject.to_string(), ids.clone());
        ids
    }
}

/// One published message's destinations: a plain listener, or one of a group's members
/// (in the order to try them).
enum Target {
    Plain(Sink),
    Group(Vec<Sink>),
}

enum Offer {
    Accepted,
    /// A full channel, and whether it takes values.
    Full(mpsc::Sender<Message>, bool),
    Call(Arc<dyn Handler>),
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
        // completes before the next statement that could panic), so a poisoned lock is safe.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, pattern: &str, group: Option<&str>, sink: Sink) -> u64 {
        let mut state = self.lock();
        state.remembered.clear();
        state.next_id += 1;
        let id = state.next_id;
        if has_wildcard(pattern) {
            state.wild.insert(pattern, id);
        } else {
            state.exact.entry(pattern.to_string()).or_default().push(id);
        }
        state.entries.insert(
            id,
            Entry {
                pattern: pattern.to_string(),
                group: group.map(str::to_string),
                sink,
            },
        );
        id
    }

    /// Register a channel subscriber; the returned stream unsubscribes when dropped.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        pattern: &str,
        group: Option<&str>,
        capacity: usize,
    ) -> LiveSubscription {
        self.subscribe_channel(pattern, group, capacity, false)
    }

    /// Register a channel subscriber that takes bodies published as values as they are.
    pub(crate) fn subscribe_values(
        self: &Arc<Self>,
        pattern: &str,
        capacity: usize,
    ) -> LiveSubscription {
        self.subscribe_channel(pattern, None, capacity, true)
    }

    fn subscribe_channel(
        self: &Arc<Self>,
        pattern: &str,
        group: Option<&str>,
        capacity: usize,
        values: bool,
    ) -> LiveSubscription {
        let (tx, rx) = mpsc::channel(capacity);
        let id = self.add(pattern, group, Sink::Channel { tx, values });
        LiveSubscription {
            rx,
            _guard: Unsubscribe {
                fanout: Arc::downgrade(self),
                id,
            },
        }
    }

    /// Register a handler; it is removed when the guard drops.
    pub(crate) fn serve(
        self: &Arc<Self>,
        pattern: &str,
        group: Option<&str>,
        handler: Arc<dyn Handler>,
    ) -> Unsubscribe {
        let id = self.add(pattern, group, Sink::Handler(handler));
        Unsubscribe {
            fanout: Arc::downgrade(self),
            id,
        }
    }

    fn remove(&self, id: u64) {
        let mut state = self.lock();
        let Some(entry) = state.entries.remove(&id) else {
            return;
        };
        state.remembered.clear();
        if has_wildcard(&entry.pattern) {
            state.wild.remove(&entry.pattern, id);
        } else if let Some(ids) = state.exact.get_mut(&entry.pattern) {
            ids.retain(|e| *e != id);
            if ids.is_empty() {
                state.exact.remove(&entry.pattern);
            }
        }
    }

    /// Deliver `message`; returns how many listeners (a queue group counts once) were
    /// interested, which is 0 when nobody listens on the subject. Handlers run before this
    /// returns; their replies go to the message's reply subject through `reply`. A body
    /// published as a value ([`Message::local`]) is encoded here, once, only when a listener
    /// reads bytes; an encoding failure drops the message for those listeners (logged).
    pub(crate) async fn publish<R, F>(&self, mut message: Message, reply: R) -> usize
    where
        R: Fn(String, bytes::Bytes) -> F,
        F: std::future::Future<Output = ()>,
    {
        let mut targets = self.targets(&message.subject);
        if let Some(value) = &message.local {
            if message.payload.is_empty() && targets.iter().any(Target::reads_bytes) {
                match value.encode() {
                    Ok(bytes) => message.payload = bytes,
                    Err(reason) => {
                        tracing::warn!(
                            subject = %message.subject,
                            %reason,
                            "a value published in-process cannot be encoded: dropped for the \
                             listeners that read bytes; this is a bug in the publisher"
                        );
                        targets.retain(|t| !t.reads_bytes());
                    }
                }
            }
        }
        let mut interested = 0;
        let mut full = Vec::new();
        let mut calls = Vec::new();
        for target in targets {
            match offer(target, &message) {
                Offer::Accepted => interested += 1,
                Offer::Full(tx, values) => {
                    interested += 1;
                    full.push((tx, values));
                }
                Offer::Call(handler) => {
                    interested += 1;
                    calls.push(handler);
                }
                Offer::Closed => {}
            }
        }
        for handler in calls {
            let answer = handler.handle(message.clone()).await;
            if let (Some(answer), Some(to)) = (answer, &message.reply) {
                reply(to.clone(), answer).await;
            }
        }
        if !full.is_empty() {
            wait_for_room(full, &message, self.slow_wait).await;
        }
        interested
    }

    /// The handler a message on `subject` would go to, when it is the only destination.
    pub(crate) fn sole_handler(&self, subject: &str) -> Option<Arc<dyn Handler>> {
        let mut targets = self.targets(subject);
        if targets.len() != 1 {
            return None;
        }
        let first = match targets.pop()? {
            Target::Plain(sink) => sink,
            Target::Group(members) => members.into_iter().next()?,
        };
        match first {
            Sink::Handler(handler) => Some(handler),
            Sink::Channel { .. } => None,
        }
    }

    /// The listeners of `subject`, in table order; a group's members come rotated so that
    /// its next member in turn is tried first. Called on every publish and request, so it
    /// allocates only the listeners' ids and what it returns.
    fn targets(&self, subject: &str) -> Vec<Target> {
        let mut state = self.lock();
        let ids = state.listeners(subject);
        let State {
            entries, rotation, ..
        } = &mut *state;
        let mut targets = Vec::new();
        let mut groups: Vec<(&str, Vec<Sink>)> = Vec::new();
        let mut closed = Vec::new();
        for &id in ids.iter() {
            let Some(entry) = entries.get(&id) else {
                continue;
            };
            if entry.sink.is_closed() {
                closed.push(id);
                continue;
            }
            match &entry.group {
                None => targets.push(Target::Plain(entry.sink.clone())),
                Some(group) => match groups.iter_mut().find(|(name, _)| *name == group) {
                    Some((_, members)) => members.push(entry.sink.clone()),
                    None => groups.push((group, vec![entry.sink.clone()])),
                },
            }
        }
        for (name, mut members) in groups {
            let turn = match rotation.get_mut(name) {
                Some(turn) => turn,
                None => rotation.entry(name.to_string()).or_insert(0),
            };
            let start = *turn % members.len();
            *turn = turn.wrapping_add(1);
            members.rotate_left(start);
            targets.push(Target::Group(members));
        }
        drop(state);
        for id in closed {
            self.remove(id);
        }
        targets
    }
}

/// Wait (bounded) for room in the listeners that were full.
async fn wait_for_room(
    full: Vec<(mpsc::Sender<Message>, bool)>,
    message: &Message,
    slow_wait: Duration,
) {
    let waits = full.into_iter().map(|(tx, values)| {
        let message = copy_for(values, message);
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
}

impl Target {
    fn reads_bytes(&self) -> bool {
        match self {
            Target::Plain(sink) => sink.reads_bytes(),
            Target::Group(members) => members.iter().any(Sink::reads_bytes),
        }
    }
}

/// The copy of `message` a sink gets: without the value when it reads bytes.
fn copy_for(values: bool, message: &Message) -> Message {
    let mut copy = message.clone();
    if !values {
        copy.local = None;
    }
    copy
}

/// Try each candidate (a plain listener, or a group's members in rotation order) once.
fn offer(target: Target, message: &Message) -> Offer {
    let candidates = match target {
        Target::Plain(sink) => vec![sink],
        Target::Group(members) => members,
    };
    let mut first_full = None;
    for sink in candidates {
        match sink {
            Sink::Handler(handler) => return Offer::Call(handler),
            Sink::Channel { tx, values } => match tx.try_send(copy_for(values, message)) {
                Ok(()) => return Offer::Accepted,
                Err(TrySendError::Full(_)) => {
                    first_full.get_or_insert((tx, values));
                }
                Err(TrySendError::Closed(_)) => {}
            },
        }
    }
    first_full.map_or(Offer::Closed, |(tx, values)| Offer::Full(tx, values))
}

/// A subscription's receiving end; dropping it removes the subscription.
pub(crate) struct LiveSubscription {
    rx: mpsc::Receiver<Message>,
    _guard: Unsubscribe,
}

impl Stream for LiveSubscription {
    type Item = Message;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        self.rx.poll_recv(cx)
    }
}

/// Removes its listener from the table when dropped.
pub(crate) struct Unsubscribe {
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
#[path = "fanout_tests.rs"]
mod tests;
