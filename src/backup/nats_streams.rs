//! A NATS deployment's JetStream state into a backup and back: every stream Hermes owns
//! ([`super::owned_stream`]: its logs, queues and audit trail, and the streams behind its
//! key-value buckets), configuration and messages, in sequence order.
//!
//! Restoring recreates each stream with its configuration and appends its messages in order;
//! durable consumers are not kept — Hermes creates its own at start, and work-queue streams
//! hold only what was not yet done, which is then done. The one consumer whose position is
//! state, the memory-extractors' on the session log, is written as what it had still to do:
//! messages of the extraction queue ([`backup`]). Restore before the deployment starts.

use std::path::Path;

use super::archive::{parent_of, ArchiveReader, ArchiveWriter, Frame};
use super::spill::JobSpill;
use super::{owned_stream, BackupError, BusKind, Manifest, Progress};
use crate::bus::snapshot::{ExtractionOutbox, Snapshots, StoredMessage, StreamSummary};
use crate::store::replica::carried_job;

/// Write every stream Hermes owns to `out`; `source` names the deployment in the manifest.
///
/// The memory-extractors' consumer of the session log is not kept, so the extraction jobs
/// that session-log records carry and that were not yet done are written as messages of the
/// extraction queue: a restore queues them, and the restored deployment does them. Until the
/// queue's turn comes they wait in a temporary file beside `out` ([`JobSpill`]).
pub async fn backup(
    snapshots: &dyn Snapshots,
    out: &Path,
    source: &str,
    progress: &dyn Progress,
) -> Result<Manifest, BackupError> {
    let streams: Vec<_> = snapshots
        .streams()
        .await?
        .into_iter()
        .filter(|s| owned_stream(&s.name))
        .collect();
    // Read before the log: the consumer's ack floor only rises, so a job done meanwhile is
    // at worst done once more after a restore, never left out.
    let outbox = snapshots.extraction_outbox().await?;
    let streams = outbox_order(streams, outbox.as_ref());
    progress.start(
        "JetStream messages",
        Some(streams.iter().map(|s| s.messages).sum()),
    );
    let mut writer = ArchiveWriter::create(out)?;
    let mut manifest = Manifest::new(BusKind::Nats, source.to_string());
    let mut jobs_to_do = JobSpill::new(&parent_of(out));
    for stream in streams {
        writer.frame(&Frame::Stream {
            name: stream.name.clone(),
            config: stream.config.clone(),
        })?;
        let carries_jobs = outbox.as_ref().filter(|o| o.log_stream == stream.name);
        let mut count = 0u64;
        if stream.messages > 0 {
            for seq in stream.first_seq..=stream.last_seq {
                let Some(message) = snapshots.message(&stream.name, seq).await? else {
                    continue;
                };
                if carries_jobs.is_some_and(|o| seq > o.done_through) {
                    // A record the consumer cannot read is skipped by it too.
                    if let Ok(Some(job)) = carried_job(&message.payload) {
                        jobs_to_do.push(job.get().as_bytes())?;
                    }
                }
                writer.frame(&Frame::StreamMessage {
                    stream: stream.name.clone(),
                    subject: message.subject,
                    headers: message.headers,
                    payload: message.payload.to_vec(),
                })?;
                count += 1;
                progress.advance(1);
            }
        }
        if let Some(o) = outbox.as_ref().filter(|o| o.queue_stream == stream.name) {
            for job in jobs_to_do.drain()? {
                writer.frame(&Frame::StreamMessage {
                    stream: stream.name.clone(),
                    subject: o.queue_subject.clone(),
                    headers: Vec::new(),
                    payload: job?,
                })?;
                count += 1;
            }
        }
        manifest.streams.insert(stream.name, count);
        manifest.records += count;
    }
    writer.finish(manifest)
}

/// `streams` with the session log first and the extraction queue last (added, empty, when
/// the deployment has none yet, with the log's replica count), so the jobs still to do that
/// the log carries are known when the queue's messages are written.
fn outbox_order(
    mut streams: Vec<StreamSummary>,
    outbox: Option<&ExtractionOutbox>,
) -> Vec<StreamSummary> {
    let Some(outbox) = outbox else {
        return streams;
    };
    if !streams.iter().any(|s| s.name == outbox.queue_stream) {
        let mut config = outbox.queue_config.clone();
        let replicas = streams
            .iter()
            .find(|s| s.name == outbox.log_stream)
            .and_then(|s| s.config.get("num_replicas").cloned());
        if let (Some(replicas), Some(fields)) = (replicas, config.as_object_mut()) {
            fields.insert("num_replicas".into(), replicas);
        }
        streams.push(StreamSummary {
            name: outbox.queue_stream.clone(),
            config,
            first_seq: 0,
            last_seq: 0,
            messages: 0,
        });
    }
    let rank = |s: &StreamSummary| {
        if s.name == outbox.log_stream {
            0
        } else if s.name == outbox.queue_stream {
            2
        } else {
            1
        }
    };
    streams.sort_by_key(rank);
    streams
}

/// Restore the backup at `path` into the JetStream account behind `snapshots`. Streams Hermes
/// owns that hold messages are refused unless `force`, which replaces them; the whole file is
/// verified before anything is written. `replicas` overrides each stream's replica count (a
/// 3-node cluster's backup restored onto one node, or the other way round).
pub async fn restore(
    snapshots: &dyn Snapshots,
    path: &Path,
    force: bool,
    replicas: Option<usize>,
    progress: &dyn Progress,
) -> Result<Manifest, BackupError> {
    let manifest = super::archive::read_manifest(path)?;
    if manifest.bus != BusKind::Nats {
        return Err(BackupError::WrongBus {
            backup: manifest.bus,
            target: BusKind::Nats,
            hint: "embedded --data-dir DIR (an empty directory)",
        });
    }
    let held: Vec<String> = snapshots
        .streams()
        .await?
        .into_iter()
        .filter(|s| owned_stream(&s.name) && s.messages > 0)
        .map(|s| format!("stream {}: {} messages", s.name, s.messages))
        .collect();
    if !held.is_empty() && !force {
        return Err(BackupError::NotEmpty {
            what: held.join(", "),
        });
    }
    progress.start("verifying", Some(manifest.records));
    let path_owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || ArchiveReader::verify(&path_owned))
        .await
        .map_err(|e| BackupError::Store(format!("the verifying task failed: {e}")))??;
    progress.start("restoring JetStream messages", Some(manifest.records));
    // The file is read in the blocking pool a batch at a time; the messages are sent here.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Frame, BackupError>>(256);
    let path_owned = path.to_path_buf();
    let reading = tokio::task::spawn_blocking(move || {
        let mut reader = match ArchiveReader::open(&path_owned) {
            Ok(reader) => reader,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => {
                    if tx.blocking_send(Ok(frame)).is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    while let Some(frame) = rx.recv().await {
        match frame? {
            Frame::Stream { name, mut config } => {
                if let (Some(n), Some(fields)) = (replicas, config.as_object_mut()) {
                    fields.insert("num_replicas".into(), n.max(1).into());
                }
                snapshots.recreate(&name, &config).await?
            }
            Frame::StreamMessage {
                subject,
                headers,
                payload,
                ..
            } => {
                snapshots
                    .append(StoredMessage {
                        subject,
                        headers,
                        payload: payload.into(),
                    })
                    .await?;
                progress.advance(1);
            }
            Frame::TreeEntry { .. } => {}
        }
    }
    reading
        .await
        .map_err(|e| BackupError::Store(format!("the reading task failed: {e}")))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stream(name: &str, replicas: u64) -> StreamSummary {
        StreamSummary {
            name: name.into(),
            config: json!({"name": name, "num_replicas": replicas}),
            first_seq: 1,
            last_seq: 3,
            messages: 3,
        }
    }

    fn outbox() -> ExtractionOutbox {
        ExtractionOutbox {
            log_stream: "LOG".into(),
            done_through: 0,
            queue_stream: "QUEUE".into(),
            queue_subject: "queue".into(),
            queue_config: json!({"name": "QUEUE", "num_replicas": 1}),
        }
    }

    fn names(streams: &[StreamSummary]) -> Vec<&str> {
        streams.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn the_session_log_is_written_first_and_the_extraction_queue_last() {
        let streams = vec![stream("QUEUE", 3), stream("A", 3), stream("LOG", 3)];
        let ordered = outbox_order(streams, Some(&outbox()));
        assert_eq!(names(&ordered), ["LOG", "A", "QUEUE"]);
        assert_eq!(ordered[2].messages, 3, "the queue's own messages are kept");
    }

    #[test]
    fn a_missing_extraction_queue_is_added_empty_with_the_logs_replica_count() {
        let ordered = outbox_order(vec![stream("A", 3), stream("LOG", 3)], Some(&outbox()));
        assert_eq!(names(&ordered), ["LOG", "A", "QUEUE"]);
        assert_eq!(ordered[2].messages, 0);
        assert_eq!(ordered[2].config["num_replicas"], 3);
    }

    #[test]
    fn without_an_extraction_consumer_the_streams_keep_their_order() {
        let ordered = outbox_order(vec![stream("QUEUE", 1), stream("LOG", 1)], None);
        assert_eq!(names(&ordered), ["QUEUE", "LOG"]);
    }
}
