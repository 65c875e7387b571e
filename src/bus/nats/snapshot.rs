//! [`Snapshots`] on a JetStream context: streams listed, read by sequence from their leader
//! (`STREAM.MSG.GET`, which works on work-queue streams too, where a second consumer would be
//! refused), deleted, created and appended to.

use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::stream::{Config, LastRawMessageErrorKind};
use async_nats::jetstream::Context;
use async_nats::HeaderMap;
use async_trait::async_trait;
use futures::StreamExt;

use super::cluster::LOG_STREAM;
use super::jetstream::{queue_config, stream_name};
use super::outbox::CONSUMER;
use crate::bus::snapshot::{ExtractionOutbox, Snapshots, StoredMessage, StreamSummary};
use crate::bus::BusError;
use crate::protocol::subjects::MEMORY_EXTRACT;

/// Headers a restore must not send again: expectations of the original append (they would
/// fail against the new stream) and the dedupe id (two equal ids stored further apart than
/// the dedupe window would be dropped as one).
fn replayable(name: &str) -> bool {
    !(name.starts_with("Nats-Expected") || name == "Nats-Msg-Id")
}

pub struct NatsSnapshots {
    jetstream: Context,
}

impl NatsSnapshots {
    pub fn new(jetstream: Context) -> Self {
        Self { jetstream }
    }
}

fn failed(what: &str, stream: &str, e: impl std::fmt::Display) -> BusError {
    BusError::Storage(format!(
        "{what} {stream}: {e}; does this NATS user have the JetStream API rights of the \
         stream (an operator's or the session service's), and is JetStream enabled?"
    ))
}

#[async_trait]
impl Snapshots for NatsSnapshots {
    async fn streams(&self) -> Result<Vec<StreamSummary>, BusError> {
        let mut listed = self.jetstream.streams();
        let mut streams = Vec::new();
        while let Some(info) = listed.next().await {
            let info = info.map_err(|e| failed("cannot list the streams of", "the account", e))?;
            let config = serde_json::to_value(&info.config)
                .map_err(|e| failed("cannot encode the configuration of", &info.config.name, e))?;
            streams.push(StreamSummary {
                name: info.config.name.clone(),
                config,
                first_seq: info.state.first_sequence,
                last_seq: info.state.last_sequence,
                messages: info.state.messages,
            });
        }
        Ok(streams)
    }

    async fn message(&self, stream: &str, seq: u64) -> Result<Option<StoredMessage>, BusError> {
        let handle = self
            .jetstream
            .get_stream(stream)
            .await
            .map_err(|e| failed("cannot open stream", stream, e))?;
        match handle.get_raw_message(seq).await {
            Ok(message) => Ok(Some(StoredMessage {
                subject: message.subject.to_string(),
                headers: message
                    .headers
                    .iter()
                    .flat_map(|(name, values)| {
                        values
                            .iter()
                            .map(move |v| (name.to_string(), v.as_str().to_string()))
                    })
                    .collect(),
                payload: message.payload,
            })),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(failed(&format!("cannot read message {seq} of"), stream, e)),
        }
    }

    async fn recreate(&self, stream: &str, config: &serde_json::Value) -> Result<(), BusError> {
        let config: Config = serde_json::from_value(config.clone())
            .map_err(|e| failed("the backup holds an unreadable configuration of", stream, e))?;
        if self.jetstream.get_stream(stream).await.is_ok() {
            self.jetstream
                .delete_stream(stream)
                .await
                .map_err(|e| failed("cannot delete stream", stream, e))?;
        }
        self.jetstream
            .create_stream(config)
            .await
            .map_err(|e| failed("cannot create stream", stream, e))?;
        Ok(())
    }

    async fn append(&self, message: StoredMessage) -> Result<(), BusError> {
        let mut headers = HeaderMap::new();
        for (name, value) in message.headers.iter().filter(|(n, _)| replayable(n)) {
            headers.append(name.as_str(), value.as_str());
        }
        let subject = message.subject;
        let ack = self
            .jetstream
            .publish_with_headers(subject.clone(), headers, message.payload)
            .await
            .map_err(|e| failed("cannot store a message on", &subject, e))?;
        ack.await
            .map_err(|e| failed("no acknowledgement for a message on", &subject, e))?;
        Ok(())
    }

    async fn extraction_outbox(&self) -> Result<Option<ExtractionOutbox>, BusError> {
        let log = self.jetstream.get_stream_no_info(LOG_STREAM);
        let log = log
            .await
            .map_err(|e| failed("cannot open stream", LOG_STREAM, e))?;
        let info = match log.consumer_info(CONSUMER).await {
            Ok(info) => info,
            Err(e)
                if matches!(
                    e.kind(),
                    ConsumerInfoErrorKind::NotFound | ConsumerInfoErrorKind::StreamNotFound
                ) =>
            {
                return Ok(None)
            }
            Err(e) => {
                let what = format!("cannot read consumer `{CONSUMER}` of");
                return Err(failed(&what, LOG_STREAM, e));
            }
        };
        let queue_config = serde_json::to_value(queue_config(MEMORY_EXTRACT, 1))
            .map_err(|e| failed("cannot encode the configuration of", MEMORY_EXTRACT, e))?;
        Ok(Some(ExtractionOutbox {
            log_stream: LOG_STREAM.to_string(),
            done_through: info.ack_floor.stream_sequence,
            queue_stream: stream_name(MEMORY_EXTRACT),
            queue_subject: MEMORY_EXTRACT.to_string(),
            queue_config,
        }))
    }
}
