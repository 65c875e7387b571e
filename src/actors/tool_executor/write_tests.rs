//! `write` calls run once: a repeat gets the first execution's recorded outcome (across a
//! crash, while it still runs, after a timeout or an unknown outcome), a dead execution is
//! reported and not rerun, a failed one frees its key.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{json, Value};

use super::run::{execute, Caller};
use super::tests::{core_in, counting, counting_core_in, request, Counting, Hanging};
use crate::llm::ToolSpec;
use crate::protocol::{ToolCallResult, ToolStatus};
use crate::tools::definition::{ToolDefinition, ToolEffect, ToolMode, ToolRisk};
use crate::tools::{Tool, ToolError, ToolErrorCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_write_retried_after_a_crash_executes_once() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let args = json!({"order_id": "JD-20251111-0042", "amount": "30"});
    let first = {
        let c = counting_core_in(dir.path(), &calls, ToolEffect::Write).await;
        let first = execute(
            &c,
            request("call-1", "refund", args.clone()),
            Caller::default(),
        )
        .await;
        // The executor crashes here: the result is recorded, the reply never reaches the turn.
        first
    };
    assert_eq!(first.status, ToolStatus::Ok, "{first:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let c = counting_core_in(dir.path(), &calls, ToolEffect::Write).await;
    // The turn retries the same call (the model may even re-send the number as a string).
    let retry = execute(
        &c,
        request("call-2", "refund", args.clone()),
        Caller::default(),
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the write ran twice");
    assert_eq!(retry.via, "idempotent-replay");
    assert_eq!(retry.call_id, "call-2");
    assert_eq!(retry.output, first.output);
    assert_eq!(c.metrics.snapshot().idempotent_replays, 1);
    // Another turn is another key: it runs.
    let mut next_turn = request("call-3", "refund", args);
    next_turn.turn_id = Some("turn-2".into());
    let ran = execute(&c, next_turn, Caller::default()).await;
    assert_eq!(ran.via, "builtin");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

// A write that timed out may have taken effect (a lost reply looks the same): a repeat of the
// same call gets the timeout back and does not run the write a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_timed_out_is_not_run_again_by_a_repeat_of_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let hanging = Hanging {
        effect: ToolEffect::Write,
        calls: calls.clone(),
    };
    let c = core_in(dir.path(), vec![Arc::new(hanging)]).await;
    let first = execute(&c, request("h1", "hang", json!({})), Caller::default()).await;
    assert_eq!(
        first.error.as_ref().map(|e| e.code),
        Some(ToolErrorCode::Timeout)
    );
    let again = execute(&c, request("h1", "hang", json!({})), Caller::default()).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the write ran twice");
    assert_eq!(again.via, "idempotent-replay");
    let error = again.error.expect("the recorded timeout");
    assert_eq!(error.code, ToolErrorCode::Timeout);
    assert!(error.hint.unwrap_or_default().contains("do not retry"));
    // Another turn is another key: the user may ask again.
    let mut next_turn = request("h2", "hang", json!({}));
    next_turn.turn_id = Some("turn-2".into());
    execute(&c, next_turn, Caller::default()).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_executor_died_mid_call_is_reported_not_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = counting_core_in(dir.path(), &calls, ToolEffect::Write).await;
    let args = json!({"order_id": "JD-1", "amount": 30});
    let key = crate::tools::idempotency::idempotency_key("s1", "turn-1", "refund", &args);
    // A previous executor reserved the key, then died before recording an outcome.
    let far = tokio::time::Instant::now() + Duration::from_secs(60);
    let reserved = c.stores.idem.reserve(&key, far).await.unwrap();
    assert_eq!(reserved, crate::tools::idempotency::Reservation::Reserved);
    drop(c);
    let c = counting_core_in(dir.path(), &calls, ToolEffect::Write).await;

    let started = std::time::Instant::now();
    let retry = execute(&c, request("call-2", "refund", args), Caller::default()).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the write ran again");
    assert_eq!(retry.status, ToolStatus::Error);
    let error = retry.error.expect("an error saying why");
    assert_eq!(error.code, ToolErrorCode::Unavailable);
    assert!(error.message.contains("never"), "{}", error.message);
    assert!(error.hint.unwrap_or_default().contains("check"));
    assert_eq!(c.metrics.snapshot().idempotent_unfinished, 1);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a reservation left by a dead executor is reported at once, not waited for"
    );
}

// On NATS a call whose reply was lost is sent again, and the copy can arrive while the first
// execution is still running: it must get that execution's result, not "outcome unknown".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_sent_again_while_it_runs_gets_the_first_executions_result() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = core_in(
        dir.path(),
        vec![Arc::new(Counting {
            calls: calls.clone(),
            effect: ToolEffect::Write,
            risk: ToolRisk::Low,
            mode: ToolMode::Sync,
            delay: Duration::from_millis(300),
        })],
    )
    .await;
    let args = json!({"order_id": "JD-7", "amount": 12});
    let first = tokio::spawn({
        let (c, args) = (c.clone(), args.clone());
        async move { execute(&c, request("call-1", "refund", args), Caller::default()).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let again = execute(&c, request("call-1", "refund", args), Caller::default()).await;
    let first = first.await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the write ran twice");
    assert_eq!(first.status, ToolStatus::Ok, "{first:?}");
    assert_eq!(again.status, ToolStatus::Ok, "{again:?}");
    assert_eq!(again.via, "idempotent-replay");
    assert_eq!(again.output, first.output);
    assert_eq!(c.metrics.snapshot().idempotent_unfinished, 0);
}

#[test]
fn an_earlier_execution_is_waited_for_only_while_it_can_still_settle() {
    let def = counting(&Arc::default(), ToolEffect::Write, ToolRisk::Low).definition();
    let now = Utc::now();
    let timeout = def.timeout();
    let settled_by = timeout + crate::protocol::tool::WRITE_SETTLE_GRACE;
    let caller_waits = crate::protocol::tool::repeated_write_wait(
        timeout + crate::protocol::tool::TOOL_REPLY_MARGIN,
    );
    // Just started: wait as long as it may take to run and record its outcome through a
    // failover, which ends before the caller of this copy gives up.
    let patience = super::run::holder_patience(now, &def, now);
    assert_eq!(patience, settled_by);
    assert!(patience < caller_waits, "{patience:?} vs {caller_waits:?}");
    // Past its own timeout it may still be recording through a failover: wait what is left.
    let late = now - chrono::Duration::from_std(timeout).unwrap();
    let left = super::run::holder_patience(late, &def, now);
    assert_eq!(left, crate::protocol::tool::WRITE_SETTLE_GRACE);
    // Past timeout and grace: it died mid-call; do not wait at all.
    let dead = now - chrono::Duration::seconds(3600);
    assert_eq!(super::run::holder_patience(dead, &def, now), Duration::ZERO);
    // The execution itself stops trying to record its outcome before the copies waiting
    // for it give up, so their last look finds what it recorded.
    let gives_up = super::run::settle_deadline(&def);
    let waiters_give_up = tokio::time::Instant::now() + patience;
    assert!(gives_up < waiters_give_up);
    assert!(waiters_give_up - gives_up < Duration::from_millis(1100));
}

/// A write tool whose first execution fails with `code`.
struct FailsOnce {
    calls: Arc<AtomicUsize>,
    code: ToolErrorCode,
}

#[async_trait]
impl Tool for FailsOnce {
    fn spec(&self) -> ToolSpec {
        Counting {
            calls: self.calls.clone(),
            effect: ToolEffect::Write,
            risk: ToolRisk::Low,
            mode: ToolMode::Sync,
            delay: Duration::ZERO,
        }
        .spec()
    }
    fn definition(&self) -> ToolDefinition {
        let mut d = ToolDefinition::from_spec(self.spec(), Duration::from_secs(5));
        d.effect = ToolEffect::Write;
        d
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(ToolError::new(self.code, "payment backend said no"));
        }
        Ok(json!({"refunded": true}))
    }
}

/// Run a [`FailsOnce`] write failing with `code`, then the same call again: both results and
/// how many times the tool ran.
async fn fail_then_repeat(code: ToolErrorCode) -> (ToolCallResult, ToolCallResult, usize) {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = core_in(
        dir.path(),
        vec![Arc::new(FailsOnce {
            calls: calls.clone(),
            code,
        })],
    )
    .await;
    let args = json!({"order_id": "JD-2", "amount": 5});
    let first = execute(
        &c,
        request("call-1", "refund", args.clone()),
        Caller::default(),
    )
    .await;
    let again = execute(&c, request("call-2", "refund", args), Caller::default()).await;
    (first, again, calls.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_frees_its_key_so_a_retry_runs() {
    let (failed, retried, calls) = fail_then_repeat(ToolErrorCode::ExecutionFailed).await;
    assert_eq!(failed.status, ToolStatus::Error);
    assert_eq!(retried.status, ToolStatus::Ok, "{retried:?}");
    assert_eq!(calls, 2);
}

// An MCP server killed while the call was in flight had the call: its outcome is unknown, so a
// repeat gets that error back and the write does not run a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_outcome_is_unknown_is_not_run_again_by_a_repeat_of_the_call() {
    let (first, again, calls) = fail_then_repeat(ToolErrorCode::OutcomeUnknown).await;
    assert_eq!(
        first.error.as_ref().map(|e| e.code),
        Some(ToolErrorCode::OutcomeUnknown)
    );
    assert_eq!(calls, 1, "the write ran twice");
    assert_eq!(again.via, "idempotent-replay");
    assert_eq!(
        again.error.map(|e| e.code),
        Some(ToolErrorCode::OutcomeUnknown)
    );
}
