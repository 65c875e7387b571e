//! Async jobs on a cluster: run from the durable queue `hermes.jobqueue`, so that a job
//! outlives the tool-executor copy that accepted it.
//!
//! A submission is recorded in the shared bucket and its id queued; whichever copy pulls the
//! id runs the job, telling JetStream every third of `ack_wait` that it still works on it,
//! and acknowledges the id once the final state is recorded and announced. When a copy dies,
//! its unacknowledged ids are delivered to another copy after `ack_wait`, which reads the
//! record and carries on: it runs the job again when that is safe (`read`, `idempotent`, or a
//! `write` whose work never started) and otherwise ends it as failed with the reason, so the
//! waiting turn always hears an outcome. A final record delivered again (the copy died
//! between recording and acknowledging) is announced again, so the turn wakes.

use std::time::Duration;

use bytes::Bytes;
use tracing::Instrument;

use super::jobs;
use super::run::ExecCore;
use crate::bus::{BusError, DurableMessage, DurableOptions};
use crate::protocol::subjects;
use crate::tools::metrics::Counter;

/// How many times a job id is delivered before JetStream gives up on it (each delivery
/// after the first means a copy died while holding it).
const MAX_DELIVER: u64 = 10;

/// How many deliveries of a job id may find no record before the id is dropped.
const RECORD_LOOKUPS: u64 = 3;

/// Queue `job_id` for whichever copy pulls it first.
pub async fn enqueue(core: &ExecCore, job_id: &str) -> Result<(), BusError> {
    core.bus
        .durable_publish(subjects::JOB_QUEUE, Bytes::from(job_id.to_string()))
        .await
}

/// After a start: the jobs this copy holds unfinished whose shared record the bucket lost
/// (the JetStream store wiped, or restored from an older backup) lost their queue items with
/// it. Each record is put back and its id queued again, so the job runs again when that is
/// safe, or ends failed with the reason, and its waiting turn hears either way.
pub async fn requeue_lost(core: &ExecCore) {
    let unfinished = match core.stores.jobs.unfinished() {
        Ok(list) => list,
        Err(e) => {
            tracing::error!(error = %e, "cannot read this copy's unfinished jobs; any whose queue item was lost is not queued again");
            return;
        }
    };
    for mut record in unfinished {
        record.requeued = true;
        let lost = match core.stores.jobs.restore_shared(&record).await {
            Ok(lost) => lost,
            Err(e) => {
                tracing::warn!(job = %record.job_id, error = %e, "cannot compare an unfinished job with the shared bucket");
                continue;
            }
        };
        if !lost {
            continue;
        }
        match enqueue(core, &record.job_id).await {
            Ok(()) => {
                tracing::warn!(job = %record.job_id, "unfinished job lost from the shared store; queued again")
            }
            Err(e) => {
                tracing::error!(job = %record.job_id, error = %e, "unfinished job lost from the shared store could not be queued again")
            }
        }
    }
}

/// Pull job ids and run each in its own task, until the bus closes.
pub async fn serve(core: ExecCore, ack_wait: Duration) {
    let options = DurableOptions {
        ack_wait,
        max_deliver: MAX_DELIVER,
        ..Default::default()
    };
    let mut consumer = match core.bus.durable_consume(subjects::JOB_QUEUE, options).await {
        Ok(consumer) => consumer,
        Err(e) => {
            tracing::error!(error = %e, "cannot consume the job queue: this copy runs no queued jobs; restart it once NATS is reachable");
            return;
        }
    };
    // Once the queue is consumed: ids queued before could go unread.
    let healing = core.clone();
    core.io.spawn(async move { requeue_lost(&healing).await });
    while let Some(next) = consumer.next().await {
        match next {
            Ok(message) => {
                let core = core.clone();
                // Continues the trace of the call that queued the job.
                let span = crate::telemetry::spans::process_message(
                    subjects::JOB_QUEUE,
                    message.traceparent.as_deref(),
                );
                core.io
                    .clone()
                    .spawn(run_queued(core, message, ack_wait).instrument(span));
            }
            Err(e) => tracing::warn!(error = %e, "job queue error"),
        }
    }
}

async fn run_queued(core: ExecCore, message: DurableMessage, ack_wait: Duration) {
    let job_id = String::from_utf8_lossy(&message.payload).to_string();
    let record = match core.stores.jobs.find(&job_id).await {
        Ok(Some(record)) => record,
        // The record is written before the id is queued; a stream leader elected a moment ago
        // may not show it yet, so the id is tried again before it is given up.
        Ok(None) if message.delivery < RECORD_LOOKUPS => {
            tracing::warn!(job = %job_id, delivery = message.delivery, "queued job's record not found yet; trying again shortly");
            let _ = message.nak(Some(Duration::from_secs(1))).await;
            return;
        }
        Ok(None) => {
            tracing::error!(job = %job_id, "queued job has no record; dropped");
            settle(&message, &job_id).await;
            return;
        }
        Err(e) => {
            tracing::warn!(job = %job_id, error = %e, "job record unreadable; trying again shortly");
            let _ = message.nak(Some(Duration::from_secs(1))).await;
            return;
        }
    };
    if message.delivery == 1 && record.attempts > 0 && !record.requeued && !record.status.is_final()
    {
        // A second copy of the id (its first publish was retried through a failover): the
        // copy that started the job holds the first.
        settle(&message, &job_id).await;
        return;
    }
    if record.status.is_final() {
        if message.delivery > 1 {
            jobs::publish(&core, &record).await;
        }
        settle(&message, &job_id).await;
        return;
    }
    let what_stopped = if record.requeued {
        "the job store was lost while the job was unfinished"
    } else if message.delivery > 1 {
        "the tool-executor running the job stopped"
    } else {
        "the job was queued"
    };
    match jobs::refusal(&core, &record, what_stopped) {
        Ok((tool, definition)) => {
            if (message.delivery > 1 || record.requeued) && record.attempts > 0 {
                core.metrics.bump(Counter::JobResumed);
                tracing::info!(job = %job_id, tool = %record.tool, delivery = message.delivery, "taking over a job whose executor stopped");
            }
            let work = jobs::run(core.clone(), tool, definition, record);
            tokio::pin!(work);
            let beat = (ack_wait / 3).max(Duration::from_millis(100));
            loop {
                tokio::select! {
                    () = &mut work => break,
                    () = tokio::time::sleep(beat) => {
                        if let Err(e) = message.in_progress().await {
                            tracing::warn!(job = %job_id, error = %e, "job heartbeat failed; another copy may take the job over");
                        }
                    }
                }
            }
        }
        Err(reason) => jobs::fail(&core, record, reason).await,
    }
    settle(&message, &job_id).await;
}

async fn settle(message: &DurableMessage, job_id: &str) {
    if let Err(e) = message.ack().await {
        tracing::warn!(job = %job_id, error = %e, "job not acknowledged; it will be delivered again and its final state announced again");
    }
}
