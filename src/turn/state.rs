//! The state of a running turn ([`TurnState`]): the session's view the turn works on, and
//! how each step is persisted — a mid-turn step kept back until the turn's next commit point
//! (`TurnState::deferred`), everything else written at once.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::first_write::{self, Claim, HeldAck};
use super::{new_stored, Emitter, TurnEnv, TurnError};
use crate::llm::{ChatMessage, Usage};
use crate::protocol::ToolStatus;
use crate::store::sessions::{next_seq_after, SessionMeta, StoredMessage};
use crate::store::tasks::{TaskState, TurnPhase, TurnRecord};
use crate::store::StoreError;

/// Mutable state of a running turn: the session's view, persisted at every step.
pub(super) struct TurnState<'a> {
    pub(super) env: &'a TurnEnv,
    pub(super) meta: &'a mut SessionMeta,
    pub(super) task: &'a mut TaskState,
    /// The whole log before this turn's later messages; the turn's own messages follow in
    /// `added`.
    pub(super) log: &'a [StoredMessage],
    pub(super) added: Vec<StoredMessage>,
    pub(super) emitter: Emitter,
    /// Handoffs in the metadata as last written; another one means the next save writes it.
    handoffs_written: usize,
    /// This turn's messages stored mid-turn and not yet written. They go out with the turn's
    /// next full save (an answer, a pause, a failure), or before a call that may act on the
    /// world ([`TurnState::flush_deferred`]): one write of the task state (on the replicated
    /// log, one round trip) per commit point instead of one per step.
    deferred: Vec<StoredMessage>,
    /// When the oldest of `deferred` was kept back.
    deferred_since: Option<Instant>,
    /// The turn's message was taken for a write of the turn ([`first_write`]) that has not
    /// succeeded yet.
    message_unwritten: bool,
    /// The answered turn's extraction job, for the answer's append to carry
    /// ([`super::outbox`]).
    pub(super) carried: Option<bytes::Bytes>,
    /// Which awaited jobs the tool step asks about.
    pub(super) awaited: super::Awaited,
}

/// Longest a mid-turn step is kept back: a turn of slow reads still stores its progress about
/// this often, so a crash does not make it run them all again.
pub(super) const DEFER_AT_MOST: Duration = Duration::from_millis(500);

impl<'a> TurnState<'a> {
    pub(super) fn new(
        env: &'a TurnEnv,
        meta: &'a mut SessionMeta,
        task: &'a mut TaskState,
        log: &'a [StoredMessage],
        emitter: Emitter,
    ) -> Self {
        Self {
            env,
            handoffs_written: meta.handoffs.len(),
            meta,
            task,
            log,
            added: Vec::new(),
            emitter,
            deferred: Vec::new(),
            deferred_since: None,
            message_unwritten: false,
            carried: None,
            awaited: super::Awaited::AskAll,
        }
    }

    pub(super) fn record(&mut self) -> &mut TurnRecord {
        // `run_turn` checks there is a turn before building the state.
        self.task.turn.get_or_insert_with(|| {
            TurnRecord::received(String::new(), String::new(), String::new())
        })
    }

    pub(super) fn set_phase(&mut self, phase: TurnPhase) {
        let r = self.record();
        r.phase = phase;
        r.updated_at = Utc::now();
    }

    /// The turn has its answer; queueing its extraction is still ahead (`ending::finish`).
    pub(super) fn set_answered(&mut self) {
        self.set_phase(TurnPhase::Answered);
        let item = self.env.inbox_item.load(Ordering::Acquire);
        let record = self.record();
        record.extraction_queued = false;
        record.inbox_item = (item != 0).then_some(item);
    }

    /// Store a message of this turn together with the current phase, flushed.
    pub(super) async fn persist(
        &mut self,
        message: ChatMessage,
        usage: Option<Usage>,
    ) -> Result<(), TurnError> {
        self.persist_as(message, usage, None).await
    }

    /// Store a step's tool results, each with the status its call ended in, in one write.
    pub(super) async fn persist_tool_results(
        &mut self,
        results: Vec<(ChatMessage, ToolStatus)>,
    ) -> Result<(), TurnError> {
        let turn_id = self.record().turn_id.clone();
        let now = Utc::now();
        let stored = (self.meta.next_seq..)
            .zip(results)
            .map(|(seq, (message, status))| {
                let mut stored = new_stored(&self.env.tokens, seq, &turn_id, message, now);
                stored.tool_status = Some(status);
                stored
            })
            .collect();
        self.persist_stored(stored).await
    }

    async fn persist_as(
        &mut self,
        message: ChatMessage,
        usage: Option<Usage>,
        tool_status: Option<ToolStatus>,
    ) -> Result<(), TurnError> {
        let turn_id = self.record().turn_id.clone();
        let mut stored = new_stored(
            &self.env.tokens,
            self.meta.next_seq,
            &turn_id,
            message,
            Utc::now(),
        );
        stored.usage = usage;
        stored.tool_status = tool_status;
        self.persist_stored(vec![stored]).await
    }

    /// Store `stored` (numbered from the session's next sequence on): deferred mid-turn,
    /// written at once otherwise.
    async fn persist_stored(&mut self, stored: Vec<StoredMessage>) -> Result<(), TurnError> {
        let messages = stored.as_slice();
        // Mid-turn steps wait for the turn's next full save; a turn that pauses or ends, or a
        // handoff, writes at once.
        let running = matches!(
            self.task.turn.as_ref().map(|t| t.phase),
            Some(TurnPhase::Received | TurnPhase::Planning | TurnPhase::AwaitingTools)
        );
        let step = running && self.meta.handoffs.len() == self.handoffs_written;
        if step {
            // A mid-turn step waits for the turn's next full save. No guarantee covers it
            // (`engine.durability` promises what was acknowledged or answered), and only
            // reads run before that save: a crash before it resumes the turn from its last
            // stored step and may run those reads again — what a crash before sled's flush
            // would do anyway. On the replicated log every append keeps its fence.
            self.meta.next_seq = next_seq_after(self.meta.next_seq, messages);
            self.deferred.extend_from_slice(messages);
            let since = *self.deferred_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= DEFER_AT_MOST {
                self.save_task().await?;
            }
        } else {
            self.save_with(messages).await?;
            self.handoffs_written = self.meta.handoffs.len();
        }
        self.added.extend(stored);
        Ok(())
    }

    /// Store the task state alone (with any deferred messages), flushed.
    pub(super) async fn save_task(&mut self) -> Result<(), TurnError> {
        self.save_with(&[]).await
    }

    /// Append the deferred mid-turn messages now: before a call that acts on the world, so a
    /// process that lost the session to another owner learns it (its append is fenced) before
    /// it acts, not after. The turn's message is acknowledged (so on disk) by then as well.
    pub(super) async fn flush_deferred(&mut self) -> Result<(), TurnError> {
        // A message still waiting for its first write goes now (its acknowledgement with it).
        let ack = self.claim_first_write().await?;
        if ack.is_some() {
            self.save_claimed(&[], ack).await?;
        }
        if self.env.ack.pending().await {
            // No waiting for a flush another commit may ask for: this call needs it now.
            self.env.commit().await?;
        }
        if self.deferred.is_empty() {
            return Ok(());
        }
        self.save_task().await
    }

    /// A full save of the task with the deferred messages and then `messages`; the deferred
    /// ones are dropped only once stored.
    async fn save_with(&mut self, messages: &[StoredMessage]) -> Result<(), TurnError> {
        let ack = self.claim_first_write().await?;
        self.save_claimed(messages, ack).await
    }

    /// [`Self::save_with`] once the turn's message, if it still waited, is in `deferred`.
    async fn save_claimed(
        &mut self,
        messages: &[StoredMessage],
        ack: Option<Box<HeldAck>>,
    ) -> Result<(), TurnError> {
        if self.deferred.is_empty() {
            let saved = self.save_now(messages).await;
            return self.written(ack, saved).await;
        }
        let mut all = self.deferred.clone();
        all.extend_from_slice(messages);
        let saved = self.save_now(&all).await;
        self.written(ack, saved).await?;
        self.deferred.clear();
        self.deferred_since = None;
        Ok(())
    }

    /// One full save, carrying the extraction job when the answer's append is to.
    async fn save_now(&mut self, messages: &[StoredMessage]) -> Result<(), StoreError> {
        match self.carried.take() {
            Some(job) => {
                let store = &self.env.store;
                store
                    .save_carrying(self.meta, messages, self.task, &job)
                    .await
            }
            None => self.env.store.save(self.meta, messages, self.task).await,
        }
    }

    /// Before a write: the turn's message, if it still waits for its first write
    /// ([`first_write`]), goes first in this one; the acknowledgement to send once it is
    /// written.
    async fn claim_first_write(&mut self) -> Result<Option<Box<HeldAck>>, TurnError> {
        match self.env.first_write.claim().await {
            Claim::Nothing => Ok(None),
            Claim::Take { message, ack } => {
                self.deferred.insert(0, *message);
                self.deferred_since.get_or_insert_with(Instant::now);
                self.message_unwritten = true;
                Ok(Some(ack))
            }
            Claim::Appended { log_seq } => {
                self.meta.log_seq = log_seq;
                Ok(None)
            }
            Claim::Failed(e) => Err(first_write::not_written(e).into()),
        }
    }

    /// After a write: the acknowledgement of the turn's message it carried leaves. A write that
    /// failed while the message was not in the log yet sends the turn back to the inbox
    /// (the acknowledgement never leaves, nor the events held for it).
    async fn written(
        &mut self,
        ack: Option<Box<HeldAck>>,
        saved: Result<(), StoreError>,
    ) -> Result<(), TurnError> {
        match saved {
            Ok(()) => {
                if let Some(ack) = ack {
                    self.message_unwritten = false;
                    ack.send(self.env).await;
                }
                Ok(())
            }
            Err(e) if self.message_unwritten => Err(first_write::not_written(e).into()),
            Err(e) => Err(e.into()),
        }
    }

    /// A write carried the turn's message and failed ([`first_write`]).
    pub(super) fn message_unwritten(&self) -> bool {
        self.message_unwritten
    }

    /// The turn ends: true when its message never reached the log (a write that carried it
    /// failed, or none was made), so it goes back to the inbox; what was held for its
    /// acknowledgement is dropped then.
    pub(super) async fn message_lost(&mut self) -> bool {
        let lost = self.env.first_write.abandon().await || self.message_unwritten;
        if lost {
            self.env.ack.drop_held().await;
        }
        lost
    }

    /// This turn's messages so far (those already in the log, then those added now). Another
    /// turn's messages may sit between them (it talked while this one waited): they are left
    /// out.
    pub(super) fn current(&self) -> Vec<StoredMessage> {
        let Some(record) = self.task.turn.as_ref() else {
            return self.added.clone();
        };
        let start = turn_start(self.log, record);
        let mut current: Vec<StoredMessage> = self.log[start..]
            .iter()
            .filter(|m| m.turn_id == record.turn_id)
            .cloned()
            .collect();
        current.extend(self.added.iter().cloned());
        current
    }
}

/// Index of the first message of `record`'s turn (its user message) in `log`; `log.len()`
/// when it is not there.
pub(super) fn turn_start(log: &[StoredMessage], record: &TurnRecord) -> usize {
    if let Some(at) = log.iter().rposition(|m| m.id == record.message_id) {
        return at;
    }
    let mut start = log.len();
    while start > 0 && log[start - 1].turn_id == record.turn_id {
        start -= 1;
    }
    start
}
