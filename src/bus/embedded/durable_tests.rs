//! What an embedded durable queue stores per message, and how it counts deliveries across an
//! orderly close and a crash (a queue loaded again without [`Queues::close`]).

use std::time::Duration;

use super::*;
use crate::store::durability::Mode;

fn options(max_deliver: u64) -> DurableOptions {
    DurableOptions {
        ack_wait: Duration::from_secs(30),
        max_deliver,
        batch: 1,
    }
}

async fn next(consumer: &mut DurableConsumer) -> DurableMessage {
    tokio::time::timeout(Duration::from_secs(5), consumer.next())
        .await
        .expect("a message within 5 s")
        .expect("the stream goes on")
        .expect("a delivery, not an error")
}

fn text(message: &DurableMessage) -> String {
    String::from_utf8_lossy(&message.payload).to_string()
}

/// Take `n` messages off `queue` and ack each: their texts and delivery numbers, in order.
async fn ack_each(queue: &Arc<Queue>, n: usize) -> Vec<(String, u64)> {
    let mut consumer = queue.clone().consumer(options(5));
    let mut got = Vec::new();
    for _ in 0..n {
        let message = next(&mut consumer).await;
        got.push((text(&message), message.delivery));
        message.ack().await.unwrap();
    }
    got
}

#[tokio::test]
async fn a_message_acked_on_its_first_delivery_costs_two_writes_and_leaves_nothing() {
    let db = crate::store::tree::temporary(Mode::Sync).unwrap();
    let queue = Arc::new(Queue::load(&db, "jobs").unwrap());
    queue
        .publish(Bytes::from_static(b"one"), None)
        .await
        .unwrap();
    let mut consumer = queue.clone().consumer(options(5));
    let message = next(&mut consumer).await;
    assert_eq!(message.delivery, 1);
    assert!(
        queue.deliveries.is_empty(),
        "a first delivery writes no count"
    );
    message.ack().await.unwrap();
    assert!(queue.messages.is_empty());
    assert!(queue.deliveries.is_empty());
}

#[tokio::test]
async fn after_a_crash_every_queued_message_comes_back_as_a_redelivery() {
    let db = crate::store::tree::temporary(Mode::Sync).unwrap();
    {
        let queue = Arc::new(Queue::load(&db, "jobs").unwrap());
        for word in ["held", "waiting"] {
            queue.publish(Bytes::from(word), None).await.unwrap();
        }
        let mut consumer = queue.clone().consumer(options(5));
        let held = next(&mut consumer).await;
        assert_eq!((text(&held).as_str(), held.delivery), ("held", 1));
        // Crash: no close.
    }
    let queue = Arc::new(Queue::load(&db, "jobs").unwrap());
    let got = ack_each(&queue, 2).await;
    // `waiting` was never handed out, but nothing recorded that: it may have been.
    assert_eq!(got, [("held".into(), 2), ("waiting".into(), 2)]);
    assert!(queue.messages.is_empty());
    assert!(
        queue.deliveries.is_empty(),
        "the redeliveries' counts are removed"
    );
}

#[tokio::test]
async fn after_an_orderly_close_deliveries_are_counted_exactly() {
    let db = crate::store::tree::temporary(Mode::Sync).unwrap();
    {
        let queues = Queues::new(db.clone());
        let queue = queues.get("jobs").unwrap();
        for word in ["held", "waiting"] {
            queue.publish(Bytes::from(word), None).await.unwrap();
        }
        let mut consumer = queue.clone().consumer(options(5));
        let held = next(&mut consumer).await;
        assert_eq!(text(&held), "held");
        queues.close();
    }
    let queue = Arc::new(Queue::load(&db, "jobs").unwrap());
    assert_eq!(
        queue.deliveries.get(CLEAN_CLOSE).unwrap(),
        None,
        "the marker is used up"
    );
    let got = ack_each(&queue, 2).await;
    assert_eq!(got, [("held".into(), 2), ("waiting".into(), 1)]);
}

#[tokio::test]
async fn a_message_that_crashes_every_start_is_dropped_after_max_deliver() {
    let db = crate::store::tree::temporary(Mode::Sync).unwrap();
    let mut deliveries = Vec::new();
    for start in 0..5 {
        // Each start hands the message out once more, and the process dies handling it.
        let queue = Arc::new(Queue::load(&db, "jobs").unwrap());
        if start == 0 {
            queue
                .publish(Bytes::from_static(b"poison"), None)
                .await
                .unwrap();
        }
        let mut consumer = queue.clone().consumer(options(3));
        match tokio::time::timeout(Duration::from_millis(200), consumer.next()).await {
            Ok(Some(Ok(message))) => deliveries.push(message.delivery),
            Ok(other) => panic!("unexpected {:?}", other.map(|r| r.map(|m| m.delivery))),
            Err(_) => break,
        }
    }
    assert_eq!(deliveries, [1, 2, 3], "no more than max_deliver deliveries");
    let queue = Queue::load(&db, "jobs").unwrap();
    assert!(queue.messages.is_empty(), "dropped once exhausted");
    assert!(queue.deliveries.is_empty());
}

#[tokio::test]
async fn a_value_published_in_process_reaches_the_first_delivery_and_the_bytes_every_one() {
    use crate::protocol::envelope::Envelope;
    use crate::protocol::TurnEvent;
    let db = crate::store::tree::temporary(Mode::Sync).unwrap();
    let queue = Arc::new(Queue::load(&db, "jobs").unwrap());
    let envelope = Envelope::event(TurnEvent::TurnStarted {
        turn_id: "t".into(),
        message_id: "m".into(),
    });
    let bytes = envelope.encode().unwrap();
    queue
        .publish(bytes.clone(), Some(Arc::new(envelope.clone())))
        .await
        .unwrap();
    assert_eq!(queue.messages.len(), 1, "stored as ever");
    let mut consumer = queue.clone().consumer(options(5));
    let first = next(&mut consumer).await;
    let value = first
        .local
        .as_ref()
        .expect("the value on the first delivery");
    assert_eq!(
        value.as_any().downcast_ref::<Envelope<TurnEvent>>(),
        Some(&envelope)
    );
    assert_eq!(first.payload, bytes);
    first.nak(None).await.unwrap();
    let again = next(&mut consumer).await;
    assert_eq!((again.delivery, again.payload.clone()), (2, bytes));
    assert!(again.local.is_none(), "a redelivery reads the stored bytes");
    again.ack().await.unwrap();
    assert!(queue.messages.is_empty());
    let fresh = lock(&queue.fresh);
    assert!(fresh.messages.is_empty());
    assert_eq!(fresh.bytes, 0);
}

#[tokio::test]
async fn messages_nobody_takes_are_kept_in_memory_only_up_to_the_byte_budget() {
    let db = crate::store::tree::temporary(Mode::Batch(Duration::from_millis(5))).unwrap();
    let queue = Arc::new(Queue::load(&db, "jobs").unwrap());
    let big = Bytes::from(vec![b'x'; FRESH_BYTES / 3 + 1]);
    for _ in 0..4 {
        queue.publish(big.clone(), None).await.unwrap();
    }
    assert_eq!(queue.messages.len(), 4, "every message is stored");
    {
        let fresh = lock(&queue.fresh);
        assert_eq!(fresh.messages.len(), 2, "the budget holds two of them");
        assert_eq!(fresh.bytes, 2 * big.len());
    }
    // The ones over the budget are read from the tree.
    let got = ack_each(&queue, 4).await;
    assert!(got
        .iter()
        .all(|(text, delivery)| text.len() == big.len() && *delivery == 1));
    assert_eq!(lock(&queue.fresh).bytes, 0);
}
