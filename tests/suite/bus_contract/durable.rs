//! Contract cases for durable work queues: ack, redelivery, nak, progress, max_deliver,
//! shared consumers, and surviving a restart; plus use from a current-thread runtime.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use hermes::bus::{respond, DurableOptions};
use tokio::sync::mpsc;

use super::fixture::{assert_no_durable, collect, next_durable, short_ack, text, Fixture, WAIT};

// ---- durable queue -------------------------------------------------------------------------

pub async fn acked_durable_message_is_never_redelivered(fx: Fixture) {
    fx.bus
        .durable_publish("jobs.ack", "done-once".into())
        .await
        .unwrap();
    let mut consumer = fx
        .bus
        .durable_consume("jobs.ack", short_ack(500))
        .await
        .unwrap();
    let message = next_durable(&mut consumer).await;
    assert_eq!(text(&message.payload), "done-once");
    assert_eq!(message.delivery, 1);
    message.ack().await.unwrap();
    assert_no_durable(&mut consumer, Duration::from_millis(1500)).await;
}

pub async fn an_unconfirmed_ack_settles_the_message_as_well(fx: Fixture) {
    for text_ in ["first", "second"] {
        fx.bus
            .durable_publish("jobs.quiet_ack", text_.into())
            .await
            .unwrap();
    }
    let mut consumer = fx
        .bus
        .durable_consume("jobs.quiet_ack", short_ack(500))
        .await
        .unwrap();
    for want in ["first", "second"] {
        let message = next_durable(&mut consumer).await;
        assert_eq!(text(&message.payload), want);
        assert_eq!(message.delivery, 1);
        message.ack_unconfirmed().await.unwrap();
    }
    assert_no_durable(&mut consumer, Duration::from_millis(1500)).await;
}

pub async fn unacked_durable_message_is_redelivered_after_ack_wait(fx: Fixture) {
    fx.bus
        .durable_publish("jobs.unacked", "again".into())
        .await
        .unwrap();
    let mut consumer = fx
        .bus
        .durable_consume("jobs.unacked", short_ack(1000))
        .await
        .unwrap();
    let first = next_durable(&mut consumer).await;
    assert_eq!(first.delivery, 1);
    let delivered = Instant::now();
    let second = next_durable(&mut consumer).await;
    assert!(
        delivered.elapsed() >= Duration::from_millis(800),
        "redelivered before ack_wait"
    );
    assert_eq!(text(&second.payload), "again");
    assert_eq!(second.delivery, 2);
    second.ack().await.unwrap();
}

pub async fn in_progress_postpones_redelivery(fx: Fixture) {
    fx.bus
        .durable_publish("jobs.slow", "long".into())
        .await
        .unwrap();
    let mut consumer = fx
        .bus
        .durable_consume("jobs.slow", short_ack(1000))
        .await
        .unwrap();
    let message = next_durable(&mut consumer).await;
    let mut next = Box::pin(consumer.next());
    for _ in 0..3 {
        // 600 ms pauses: 1.8 s in total, longer than ack_wait, but never 1 s without progress.
        assert!(tokio::time::timeout(Duration::from_millis(600), &mut next)
            .await
            .is_err());
        message.in_progress().await.unwrap();
    }
    message.ack().await.unwrap();
    assert!(tokio::time::timeout(Duration::from_millis(1500), &mut next)
        .await
        .is_err());
}

/// Pulled several at a time, the later ones wait at the consumer while it works on the first;
/// where the backend knows how long ago each was stored (its `age`), a consumer that
/// progress-acks one that waited past half its ack_wait gets each exactly once.
pub async fn messages_pulled_in_a_batch_that_waited_are_kept_by_a_progress_ack(fx: Fixture) {
    let published = Instant::now();
    for text_ in ["one", "two", "three"] {
        fx.bus
            .durable_publish("jobs.batch", text_.into())
            .await
            .unwrap();
    }
    let options = DurableOptions {
        batch: 4,
        ..short_ack(2000)
    };
    let mut consumer = fx.bus.durable_consume("jobs.batch", options).await.unwrap();
    for want in ["one", "two", "three"] {
        let message = next_durable(&mut consumer).await;
        assert_eq!(
            (text(&message.payload).as_str(), message.delivery),
            (want, 1)
        );
        if let Some(age) = message.age {
            let since = published.elapsed();
            assert!(
                age + Duration::from_millis(100)
                    >= since.saturating_sub(Duration::from_millis(100)),
                "{want} stored {age:?} ago, published {since:?} ago"
            );
            // "three" waited 1.6 s of its 2 s: it would come again during its work.
            if age > Duration::from_millis(1000) {
                message.in_progress().await.unwrap();
            }
        }
        // Slow work: the next one waits 800 ms more at the consumer.
        tokio::time::sleep(Duration::from_millis(800)).await;
        message.ack().await.unwrap();
    }
    assert_no_durable(&mut consumer, Duration::from_millis(1500)).await;
}

pub async fn nak_redelivers_now_or_after_the_delay(fx: Fixture) {
    fx.bus
        .durable_publish("jobs.nak", "retry".into())
        .await
        .unwrap();
    let mut consumer = fx
        .bus
        .durable_consume("jobs.nak", short_ack(10_000))
        .await
        .unwrap();
    let first = next_durable(&mut consumer).await;
    first.nak(None).await.unwrap();
    let second = next_durable(&mut consumer).await;
    assert_eq!(
        (text(&second.payload).as_str(), second.delivery),
        ("retry", 2)
    );
    let delay = Duration::from_millis(500);
    second.nak(Some(delay)).await.unwrap();
    let nakked = Instant::now();
    let third = next_durable(&mut consumer).await;
    assert!(
        nakked.elapsed() >= Duration::from_millis(400),
        "redelivered before the nak delay"
    );
    assert_eq!(third.delivery, 3);
    third.ack().await.unwrap();
}

pub async fn message_is_not_delivered_more_than_max_deliver_times(fx: Fixture) {
    fx.bus
        .durable_publish("jobs.poison", "poison".into())
        .await
        .unwrap();
    fx.bus
        .durable_publish("jobs.poison", "fine".into())
        .await
        .unwrap();
    let options = DurableOptions {
        ack_wait: Duration::from_millis(500),
        max_deliver: 2,
        ..Default::default()
    };
    let mut consumer = fx
        .bus
        .durable_consume("jobs.poison", options)
        .await
        .unwrap();
    let mut poison_deliveries = Vec::new();
    let mut fine = 0;
    // Ends when nothing arrives for longer than ack_wait: nak every `poison`, ack `fine`.
    while let Ok(Some(item)) =
        tokio::time::timeout(Duration::from_millis(1500), consumer.next()).await
    {
        let message = item.unwrap();
        if text(&message.payload) == "poison" {
            poison_deliveries.push(message.delivery);
            message.nak(None).await.unwrap();
        } else {
            fine += 1;
            message.ack().await.unwrap();
        }
    }
    assert_eq!(poison_deliveries, [1, 2]);
    assert_eq!(
        fine, 1,
        "a poison message must not block the rest of the queue"
    );
}

pub async fn two_consumers_share_the_work(fx: Fixture) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    for member in 0..2 {
        let mut consumer = fx
            .bus
            .durable_consume("jobs.shared", short_ack(10_000))
            .await
            .unwrap();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = consumer.next().await {
                message.ack().await.unwrap();
                if tx.send((member, text(&message.payload))).is_err() {
                    break;
                }
            }
        });
    }
    for i in 0..20 {
        fx.bus
            .durable_publish("jobs.shared", format!("{i}").into())
            .await
            .unwrap();
    }
    let got = collect(&mut rx, 20).await;
    let distinct: HashSet<&String> = got.iter().map(|(_, p)| p).collect();
    assert_eq!(distinct.len(), 20, "a message was handled twice: {got:?}");
}

pub async fn messages_published_before_any_consumer_are_delivered_in_order(fx: Fixture) {
    for word in ["first", "second", "third"] {
        fx.bus
            .durable_publish("jobs.early", word.into())
            .await
            .unwrap();
    }
    let mut consumer = fx
        .bus
        .durable_consume("jobs.early", short_ack(10_000))
        .await
        .unwrap();
    for word in ["first", "second", "third"] {
        let message = next_durable(&mut consumer).await;
        assert_eq!(text(&message.payload), word);
        message.ack().await.unwrap();
    }
}

pub async fn unacked_messages_survive_a_restart_and_acked_ones_stay_gone(fx: Fixture) {
    for word in ["acked", "held", "waiting"] {
        fx.bus
            .durable_publish("jobs.restart", word.into())
            .await
            .unwrap();
    }
    let mut consumer = fx
        .bus
        .durable_consume("jobs.restart", short_ack(1000))
        .await
        .unwrap();
    let acked = next_durable(&mut consumer).await;
    assert_eq!(text(&acked.payload), "acked");
    acked.ack().await.unwrap();
    let held = next_durable(&mut consumer).await;
    assert_eq!(text(&held.payload), "held");
    // "Crash" while `held` is being handled; every handle must go for sled to be reopened.
    drop((acked, held, consumer));

    let fx = fx.restart().await;
    let mut consumer = fx
        .bus
        .durable_consume("jobs.restart", short_ack(1000))
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..2 {
        let message = next_durable(&mut consumer).await;
        got.push((text(&message.payload), message.delivery));
        message.ack().await.unwrap();
    }
    got.sort();
    // The delivery count survives an orderly restart on both backends.
    let expected = [("held".to_string(), 2), ("waiting".to_string(), 1)];
    assert_eq!(got, expected);
    assert_no_durable(&mut consumer, Duration::from_millis(1500)).await;
}

// ---- runtimes ------------------------------------------------------------------------------

/// Actix arbiters are current-thread runtimes: the bus must work from one (the NATS client
/// itself was connected on the test's multi-threaded runtime).
pub async fn every_method_works_from_a_current_thread_runtime(fx: Fixture) {
    let bus = fx.bus.clone();
    let worker = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut sub = bus.subscribe("ct.echo").await.unwrap();
            let responder_bus = bus.clone();
            tokio::spawn(async move {
                let message = sub.next().await.unwrap();
                respond(responder_bus.as_ref(), &message, "pong".into())
                    .await
                    .unwrap();
            });
            let reply = bus.request("ct.echo", "ping".into(), WAIT).await.unwrap();
            assert_eq!(text(&reply), "pong");
            bus.durable_publish("ct.jobs", "job".into()).await.unwrap();
            let mut consumer = bus
                .durable_consume("ct.jobs", short_ack(10_000))
                .await
                .unwrap();
            let message = next_durable(&mut consumer).await;
            assert_eq!(text(&message.payload), "job");
            message.ack().await.unwrap();
            bus.flush().await.unwrap();
        });
    });
    tokio::task::spawn_blocking(move || worker.join())
        .await
        .unwrap()
        .expect("bus calls from a current-thread runtime failed");
}
