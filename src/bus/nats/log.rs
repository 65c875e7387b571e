//! Logs of fenced appends on JetStream: one stream, a subject per `<a>.<b>` key. The session
//! log (`HERMES_SESSION_LOG`, `hermes.slog.<agent>.<session>`) and the memory log
//! (`HERMES_MEMORY_LOG`, `hermes.mlog.user.<hex user>`) are two of them. Appends carry
//! `Nats-Expected-Last-Subject-Sequence`, so a writer that has not seen the latest record is
//! refused ([`LogError::Fenced`]).
//!
//! Records are read from the stream's leader. A direct get is answered by any replica, and one
//! catching up after a restart answers with an older record or none: a new owner would load a
//! stale session and be fenced at its first append, again and again until that replica caught
//! up.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::stream::{
    Config, LastRawMessageErrorKind, RetentionPolicy, StorageType,
};
use async_nats::jetstream::Context;
use async_nats::HeaderMap;
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::OnceCell;

use super::jetstream::{through_failover, while_forming};
use crate::store::replica::{LogError, SessionLog};

/// A log of fenced appends on one stream, a subject per `<a>.<b>` key: the session log
/// (`HERMES_SESSION_LOG`) and the memory log (`HERMES_MEMORY_LOG`).
pub struct NatsSessionLog {
    jetstream: Context,
    replicas: usize,
    stream_name: &'static str,
    prefix: &'static str,
    /// Whether each append carries [`FINGERPRINT_HEADER`] (what a feed of the log reads
    /// instead of the record).
    fingerprinted: bool,
    stream: OnceCell<async_nats::jetstream::stream::Stream>,
}

/// The header an append to a fingerprinted log carries: the
/// [`crate::store::log_tails::fingerprint`] of its record, 16 hex digits.
pub(super) const FINGERPRINT_HEADER: &str = "Hermes-Fingerprint";

/// Longest wait for the next record while reading the last record of every key.
const SCAN_WAIT: Duration = Duration::from_secs(10);

fn unavailable(err: impl std::fmt::Display) -> LogError {
    LogError::Unavailable(err.to_string())
}

impl NatsSessionLog {
    pub(super) fn new(
        jetstream: &Context,
        replicas: usize,
        stream_name: &'static str,
        prefix: &'static str,
    ) -> Self {
        Self {
            jetstream: jetstream.clone(),
            replicas,
            stream_name,
            prefix,
            fingerprinted: false,
            stream: OnceCell::new(),
        }
    }

    /// The same log, each append carrying its record's fingerprint ([`FINGERPRINT_HEADER`]),
    /// so a feed of the log can deliver headers only.
    pub(super) fn fingerprinted(mut self) -> Self {
        self.fingerprinted = true;
        self
    }

    /// The subjects' first tokens (`hermes.mlog`).
    pub(super) fn prefix(&self) -> &'static str {
        self.prefix
    }

    pub(super) fn stream_name(&self) -> &'static str {
        self.stream_name
    }

    fn subject(&self, agent: &str, session: &str) -> String {
        format!("{}.{agent}.{session}", self.prefix)
    }

    /// The log's stream, created on first use.
    pub(super) async fn stream(&self) -> Result<&async_nats::jetstream::stream::Stream, LogError> {
        self.stream
            .get_or_try_init(|| async {
                let config = Config {
                    name: self.stream_name.to_string(),
                    subjects: vec![format!("{}.>", self.prefix)],
                    retention: RetentionPolicy::Limits,
                    storage: StorageType::File,
                    num_replicas: self.replicas.max(1),
                    // Reads go to the leader; kept as streams made by earlier versions have it.
                    allow_direct: true,
                    ..Default::default()
                };
                while_forming("creating a replicated log", || {
                    self.jetstream.get_or_create_stream(config.clone())
                })
                .await
                .map_err(unavailable)
            })
            .await
    }
}

#[async_trait]
impl SessionLog for NatsSessionLog {
    async fn append(
        &self,
        agent: &str,
        session: &str,
        record: Bytes,
        expected: u64,
    ) -> Result<u64, LogError> {
        self.stream().await?;
        let mut headers = HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            expected.to_string().as_str(),
        );
        if self.fingerprinted {
            let print = crate::store::log_tails::fingerprint(&record);
            headers.insert(FINGERPRINT_HEADER, format!("{print:016x}").as_str());
        }
        let fenced = || LogError::Fenced {
            agent: agent.to_string(),
            session: session.to_string(),
            expected,
        };
        let classify = |e: async_nats::jetstream::context::PublishError| {
            // A clustered stream answers a failed expected-sequence check with error code
            // 10164 ("wrong last sequence" without the sequence), which the client does not
            // map to `WrongLastSequence`.
            let wrong_sequence = e.kind() == PublishErrorKind::WrongLastSequence
                || e.to_string().contains("wrong last sequence");
            if wrong_sequence {
                fenced()
            } else {
                unavailable(e)
            }
        };
        let ack = self
            .jetstream
            .publish_with_headers(self.subject(agent, session), headers, record)
            .await
            .map_err(classify)?;
        Ok(ack.await.map_err(classify)?.sequence)
    }

    async fn last(&self, agent: &str, session: &str) -> Result<u64, LogError> {
        let stream = self.stream().await?;
        let subject = self.subject(agent, session);
        match through_failover("reading a session log", || {
            stream.get_last_raw_message_by_subject(&subject)
        })
        .await
        {
            Ok(message) => Ok(message.sequence),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(0),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn last_record(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<(u64, Bytes)>, LogError> {
        let stream = self.stream().await?;
        let subject = self.subject(agent, session);
        match through_failover("reading a session log", || {
            stream.get_last_raw_message_by_subject(&subject)
        })
        .await
        {
            Ok(message) => Ok(Some((message.sequence, message.payload))),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn read_after(
        &self,
        agent: &str,
        session: &str,
        after: u64,
    ) -> Result<Vec<(u64, Bytes)>, LogError> {
        let stream = self.stream().await?;
        let subject = self.subject(agent, session);
        let mut records = Vec::new();
        let mut from = after + 1;
        loop {
            match through_failover("reading a session log", || {
                stream
                    .raw_message_builder()
                    .sequence(from)
                    .next_by_subject(subject.clone())
                    .send()
            })
            .await
            {
                Ok(message) => {
                    from = message.sequence + 1;
                    records.push((message.sequence, message.payload));
                }
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                    return Ok(records)
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
    }

    /// One ordered consumer delivering the last message of each subject: a pass over the
    /// stream's keys, not a request per key.
    async fn last_of_each(&self, agent: Option<&str>) -> Result<Vec<(u64, Bytes)>, LogError> {
        let stream = self.stream().await?;
        let filter_subject = match agent {
            Some(agent) => format!("{}.{agent}.*", self.prefix),
            None => format!("{}.>", self.prefix),
        };
        let config = OrderedConfig {
            filter_subject,
            deliver_policy: DeliverPolicy::LastPerSubject,
            ..Default::default()
        };
        let consumer = through_failover("listing a replicated log", || {
            stream.create_consumer(config.clone())
        })
        .await
        .map_err(unavailable)?;
        let mut pending = consumer.cached_info().num_pending;
        // By subject: a record appended during the pass replaces the one seen before it.
        let mut last: HashMap<String, (u64, Bytes)> = HashMap::new();
        if pending == 0 {
            return Ok(Vec::new());
        }
        let mut messages = consumer.messages().await.map_err(unavailable)?;
        while pending > 0 {
            let message = match tokio::time::timeout(SCAN_WAIT, messages.next()).await {
                Ok(Some(Ok(message))) => message,
                Ok(Some(Err(e))) => return Err(unavailable(e)),
                Ok(None) => break,
                Err(_) => {
                    return Err(unavailable(format!(
                        "{} stopped delivering its keys ({pending} left after {} s)",
                        self.stream_name,
                        SCAN_WAIT.as_secs()
                    )))
                }
            };
            let info = message.info().map_err(unavailable)?;
            pending = info.pending;
            let seq = info.stream_sequence;
            let subject = message.subject.to_string();
            if last.get(&subject).is_none_or(|(seen, _)| *seen < seq) {
                last.insert(subject, (seq, message.payload.clone()));
            }
        }
        Ok(last.into_values().collect())
    }
}
