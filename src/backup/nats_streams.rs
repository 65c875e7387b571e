//! A NATS deployment's JetStream state into a backup and back: every stream Hermes owns
//! ([`super::owned_stream`]: its logs, queues and audit trail, and the streams behind its
//! key-value buckets), configuration and messages, in sequence order.
//!
//! Restoring recreates each stream with its configuration and appends its messages in order;
//! durable consumers are not kept — Hermes creates its own at start, and work-queue streams
//! hold only what was not yet done, which is then done. Restore before the deployment starts.

use std::path::Path;

use super::archive::{ArchiveReader, ArchiveWriter, Frame};
use super::{owned_stream, BackupError, BusKind, Manifest, Progress};
use crate::bus::snapshot::{Snapshots, StoredMessage};

/// Write every stream Hermes owns to `out`; `source` names the deployment in the manifest.
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
    progress.start(
        "JetStream messages",
        Some(streams.iter().map(|s| s.messages).sum()),
    );
    let mut writer = ArchiveWriter::create(out)?;
    let mut manifest = Manifest::new(BusKind::Nats, source.to_string());
    for stream in streams {
        writer.frame(&Frame::Stream {
            name: stream.name.clone(),
            config: stream.config.clone(),
        })?;
        let mut count = 0u64;
        if stream.messages > 0 {
            for seq in stream.first_seq..=stream.last_seq {
                let Some(message) = snapshots.message(&stream.name, seq).await? else {
                    continue;
                };
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
        manifest.streams.insert(stream.name, count);
        manifest.records += count;
    }
    writer.finish(manifest)
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
