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
//! whatever the number of sessions listening.

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
        let State {
            entries,
            exact,
            wild,
            rotation,
            ..
        } = &mut *state;
        let mut targets = Vec::new();
        let mut groups: Vec<(&str, Vec<Sink>)> = Vec::new();
        let mut closed = Vec::new();
        let mut ids: Vec<u64> = exact.get(subject).cloned().unwrap_or_default();
        wild.matching(subject, &mut ids);
        for id in ids {
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
mod tests {
    use super::*;
    use async_trait::async_trait;
    use bytes::Bytes;

    fn message(subject: &str) -> Message {
        Message {
            subject: subject.to_string(),
            reply: None,
            payload: Bytes::from_static(b"x"),
            traceparent: None,
            local: None,
        }
    }

    async fn publish(fanout: &Fanout, m: Message) -> usize {
        fanout.publish(m, |_, _| async {}).await
    }

    #[tokio::test]
    async fn dropping_a_subscription_removes_it_from_the_table() {
        let fanout = Fanout::new();
        let sub = fanout.subscribe("a.b", None, 4);
        assert_eq!(fanout.lock().entries.len(), 1);
        drop(sub);
        assert_eq!(fanout.lock().entries.len(), 0);
        assert!(fanout.lock().exact.is_empty());
        assert_eq!(publish(&fanout, message("a.b")).await, 0);
    }

    /// A value that counts how often it was encoded.
    #[derive(Debug, Default)]
    struct Counted(std::sync::atomic::AtomicUsize);

    impl crate::bus::local::LocalValue for Counted {
        fn encode(&self) -> Result<Bytes, String> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Bytes::from_static(b"encoded"))
        }

        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    fn value_message(subject: &str, value: &Arc<Counted>) -> Message {
        let mut m = Message::new(subject.to_string(), None, Bytes::new());
        m.local = Some(value.clone());
        m
    }

    #[tokio::test]
    async fn a_value_is_encoded_once_and_only_when_a_listener_reads_bytes() {
        let fanout = Fanout::new();
        let value = Arc::new(Counted::default());
        let mut first = fanout.subscribe_values("v", 8);
        let mut second = fanout.subscribe_values("v", 8);
        assert_eq!(publish(&fanout, value_message("v", &value)).await, 2);
        assert_eq!(value.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        for sub in [&mut first, &mut second] {
            let got = sub.rx.try_recv().unwrap();
            assert!(got.payload.is_empty());
            assert!(got
                .local
                .unwrap()
                .as_any()
                .downcast_ref::<Counted>()
                .is_some());
        }

        let mut bytes = fanout.subscribe("v", None, 8);
        assert_eq!(publish(&fanout, value_message("v", &value)).await, 3);
        assert_eq!(value.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        let plain = bytes.rx.try_recv().unwrap();
        assert_eq!(plain.payload, Bytes::from_static(b"encoded"));
        assert!(plain.local.is_none(), "a byte reader gets no value");
        assert!(first.rx.try_recv().unwrap().local.is_some());
    }

    #[tokio::test]
    async fn queue_group_members_take_turns() {
        let fanout = Fanout::new();
        let mut a = fanout.subscribe("q", Some("g"), 16);
        let mut b = fanout.subscribe("q", Some("g"), 16);
        for _ in 0..4 {
            assert_eq!(publish(&fanout, message("q")).await, 1);
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
            publish(&fanout, message("q")).await;
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
        assert_eq!(publish(&fanout, message("s")).await, 1);
        // The buffer is full now; the next publish waits `wait`, then drops the message.
        let published = tokio::time::timeout(wait * 20, publish(&fanout, message("s"))).await;
        assert_eq!(published.ok(), Some(1));
        assert!(stuck.rx.try_recv().is_ok());
        assert!(
            stuck.rx.try_recv().is_err(),
            "the second message was dropped"
        );
    }

    struct Echo;

    #[async_trait]
    impl Handler for Echo {
        async fn handle(&self, message: Message) -> Option<Bytes> {
            Some(message.payload)
        }
    }

    #[tokio::test]
    async fn a_handler_is_called_in_the_publishers_task_and_its_reply_routed() {
        let fanout = Fanout::new();
        let _guard = fanout.serve("svc.*", Some("g"), Arc::new(Echo));
        let replies = std::sync::Mutex::new(Vec::new());
        let mut m = message("svc.echo");
        m.reply = Some("_INBOX.1".into());
        let n = fanout
            .publish(m, |to, bytes| {
                replies.lock().unwrap().push((to, bytes));
                async {}
            })
            .await;
        assert_eq!(n, 1);
        assert_eq!(
            replies.lock().unwrap().as_slice(),
            &[("_INBOX.1".to_string(), Bytes::from_static(b"x"))]
        );
    }
}
