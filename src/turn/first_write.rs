//! A user message's first write to the replicated session log, shared with the turn it starts.
//!
//! On the replicated log (the NATS bus) accepting a message is an append, and a quick turn's
//! answer is another one a millisecond later. So the message is not appended on arrival: it
//! waits up to `cluster.first_write_within_ms` (50 ms) for the turn's first write (a commit
//! point, or the step before a call that acts on the world) and goes into the log with it. A
//! quick turn then costs one append instead of two. Meanwhile the message is safe in the
//! session's inbox, whose item is settled only when the turn ends.
//!
//! `accepted` keeps its meaning ("in the session log"). The acknowledgement and the turn's
//! events are held until that write ([`super::ack::AckSlot::hold`]). So a process that lost
//! the session to another owner (its write is fenced) has told nobody anything, and its turn
//! goes back to the inbox. When the wait runs out (a slower turn), a timer appends the message
//! alone, as every message was appended before. The turn then writes on from the fence that
//! append left.
//!
//! Only when the planner runs in this process ([`super::ports::TurnPorts::plans_in_process`]).
//! A planner elsewhere streams the model's text to the session's subject itself, and that
//! must not happen before the message is in the log. `cluster.first_write_within_ms` sets the
//! wait (0: every message is appended on arrival).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::ack::AckOpener;
use super::TurnEnv;
use crate::protocol::envelope::Envelope;
use crate::protocol::Accepted;
use crate::store::replica::LogError;
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::TaskState;
use crate::store::StoreError;

/// The message of the session's new turn while it waits for its first write. One per
/// session actor; clones share it.
#[derive(Clone, Default)]
pub struct FirstWrite(Arc<Mutex<Slot>>);

#[derive(Default)]
enum Slot {
    #[default]
    Empty,
    /// Not written yet.
    Waiting(Box<Waiting>),
    /// The timer appended it: the fence it left for the turn's next write.
    Appended { log_seq: u64 },
    /// The timer's append failed: the turn goes back to the inbox.
    Failed(StoreError),
}

/// What the timer needs to append the message alone, as it would have been on arrival.
struct Waiting {
    /// The session's metadata before the message.
    meta: SessionMeta,
    message: StoredMessage,
    /// The task state with the new turn, `received`.
    task: TaskState,
    ack: HeldAck,
}

/// The acknowledgement held until the message is in the log, and the events held with it.
/// Dropped unsent, it lets waiters go and keeps the events held ([`super::ack::AckSlot::drop_held`]
/// drops them).
pub(super) struct HeldAck {
    to: Option<String>,
    accepted: Envelope<Accepted>,
    opener: AckOpener,
}

impl HeldAck {
    /// The message is in the log: the acknowledgement leaves, then the events held for it.
    pub(super) async fn send(self, env: &TurnEnv) {
        super::inbound::reply(env, self.to.as_deref(), &self.accepted).await;
        self.opener.open(&env.ports).await;
    }
}

/// What a turn finds before one of its writes.
pub(super) enum Claim {
    /// Nothing waits: its message is in the log.
    Nothing,
    /// The message waits: it goes first in this write, and `ack` is sent once that succeeds.
    Take {
        message: Box<StoredMessage>,
        ack: Box<HeldAck>,
    },
    /// The timer appended the message: write on from `log_seq`.
    Appended { log_seq: u64 },
    /// The timer's append failed.
    Failed(StoreError),
}

impl FirstWrite {
    /// Keep `message` (stored in the session as `task` says, after `meta`) for its turn's
    /// first write, acknowledged on `to` with `accepted` by whichever write takes it; the timer
    /// appends it alone after `within`.
    pub(super) async fn defer(
        &self,
        env: &TurnEnv,
        within: Duration,
        meta: SessionMeta,
        message: StoredMessage,
        task: TaskState,
        ack: (Option<String>, Envelope<Accepted>),
    ) {
        let opener = env.ack.hold().await;
        let turn_id = message.turn_id.clone();
        let waiting = Waiting {
            meta,
            message,
            task,
            ack: HeldAck {
                to: ack.0,
                accepted: ack.1,
                opener,
            },
        };
        *self.0.lock().await = Slot::Waiting(Box::new(waiting));
        let env = env.clone();
        tokio::spawn(async move {
            tokio::time::sleep(within).await;
            append_alone(&env, &turn_id).await;
        });
    }

    /// Before a write of the turn: take its message if it still waits.
    pub(super) async fn claim(&self) -> Claim {
        match std::mem::take(&mut *self.0.lock().await) {
            Slot::Empty => Claim::Nothing,
            Slot::Waiting(w) => Claim::Take {
                message: Box::new(w.message),
                ack: Box::new(w.ack),
            },
            Slot::Appended { log_seq } => Claim::Appended { log_seq },
            Slot::Failed(e) => Claim::Failed(e),
        }
    }

    /// The turn ends: a message still waiting is never written (the turn goes back to the
    /// inbox). True when one was waiting, or the timer's append of it failed.
    pub(super) async fn abandon(&self) -> bool {
        match std::mem::take(&mut *self.0.lock().await) {
            Slot::Waiting(_) | Slot::Failed(_) => true,
            Slot::Empty | Slot::Appended { .. } => false,
        }
    }
}

/// The wait ran out: append the turn's message alone, unless a write of the turn took it.
async fn append_alone(env: &TurnEnv, turn_id: &str) {
    let mut slot = env.first_write.0.lock().await;
    if !matches!(&*slot, Slot::Waiting(w) if w.message.turn_id == turn_id) {
        return;
    }
    let Slot::Waiting(waiting) = std::mem::take(&mut *slot) else {
        return;
    };
    let Waiting {
        mut meta,
        message,
        task,
        ack,
    } = *waiting;
    // The slot stays locked until the append is done: the turn's next write waits for the
    // fence it leaves.
    match env
        .store
        .save(&mut meta, std::slice::from_ref(&message), &task)
        .await
    {
        Ok(()) => {
            *slot = Slot::Appended {
                log_seq: meta.log_seq,
            };
            drop(slot);
            ack.send(env).await;
        }
        Err(e) => {
            tracing::warn!(session = %meta.session, error = %e, "message not appended to the session log; its turn goes back to the inbox");
            // The acknowledgement never leaves; the events held for it stay held.
            *slot = Slot::Failed(e);
            drop(ack);
        }
    }
}

/// The error a turn whose message could not be written ends with: it goes back to the
/// session's inbox (a fenced or unreachable log says so itself), so the message is accepted
/// again — here or by the session's owner — or, after a few tries, refused with the cause.
pub(super) fn not_written(e: StoreError) -> StoreError {
    if e.hands_back() {
        return e;
    }
    StoreError::Log(LogError::Unavailable(format!(
        "the message was not written to the session log: {e}"
    )))
}

/// The error of a turn that ended without writing its message to the log (see
/// [`not_written`]).
pub(super) fn never_written() -> StoreError {
    StoreError::Log(LogError::Unavailable(
        "the turn ended before its message was written to the session log".into(),
    ))
}
