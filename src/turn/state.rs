//! The state of a running turn ([`TurnState`]): the session's view the turn works on, and
//! how each step is persisted — a mid-turn step kept back until the turn's next commit point
//! (`TurnState::deferred`), everything else written at once.

use std::time::{Duration, Instant};

use chrono::Utc;

use super::{new_stored, Emitter, TurnEnv, TurnError};
use crate::llm::{ChatMessage, Usage};
use crate::protocol::ToolStatus;
use crate::store::sessions::{next_seq_after, SessionMeta, StoredMessage};
use crate::store::tasks::{TaskState, TurnPhase, TurnRecord};

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
        self.record().extraction_queued = false;
    }

    /// Store a message of this turn together with the current phase, flushed.
    pub(super) async fn persist(
        &mut self,
        message: ChatMessage,
        usage: Option<Usage>,
    ) -> Result<(), TurnError> {
        self.persist_as(message, usage, None).await
    }

    /// Store a tool result of this turn with the status its call ended in.
    pub(super) async fn persist_tool_result(
        &mut self,
        message: ChatMessage,
        status: ToolStatus,
    ) -> Result<(), TurnError> {
        self.persist_as(message, None, Some(status)).await
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
        let messages = std::slice::from_ref(&stored);
        // Mid-turn the session's metadata record may lag; a turn that pauses or ends, or a
        // handoff, writes it.
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
            self.deferred.push(stored.clone());
            let since = *self.deferred_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= DEFER_AT_MOST {
                self.env
                    .store
                    .save_step(self.meta, &self.deferred, self.task)
                    .await?;
                self.deferred.clear();
                self.deferred_since = None;
            }
        } else {
            self.save_with(messages).await?;
            self.handoffs_written = self.meta.handoffs.len();
        }
        self.added.push(stored);
        Ok(())
    }

    /// Store the task state alone (with any deferred messages), flushed.
    pub(super) async fn save_task(&mut self) -> Result<(), TurnError> {
        self.save_with(&[]).await
    }

    /// [`Self::save_task`] for a note on the task that leaves the session's metadata as the
    /// last full save wrote it (but for the time).
    pub(super) async fn save_task_note(&mut self) -> Result<(), TurnError> {
        if !self.deferred.is_empty() {
            return self.save_task().await;
        }
        Ok(self.env.store.save_step(self.meta, &[], self.task).await?)
    }

    /// Append the deferred mid-turn messages now: before a call that acts on the world, so a
    /// process that lost the session to another owner learns it (its append is fenced) before
    /// it acts, not after. The turn's message is acknowledged (so on disk) by then as well.
    pub(super) async fn flush_deferred(&mut self) -> Result<(), TurnError> {
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
        if self.deferred.is_empty() {
            self.env.store.save(self.meta, messages, self.task).await?;
            return Ok(());
        }
        let mut all = self.deferred.clone();
        all.extend_from_slice(messages);
        self.env.store.save(self.meta, &all, self.task).await?;
        self.deferred.clear();
        self.deferred_since = None;
        Ok(())
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
