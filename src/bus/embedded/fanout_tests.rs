//! The fan-out table's tests.

use super::*;
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;

fn message(subject: &str) -> Message {
    Message {
        subject: subject.to_string(),
        reply: None,
        payload: Bytes::from_static(b"x"),
        traceparent: None,
        local: None,
    }
}

async fn publish(fanout: &Fanout, m: Message) -> usize {
    fanout.publish(m, |_, _| async {}).await
}

#[tokio::test]
async fn dropping_a_subscription_removes_it_from_the_table() {
    let fanout = Fanout::new();
    let sub = fanout.subscribe("a.b", None, 4);
    assert_eq!(fanout.lock().entries.len(), 1);
    drop(sub);
    assert_eq!(fanout.lock().entries.len(), 0);
    assert!(fanout.lock().exact.is_empty());
    assert_eq!(publish(&fanout, message("a.b")).await, 0);
}

/// A value that counts how often it was encoded.
#[derive(Debug, Default)]
struct Counted(std::sync::atomic::AtomicUsize);

impl crate::bus::local::LocalValue for Counted {
    fn encode(&self) -> Result<Bytes, String> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Bytes::from_static(b"encoded"))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn value_message(subject: &str, value: &Arc<Counted>) -> Message {
    let mut m = Message::new(subject.to_string(), None, Bytes::new());
    m.local = Some(value.clone());
    m
}

#[tokio::test]
async fn a_value_is_encoded_once_and_only_when_a_listener_reads_bytes() {
    let fanout = Fanout::new();
    let value = Arc::new(Counted::default());
    let mut first = fanout.subscribe_values("v", 8);
    let mut second = fanout.subscribe_values("v", 8);
    assert_eq!(publish(&fanout, value_message("v", &value)).await, 2);
    assert_eq!(value.0.load(std::sync::atomic::Ordering::SeqCst), 0);
    for sub in [&mut first, &mut second] {
        let got = sub.rx.try_recv().unwrap();
        assert!(got.payload.is_empty());
        assert!(got
            .local
            .unwrap()
            .as_any()
            .downcast_ref::<Counted>()
            .is_some());
    }

    let mut bytes = fanout.subscribe("v", None, 8);
    assert_eq!(publish(&fanout, value_message("v", &value)).await, 3);
    assert_eq!(value.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    let plain = bytes.rx.try_recv().unwrap();
    assert_eq!(plain.payload, Bytes::from_static(b"encoded"));
    assert!(plain.local.is_none(), "a byte reader gets no value");
    assert!(first.rx.try_recv().unwrap().local.is_some());
}

#[tokio::test]
async fn queue_group_members_take_turns() {
    let fanout = Fanout::new();
    let mut a = fanout.subscribe("q", Some("g"), 16);
    let mut b = fanout.subscribe("q", Some("g"), 16);
    for _ in 0..4 {
        assert_eq!(publish(&fanout, message("q")).await, 1);
    }
    let mut counts = [0, 0];
    while a.rx.try_recv().is_ok() {
        counts[0] += 1;
    }
    while b.rx.try_recv().is_ok() {
        counts[1] += 1;
    }
    assert_eq!(counts, [2, 2]);
}

#[tokio::test]
async fn full_group_member_is_skipped_for_one_with_room() {
    let fanout = Fanout::new();
    let mut a = fanout.subscribe("q", Some("g"), 1);
    let mut b = fanout.subscribe("q", Some("g"), 8);
    for _ in 0..5 {
        publish(&fanout, message("q")).await;
    }
    let mut got = 0;
    while a.rx.try_recv().is_ok() {
        got += 1;
    }
    while b.rx.try_recv().is_ok() {
        got += 1;
    }
    assert_eq!(got, 5);
}

#[tokio::test]
async fn stuck_subscriber_does_not_block_the_publisher_forever() {
    let wait = Duration::from_millis(50);
    let fanout = Fanout::with_slow_wait(wait);
    let mut stuck = fanout.subscribe("s", None, 1);
    assert_eq!(publish(&fanout, message("s")).await, 1);
    // The buffer is full now; the next publish waits `wait`, then drops the message.
    let published = tokio::time::timeout(wait * 20, publish(&fanout, message("s"))).await;
    assert_eq!(published.ok(), Some(1));
    assert!(stuck.rx.try_recv().is_ok());
    assert!(
        stuck.rx.try_recv().is_err(),
        "the second message was dropped"
    );
}

struct Echo;

#[async_trait]
impl Handler for Echo {
    async fn handle(&self, message: Message) -> Option<Bytes> {
        Some(message.payload)
    }
}

#[tokio::test]
async fn a_handler_is_called_in_the_publishers_task_and_its_reply_routed() {
    let fanout = Fanout::new();
    let _guard = fanout.serve("svc.*", Some("g"), Arc::new(Echo));
    let replies = std::sync::Mutex::new(Vec::new());
    let mut m = message("svc.echo");
    m.reply = Some("_INBOX.1".into());
    let n = fanout
        .publish(m, |to, bytes| {
            replies.lock().unwrap().push((to, bytes));
            async {}
        })
        .await;
    assert_eq!(n, 1);
    assert_eq!(
        replies.lock().unwrap().as_slice(),
        &[("_INBOX.1".to_string(), Bytes::from_static(b"x"))]
    );
}

#[tokio::test]
async fn listeners_that_come_or_go_after_a_subject_was_published_on_are_seen_at_once() {
    let fanout = Fanout::new();
    let exact = fanout.subscribe("hermes.out.a.s1", None, 16);
    assert_eq!(publish(&fanout, message("hermes.out.a.s1")).await, 1);
    // Remembered for the subject now; a new listener, exact or wildcard, still gets the next.
    let mut wild = fanout.subscribe("hermes.out.a.*", None, 16);
    let mut tail = fanout.subscribe("hermes.>", None, 16);
    assert_eq!(publish(&fanout, message("hermes.out.a.s1")).await, 3);
    assert_eq!(wild.next().await.unwrap().subject, "hermes.out.a.s1");
    assert_eq!(tail.next().await.unwrap().subject, "hermes.out.a.s1");
    drop(exact);
    assert_eq!(publish(&fanout, message("hermes.out.a.s1")).await, 2);
    drop(wild);
    drop(tail);
    assert_eq!(publish(&fanout, message("hermes.out.a.s1")).await, 0);
}

#[tokio::test]
async fn more_subjects_than_are_remembered_are_all_delivered() {
    let fanout = Fanout::new();
    let _all = fanout.subscribe("hermes.out.>", None, 16);
    let _one = fanout.subscribe("hermes.out.a.s7", None, 16);
    for round in 0..2 {
        for i in 0..REMEMBERED_SUBJECTS + 10 {
            let subject = format!("hermes.out.a.s{i}");
            let want = if i == 7 { 2 } else { 1 };
            let got = fanout.targets(&subject).len();
            assert_eq!(got, want, "round {round}, subject {subject}");
        }
    }
    assert!(fanout.lock().remembered.len() <= REMEMBERED_SUBJECTS);
}
