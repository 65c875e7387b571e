//! An answered turn's memory-extraction job carried by the answer's own append to the
//! replicated session log — a transactional outbox, on NATS. The deployment's
//! memory-extractors take their jobs from the log
//! ([`crate::bus::cluster::Cluster::extraction_outbox`]), so queueing the job costs no publish,
//! no stored queue message and no note: the answer and its extraction are one write.
//!
//! Only for a turn that answers with its message's inbox item in hand, whose ack after the
//! turn notes that the answer was delivered ([`crate::store::tasks::TurnRecord::inbox_item`]).
//! A process that finds such a record while the inbox still holds the item (its owner died
//! before settling it) sends the answer again — and never queues the job twice, since the log
//! already did. A turn resumed without an item in hand (after a job or a confirmation) queues
//! its job and notes it, as on the embedded bus.

use bytes::Bytes;
use chrono::Utc;

use super::emit::scope_of;
use super::state::TurnState;
use super::TurnEnv;
use crate::llm::ChatMessage;
use crate::protocol::envelope::Envelope;
use crate::protocol::ExtractJob;
use crate::store::sessions::{SessionMeta, StoredMessage};
use crate::store::tasks::TurnRecord;

impl TurnState<'_> {
    /// Put the answered turn's extraction job into the answer's coming append and mark the
    /// turn's extraction queued in it — when the log carries jobs and the turn's inbox item is
    /// in hand; otherwise nothing changes and [`super::ending::finish`] queues the job.
    pub(super) fn carry_extraction(&mut self, answer: &str) {
        let in_hand = self.record().inbox_item.is_some();
        if !(in_hand && self.env.store.is_replicated() && self.env.ports.extraction_rides_on_log())
        {
            return;
        }
        let encoded = {
            let (Some(record), Some(user_message)) =
                (self.task.turn.as_ref(), self.first_message())
            else {
                return;
            };
            let job = extraction_job(self.env, self.meta, record, user_message, answer);
            encode_job(self.env, self.meta, record, job)
        };
        match encoded {
            Ok(payload) => {
                self.carried = Some(payload);
                let record = self.record();
                record.extraction_queued = true;
                record.updated_at = Utc::now();
            }
            Err(e) => {
                let turn = &self.record().turn_id;
                tracing::error!(%turn, error = %e, "extraction job not encoded; it is queued on its own instead");
            }
        }
    }

    /// The turn's user message: the first of its messages.
    fn first_message(&self) -> Option<&StoredMessage> {
        let record = self.task.turn.as_ref()?;
        let start = super::turn_start(self.log, record).min(self.log.len());
        self.log[start..]
            .iter()
            .find(|m| m.turn_id == record.turn_id)
            .or_else(|| self.added.first())
    }
}

/// The extraction job of an answered turn: its user message and its answer, for the agent's
/// memory namespace. An agent that writes no memories still gets one: it releases the turn's
/// holds on the memories it recalled.
pub(super) fn extraction_job(
    env: &TurnEnv,
    meta: &SessionMeta,
    record: &TurnRecord,
    user_message: &StoredMessage,
    answer: &str,
) -> ExtractJob {
    let write = env
        .config
        .agents
        .get(meta.active_agent())
        .and_then(|a| a.memory.writes().map(str::to_string));
    ExtractJob {
        write: write.is_some(),
        namespace: write.unwrap_or_else(|| crate::protocol::DEFAULT_NAMESPACE.into()),
        agent: meta.agent.clone(),
        session: meta.session.clone(),
        user: meta.user.clone(),
        turn_id: record.turn_id.clone(),
        message_id: record.message_id.clone(),
        source_time: user_message.ts,
        transcript: vec![
            (*user_message.message).clone(),
            ChatMessage::assistant(answer.to_string()),
        ],
    }
}

/// `job` as the `hermes.memory.extract` envelope the queue would carry.
fn encode_job(
    env: &TurnEnv,
    meta: &SessionMeta,
    record: &TurnRecord,
    job: ExtractJob,
) -> Result<Bytes, crate::protocol::envelope::EnvelopeError> {
    let scope = scope_of(env, meta, &record.trace_id);
    Envelope::event(job)
        .for_session(&scope.agent, &scope.session, scope.user.as_deref())
        .in_trace(&scope.trace_id)
        .encode()
}
