//! A turn's answer outlives the NATS node it left on: core NATS drops a message a stopping
//! server had read but not yet routed, so the bus sends the answers of the last moments again
//! once its connection is back (same envelope id), and nothing else.

use std::time::Duration;

use serde_json::Value;

use hermes::bus::events::{publish, EventScope};
use hermes::protocol::TurnEvent;

use crate::common::nats_server::NatsCluster;

fn scope(session: &str) -> EventScope {
    EventScope {
        agent: "assistant".into(),
        session: session.into(),
        user: Some("u1".into()),
        trace_id: "trace".into(),
        reader: "u1".into(),
    }
}

/// The envelope ids of `session`'s events seen on `hermes.out.>`, in order: those arriving
/// within `first`, and any more until no event has come for `quiet` (a late probe of the
/// route is not counted).
async fn ids_seen(
    subscription: &mut hermes::bus::Subscription,
    session: &str,
    first: Duration,
    quiet: Duration,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut wait = first;
    while let Ok(Some(message)) = tokio::time::timeout(wait, subscription.next()).await {
        let v: Value = serde_json::from_slice(&message.payload).unwrap();
        if v["session"] == session {
            ids.push(v["id"].as_str().unwrap_or_default().to_string());
        }
        wait = quiet;
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_sent_just_before_its_node_stops_is_sent_again_after_the_reconnect() {
    let mut cluster = NatsCluster::start();
    // The observer on a node that stays up; the publisher on the node that stops (it learns
    // the other nodes from the cluster and reconnects to one of them).
    let observer = hermes::bus::connect(&cluster.nodes[0].url(), None)
        .await
        .unwrap();
    let mut out = observer.subscribe("hermes.out.>").await.unwrap();
    observer.flush().await.unwrap();
    let publisher = hermes::bus::connect(&cluster.nodes[1].url(), None)
        .await
        .unwrap();
    // Wait until the route carries the observer's interest to the publisher's node.
    let mut ready = false;
    for _ in 0..100 {
        let probe = TurnEvent::Delta {
            turn_id: "probe".into(),
            text: "probe".into(),
        };
        publish(publisher.as_ref(), &scope("probe"), probe).await;
        if !ids_seen(
            &mut out,
            "probe",
            Duration::from_millis(100),
            Duration::from_millis(300),
        )
        .await
        .is_empty()
        {
            ready = true;
            break;
        }
    }
    assert!(ready, "the observer hears the publisher's node");

    let answer = TurnEvent::Answer {
        turn_id: "turn-1".into(),
        text: "done".into(),
    };
    publish(publisher.as_ref(), &scope("s1"), answer).await;
    let delta = TurnEvent::Delta {
        turn_id: "turn-1".into(),
        text: "partial".into(),
    };
    publish(publisher.as_ref(), &scope("s1"), delta).await;
    let first = ids_seen(
        &mut out,
        "s1",
        Duration::from_secs(5),
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(first.len(), 2, "both events arrive once: {first:?}");
    assert!(first.contains(&"answer-turn-1".to_string()), "{first:?}");

    cluster.nodes[1].stop();
    let again = ids_seen(
        &mut out,
        "s1",
        Duration::from_secs(15),
        Duration::from_secs(1),
    )
    .await;
    assert_eq!(
        again,
        vec!["answer-turn-1".to_string()],
        "the answer, and only the answer, comes again once the publisher has reconnected"
    );
}
