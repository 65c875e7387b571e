//! On NATS the session log is also the memory-extraction queue: an answered turn's append
//! carries its job (`LogRecord::extract`), and the memory-extractors share one durable consumer
//! of the log (`Cluster::extraction_outbox`). Against a real nats-server: only the jobs come
//! out, each until it is acked; records appended before the consumer existed are not mined
//! again; a session process makes the consumer before its first append, so an extractor that
//! starts later misses nothing.

use std::time::Duration;

use bytes::Bytes;
use hermes::bus::{DurableConsumer, DurableMessage, DurableOptions};

use super::fixture::{Fixture, WAIT};

/// A session log record; the consumer reads nothing but its `extract`.
fn record(job: Option<&str>) -> Bytes {
    match job {
        Some(job) => format!(r#"{{"meta":{{}},"messages":[],"task":{{}},"extract":{job}}}"#),
        None => r#"{"meta":{},"messages":[],"task":{}}"#.to_string(),
    }
    .into()
}

const JOB_A: &str = r#"{"v":1,"kind":"memory.extract","body":{"turn_id":"a"}}"#;
const JOB_B: &str = r#"{"v":1,"kind":"memory.extract","body":{"turn_id":"b"}}"#;

fn quick() -> DurableOptions {
    DurableOptions {
        ack_wait: Duration::from_secs(1),
        max_deliver: 5,
        batch: 1,
    }
}

async fn next(jobs: &mut DurableConsumer) -> DurableMessage {
    tokio::time::timeout(WAIT, jobs.next())
        .await
        .expect("a job is delivered")
        .expect("the consumer runs")
        .expect("a delivery")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_the_extraction_outbox_delivers_the_jobs_records_carry_until_each_is_acked() {
    let fx = Fixture::nats().await;
    let cluster = fx.bus.cluster().expect("NATS has a cluster");
    let log = cluster.session_log();
    let old = log
        .append("assistant", "s1", record(Some(JOB_B)), 0)
        .await
        .unwrap();
    let mut jobs = cluster.extraction_outbox(quick()).await.unwrap();
    let plain = log
        .append("assistant", "s1", record(None), old)
        .await
        .unwrap();
    let appended = std::time::Instant::now();
    log.append("assistant", "s1", record(Some(JOB_A)), plain)
        .await
        .unwrap();
    log.append("assistant", "s2", record(None), 0)
        .await
        .unwrap();
    log.append("assistant", "s3", record(Some(JOB_B)), 0)
        .await
        .unwrap();

    let a = next(&mut jobs).await;
    assert_eq!(a.payload, JOB_A.as_bytes(), "the job alone, verbatim");
    assert_eq!(a.delivery, 1);
    assert!(
        appended.elapsed() >= Duration::from_millis(200),
        "handed over only once the answer it follows has left (SETTLE, 250 ms): {:?}",
        appended.elapsed()
    );
    let b = next(&mut jobs).await;
    assert_eq!(b.payload, JOB_B.as_bytes());
    b.ack().await.unwrap();
    let again = next(&mut jobs).await;
    assert_eq!(
        (again.payload.as_ref(), again.delivery),
        (JOB_A.as_bytes(), 2),
        "unacked, it comes back after ack_wait"
    );
    again.ack().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(3), jobs.next())
            .await
            .is_err(),
        "nothing else: not the records without a job, nor the job appended before the \
         consumer existed, nor an acked one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_a_job_appended_before_any_extractor_started_is_delivered_to_the_first() {
    let fx = Fixture::nats().await;
    let cluster = fx.bus.cluster().expect("NATS has a cluster");
    // A session process starts: it makes the consumer before it appends anything.
    let _items = cluster.own_partitions().await.unwrap();
    let log = cluster.session_log();
    log.append("assistant", "s1", record(Some(JOB_A)), 0)
        .await
        .unwrap();
    let mut jobs = cluster.extraction_outbox(quick()).await.unwrap();
    let a = next(&mut jobs).await;
    assert_eq!(a.payload, JOB_A.as_bytes());
    a.ack().await.unwrap();
}
