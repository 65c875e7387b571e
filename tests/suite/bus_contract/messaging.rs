//! Contract cases for subjects, wildcards, queue groups, request/reply, limits and validation.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hermes::bus::{respond, BusError, DurableOptions, Message};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::TurnEvent;
use tokio::sync::mpsc;

use super::fixture::{collect, forward, recv, text, Fixture, WAIT};

// ---- publish / subscribe -------------------------------------------------------------------

pub async fn publish_reaches_exact_subscriber_only(fx: Fixture) {
    let mut sub = fx.bus.subscribe("t.exact").await.unwrap();
    fx.bus.publish("t.other", "no".into()).await.unwrap();
    fx.bus.publish("t.exact.deeper", "no".into()).await.unwrap();
    fx.bus.publish("t.exact", "yes".into()).await.unwrap();
    let message = recv(&mut sub).await;
    assert_eq!(message.subject, "t.exact");
    assert_eq!(text(&message.payload), "yes");
    assert_eq!(message.reply, None);
}

pub async fn a_body_published_as_a_value_reaches_value_and_byte_subscribers_alike(fx: Fixture) {
    let envelope = Envelope::event(TurnEvent::TurnStarted {
        turn_id: "t1".into(),
        message_id: "m1".into(),
    });
    let read = |m: &Message| -> Envelope<TurnEvent> {
        match m.local.as_ref() {
            Some(v) => v
                .as_any()
                .downcast_ref::<Envelope<TurnEvent>>()
                .unwrap()
                .clone(),
            None => Envelope::decode_event(&m.payload, usize::MAX).unwrap(),
        }
    };
    let mut values = fx.bus.subscribe_local("t.value").await.unwrap();
    let mut plain = fx.bus.subscribe("t.value").await.unwrap();
    fx.bus.flush().await.unwrap();
    fx.bus
        .publish_local("t.value", Arc::new(envelope.clone()))
        .await
        .unwrap();
    let (by_value, by_bytes) = (recv(&mut values).await, recv(&mut plain).await);
    assert_eq!(read(&by_value), envelope);
    assert_eq!(read(&by_bytes), envelope);
    assert!(by_bytes.local.is_none(), "a plain subscriber reads bytes");
    // In-process, a value subscriber takes the value itself.
    assert_eq!(
        by_value.local.is_some(),
        fx.bus.backend() == hermes::bus::BusBackend::Embedded
    );
}

pub async fn star_wildcard_matches_exactly_one_token(fx: Fixture) {
    let mut sub = fx.bus.subscribe("t.*.x").await.unwrap();
    for subject in ["t.a.x", "t.a.b.x", "t.x", "t.b.y", "t.b.x"] {
        fx.bus.publish(subject, subject.into()).await.unwrap();
    }
    assert_eq!(recv(&mut sub).await.subject, "t.a.x");
    assert_eq!(recv(&mut sub).await.subject, "t.b.x");
}

pub async fn gt_wildcard_matches_one_or_more_trailing_tokens(fx: Fixture) {
    let mut sub = fx.bus.subscribe("t.>").await.unwrap();
    for subject in ["t", "u.a", "t.a", "t.a.b.c"] {
        fx.bus.publish(subject, subject.into()).await.unwrap();
    }
    assert_eq!(recv(&mut sub).await.subject, "t.a");
    assert_eq!(recv(&mut sub).await.subject, "t.a.b.c");
}

pub async fn queue_group_delivers_each_message_to_one_member(fx: Fixture) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    for member in 0..3 {
        let sub = fx
            .bus
            .queue_subscribe("work.items", "workers")
            .await
            .unwrap();
        forward(sub, member, tx.clone());
    }
    for i in 0..90 {
        fx.bus
            .publish("work.items", format!("{i}").into())
            .await
            .unwrap();
    }
    fx.bus.flush().await.unwrap();
    let got = collect(&mut rx, 90).await;
    let distinct: HashSet<&String> = got.iter().map(|(_, p)| p).collect();
    assert_eq!(distinct.len(), 90, "a message was delivered twice");
    for member in 0..3 {
        assert!(
            got.iter().any(|(m, _)| *m == member),
            "member {member} got no message out of 90"
        );
    }
}

pub async fn plain_subscriber_and_queue_group_both_receive(fx: Fixture) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    forward(fx.bus.subscribe("mix.>").await.unwrap(), 0, tx.clone());
    for member in 1..=2 {
        let sub = fx.bus.queue_subscribe("mix.*", "g").await.unwrap();
        forward(sub, member, tx.clone());
    }
    for i in 0..10 {
        fx.bus
            .publish("mix.a", format!("{i}").into())
            .await
            .unwrap();
    }
    let got = collect(&mut rx, 20).await;
    let plain = got.iter().filter(|(m, _)| *m == 0).count();
    assert_eq!(plain, 10, "the plain subscriber gets every message");
    let group: HashSet<&String> = got
        .iter()
        .filter(|(m, _)| *m != 0)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(group.len(), 10, "the group gets every message exactly once");
}

// ---- request / reply -----------------------------------------------------------------------

pub async fn request_gets_the_responders_reply(fx: Fixture) {
    let mut sub = fx.bus.queue_subscribe("svc.echo", "svc").await.unwrap();
    let bus = fx.bus.clone();
    tokio::spawn(async move {
        while let Some(message) = sub.next().await {
            let reply = format!("echo:{}", text(&message.payload));
            respond(bus.as_ref(), &message, reply.into()).await.unwrap();
        }
    });
    for word in ["one", "two"] {
        let reply = fx.bus.request("svc.echo", word.into(), WAIT).await.unwrap();
        assert_eq!(text(&reply), format!("echo:{word}"));
    }
}

pub async fn request_without_responder_fails_with_no_responders(fx: Fixture) {
    let started = Instant::now();
    let err = fx
        .bus
        .request("svc.nobody", "x".into(), WAIT)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BusError::NoResponders { subject } if subject == "svc.nobody"),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "NoResponders must not wait for the timeout"
    );
}

pub async fn request_to_silent_responder_times_out(fx: Fixture) {
    let _silent = fx.bus.subscribe("svc.silent").await.unwrap();
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let err = fx
        .bus
        .request("svc.silent", "x".into(), timeout)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BusError::Timeout { after, .. } if *after == timeout),
        "{err:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
}

// ---- limits and validation -----------------------------------------------------------------

pub async fn oversized_payload_is_rejected(fx: Fixture) {
    let max = fx.bus.max_payload();
    assert!(max >= 1024 * 1024);
    let big = Bytes::from(vec![b'x'; max + 1]);
    let too_large = |r: Result<(), BusError>| matches!(r, Err(BusError::PayloadTooLarge { size, .. }) if size == max + 1);
    assert!(too_large(fx.bus.publish("big.one", big.clone()).await));
    assert!(too_large(
        fx.bus.durable_publish("big.queue", big.clone()).await
    ));
    let request = fx.bus.request("big.req", big, WAIT).await;
    assert!(
        matches!(request, Err(BusError::PayloadTooLarge { .. })),
        "{request:?}"
    );
    // Exactly at the limit is fine.
    let mut sub = fx.bus.subscribe("big.ok").await.unwrap();
    fx.bus
        .publish("big.ok", vec![b'y'; max].into())
        .await
        .unwrap();
    assert_eq!(recv(&mut sub).await.payload.len(), max);
}

pub async fn invalid_subjects_are_rejected(fx: Fixture) {
    let invalid = |r: &Result<(), BusError>| matches!(r, Err(BusError::InvalidSubject { .. }));
    for subject in ["a.*", "a.>", "a..b", ".a", "a b", ""] {
        let published = fx.bus.publish(subject, "x".into()).await;
        assert!(invalid(&published), "publish `{subject}`: {published:?}");
    }
    for pattern in ["a.>.b", "a.b*", "a..b"] {
        let subscribed = fx.bus.subscribe(pattern).await.map(|_| ());
        assert!(
            invalid(&subscribed),
            "subscribe `{pattern}`: {subscribed:?}"
        );
    }
    let bad_group = fx.bus.queue_subscribe("a.b", "has space").await.map(|_| ());
    assert!(invalid(&bad_group), "{bad_group:?}");
    let request = fx.bus.request("a.*", "x".into(), WAIT).await.map(|_| ());
    assert!(invalid(&request), "{request:?}");
    assert!(invalid(&fx.bus.durable_publish("q.*", "x".into()).await));
    let consume = fx
        .bus
        .durable_consume("q.>", DurableOptions::default())
        .await
        .map(|_| ());
    assert!(invalid(&consume), "{consume:?}");
}
