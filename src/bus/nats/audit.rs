//! [`AuditTrail`] on the JetStream stream `HERMES_AUDIT`, which captures every
//! `hermes.audit.>` subject: records are published with an acknowledgement (so they are
//! stored, replicated, when `record` returns) and still reach core subscribers of the subject;
//! the newest are read back by sequence, newest first.

use std::time::Duration;

use async_nats::jetstream::stream::{
    Config, LastRawMessageErrorKind, RetentionPolicy, StorageType,
};
use async_nats::jetstream::Context;
use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::OnceCell;

use super::jetstream::{through_failover, while_forming};
use crate::bus::cluster::AuditTrail;
use crate::bus::BusError;

const STREAM: &str = "HERMES_AUDIT";
const SUBJECTS: &str = "hermes.audit.>";
/// How long audit records are kept.
pub const RETENTION: Duration = Duration::from_secs(90 * 86_400);

pub struct NatsAuditTrail {
    jetstream: Context,
    replicas: usize,
    stream: OnceCell<async_nats::jetstream::stream::Stream>,
}

fn error(what: &str, err: impl std::fmt::Display) -> BusError {
    BusError::Storage(format!(
        "the shared MCP audit trail ({STREAM}): {what}: {err}; check that nats-server (with -js) \
         is reachable"
    ))
}

impl NatsAuditTrail {
    pub fn new(jetstream: &Context, replicas: usize) -> Self {
        Self {
            jetstream: jetstream.clone(),
            replicas,
            stream: OnceCell::new(),
        }
    }

    async fn stream(&self) -> Result<&async_nats::jetstream::stream::Stream, BusError> {
        self.stream
            .get_or_try_init(|| async {
                let config = Config {
                    name: STREAM.to_string(),
                    subjects: vec![SUBJECTS.to_string()],
                    retention: RetentionPolicy::Limits,
                    storage: StorageType::File,
                    num_replicas: self.replicas.max(1),
                    max_age: RETENTION,
                    // Reads go to the leader; kept as streams made by earlier versions have it.
                    allow_direct: true,
                    ..Default::default()
                };
                while_forming("creating the audit stream", || {
                    self.jetstream.get_or_create_stream(config.clone())
                })
                .await
                .map_err(|e| error("cannot create or open the stream", e))
            })
            .await
    }
}

#[async_trait]
impl AuditTrail for NatsAuditTrail {
    async fn open(&self) -> Result<(), BusError> {
        self.stream().await.map(|_| ())
    }

    async fn record(&self, subject: &str, payload: Bytes) -> Result<(), BusError> {
        self.stream().await?;
        through_failover("storing an audit record", || async {
            let ack = self
                .jetstream
                .publish(subject.to_string(), payload.clone())
                .await
                .map_err(|e| error("the record was refused", e))?;
            ack.await
                .map_err(|e| error("the record was not confirmed", e))?;
            Ok::<(), BusError>(())
        })
        .await
    }

    async fn latest(&self, limit: usize, subjects: &[String]) -> Result<Vec<Bytes>, BusError> {
        let stream = self.stream().await?;
        let info = through_failover("reading the audit stream", || stream.get_info())
            .await
            .map_err(|e| error("cannot read the stream's state", e))?;
        let (first, mut seq) = (info.state.first_sequence, info.state.last_sequence);
        let mut out = Vec::new();
        while out.len() < limit && seq >= first.max(1) {
            // From the stream's leader: a replica still catching up (a node just restarted)
            // would answer "not found" for a record written a moment ago.
            match through_failover("reading an audit record", || stream.get_raw_message(seq)).await
            {
                // The stream holds every audit kind; the caller reads some.
                Ok(message) if subjects.iter().any(|s| *s == *message.subject) => {
                    out.push(message.payload)
                }
                Ok(_) => {}
                // Expired or removed meanwhile.
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {}
                Err(e) => return Err(error("cannot read a record", e)),
            }
            seq -= 1;
        }
        Ok(out)
    }
}
