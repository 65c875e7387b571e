//! Answers that outlive the connection they left on.
//!
//! Core NATS delivers at most once, and a message the client has already written can still be
//! lost: a server that stops (a restart, a crash) drops what it had read but not yet routed to
//! the other nodes, and the client cannot tell. A turn's answer is what its publisher waits
//! for, and nothing else carries it to them (the session log holds it, but a client following
//! `hermes.out` does not read the log). So the bus keeps what it sent with
//! [`crate::bus::Bus::publish_final`] for [`KEPT_FOR`], and when the connection breaks it sends
//! what it kept again once the connection is back. The copy is the same envelope (a turn's
//! answer is always `answer-<turn>`, [`crate::bus::events::answer_event_id`]), so subscribers
//! keep one, as they do when a session process re-sends an answer after a crash.
//!
//! [`KEPT_FOR`] is a bound on how long a dying server can hold a message unrouted before the
//! client hears the connection close; a connection cut without a close (a network partition)
//! is noticed only by the client's pings, later than that, and is not covered.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use async_nats::{Client, Event, HeaderMap};
use bytes::Bytes;

/// How long a final message is kept for sending again.
pub(super) const KEPT_FOR: Duration = Duration::from_secs(2);

struct Sent {
    at: Instant,
    subject: String,
    headers: Option<HeaderMap>,
    payload: Bytes,
}

/// The final messages of the last [`KEPT_FOR`], and those due again after a break.
#[derive(Default)]
pub(super) struct Resends {
    recent: Mutex<VecDeque<Sent>>,
    /// Taken from `recent` when the connection broke; sent once it is back.
    due: Mutex<Vec<Sent>>,
    client: OnceLock<Client>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Resends {
    /// The connection to send again on (set once it exists; the event callback is made first).
    pub(super) fn attach(&self, client: Client) {
        let _ = self.client.set(client);
    }

    /// Keep a final message that has just been handed to the connection.
    pub(super) fn keep(&self, subject: &str, headers: Option<HeaderMap>, payload: Bytes) {
        let now = Instant::now();
        let mut recent = lock(&self.recent);
        while recent
            .front()
            .is_some_and(|sent| now.duration_since(sent.at) > KEPT_FOR)
        {
            recent.pop_front();
        }
        recent.push_back(Sent {
            at: now,
            subject: subject.to_string(),
            headers,
            payload,
        });
    }

    /// Follow the connection (its event callback): a break makes what was sent in the last
    /// [`KEPT_FOR`] due again, and the next connect sends it.
    pub(super) async fn observe(&self, event: &Event) {
        match event {
            Event::Disconnected => {
                let now = Instant::now();
                let kept: Vec<Sent> = lock(&self.recent)
                    .drain(..)
                    .filter(|sent| now.duration_since(sent.at) <= KEPT_FOR)
                    .collect();
                lock(&self.due).extend(kept);
            }
            Event::Connected => {
                let due = std::mem::take(&mut *lock(&self.due));
                if due.is_empty() {
                    return;
                }
                let Some(client) = self.client.get() else {
                    return;
                };
                tracing::info!(
                    count = due.len(),
                    "the connection to nats-server broke just after answers were sent; sending \
                     them again (subscribers know a copy by its envelope id)"
                );
                for sent in due {
                    let subject = sent.subject;
                    let result = match sent.headers {
                        Some(headers) => {
                            client
                                .publish_with_headers(subject.clone(), headers, sent.payload)
                                .await
                        }
                        None => client.publish(subject.clone(), sent.payload).await,
                    };
                    if let Err(e) = result {
                        tracing::warn!(%subject, error = %e, "an answer could not be sent again");
                    }
                }
            }
            _ => {}
        }
    }

    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        (lock(&self.recent).len(), lock(&self.due).len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_break_makes_what_was_sent_just_before_it_due_again() {
        let resends = Resends::default();
        resends.keep("hermes.out.a.s.u", None, Bytes::from_static(b"answer"));
        resends.keep("hermes.out.a.t.u", None, Bytes::from_static(b"answer"));
        assert_eq!(resends.kept(), (2, 0));
        resends.observe(&Event::Disconnected).await;
        assert_eq!(
            resends.kept(),
            (0, 2),
            "both are due once the connection is back"
        );
        // No connection attached: nothing to send on, and nothing is kept twice.
        resends.observe(&Event::Connected).await;
        assert_eq!(resends.kept(), (0, 0));
    }

    #[tokio::test]
    async fn other_events_change_nothing() {
        let resends = Resends::default();
        resends.keep("hermes.out.a.s.u", None, Bytes::from_static(b"answer"));
        resends.observe(&Event::SlowConsumer(1)).await;
        resends.observe(&Event::Connected).await;
        assert_eq!(resends.kept(), (1, 0));
    }
}
