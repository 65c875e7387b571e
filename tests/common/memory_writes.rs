//! A stand-in for the memory-extractor's direct write path (`hermes.memory.write` /
//! `.forget`, another issue's work): the same sled trees through the real [`MemoryStore`], so
//! the engine's own recall and `hermes.memory.list` see what it writes. Serves in queue
//! `memory` like the real handlers.

use hermes::bus::messages::{
    kinds, MemoryChange, MemoryForgetRequest, MemoryWriteReply, MemoryWriteRequest,
};
use hermes::bus::{subjects, SharedBus};
use hermes::envelope::Envelope;
use hermes::memory::{AppliedUpdate, MemoryStore, Source};

fn change(applied: &AppliedUpdate) -> MemoryChange {
    MemoryChange {
        op: applied.op.as_str().to_owned(),
        key: applied
            .record
            .as_ref()
            .map(|r| r.key.clone())
            .unwrap_or_default(),
        content: applied
            .record
            .as_ref()
            .map(|r| r.content.clone())
            .unwrap_or_default(),
    }
}

/// Serve writes and forgets on `bus` into `store` until the bus closes.
pub async fn serve(bus: SharedBus, store: MemoryStore) {
    let mut writes = bus
        .queue_subscribe(subjects::MEMORY_WRITE, subjects::groups::MEMORY)
        .await
        .unwrap();
    let mut forgets = bus
        .queue_subscribe(subjects::MEMORY_FORGET, subjects::groups::MEMORY)
        .await
        .unwrap();
    let (write_bus, write_store) = (bus.clone(), store.clone());
    tokio::spawn(async move {
        while let Some(msg) = writes.next().await {
            let request = Envelope::decode_as::<MemoryWriteRequest>(
                &msg.payload,
                1 << 20,
                kinds::MEMORY_WRITE,
            )
            .unwrap();
            let body = request.body;
            let source = Source {
                session: body.source.clone(),
                message_id: request.id.clone(),
                source_time: chrono::Utc::now(),
            };
            let applied = write_store
                .apply(&body.user, &body.namespace, &[body.update], &source)
                .await
                .unwrap();
            let reply = MemoryWriteReply {
                changes: applied.iter().map(change).collect(),
            };
            let payload = Envelope::new(kinds::MEMORY_WRITTEN, reply)
                .encode()
                .unwrap();
            write_bus
                .publish(msg.reply.as_deref().unwrap(), payload)
                .await
                .unwrap();
        }
    });
    tokio::spawn(async move {
        while let Some(msg) = forgets.next().await {
            let request = Envelope::decode_as::<MemoryForgetRequest>(
                &msg.payload,
                1 << 20,
                kinds::MEMORY_FORGET,
            )
            .unwrap();
            let body = request.body;
            let records = store.list(&body.user).unwrap();
            let target = records.iter().find(|r| {
                body.id.as_ref() == Some(&r.id)
                    || (body.key.as_ref() == Some(&r.key) && r.namespace == body.namespace)
            });
            let mut changes = Vec::new();
            if let Some(record) = target {
                if store.forget(&body.user, &record.id).await.unwrap() {
                    changes.push(MemoryChange {
                        op: "deleted".into(),
                        key: record.key.clone(),
                        content: record.content.clone(),
                    });
                }
            }
            let payload = Envelope::new(kinds::MEMORY_WRITTEN, MemoryWriteReply { changes })
                .encode()
                .unwrap();
            bus.publish(msg.reply.as_deref().unwrap(), payload)
                .await
                .unwrap();
        }
    });
}
