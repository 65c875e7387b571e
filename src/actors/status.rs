//! `hermes.status`: every process answers a status request with what it runs and its
//! metrics ([`ProcessStatus`]), and [`gather`] collects the answers of a whole deployment for
//! `hermes status`.

use std::sync::Arc;
use std::time::Duration;

use crate::bus::{BusError, SharedBus};
use crate::protocol::envelope::Envelope;
use crate::protocol::{subjects, ProcessStatus, StatusRequest};

/// What a process says about itself when asked.
pub type Report = Arc<dyn Fn() -> ProcessStatus + Send + Sync>;

/// Answer status requests on `hermes.status` until the bus closes or the task is aborted.
/// Call on the I/O runtime.
pub async fn serve(
    bus: SharedBus,
    report: Report,
    max_bytes: usize,
) -> Result<tokio::task::JoinHandle<()>, BusError> {
    let mut requests = bus.subscribe(subjects::STATUS).await?;
    Ok(tokio::spawn(async move {
        while let Some(message) = requests.next().await {
            let request = match Envelope::<StatusRequest>::decode_event(&message.payload, max_bytes)
            {
                Ok(request) => request,
                Err(e) => {
                    tracing::warn!(error = %e, "status request not readable; ignored");
                    continue;
                }
            };
            let to = request.body.reply_to;
            if let Err(e) = crate::bus::pattern::validate(&to, false) {
                tracing::warn!(to, error = %e, "status request with an invalid reply subject; ignored");
                continue;
            }
            let answer = Envelope::event(report()).in_trace(&request.trace_id);
            match answer.encode() {
                Ok(payload) => {
                    if let Err(e) = bus.publish(&to, payload).await {
                        tracing::warn!(error = %e, "status not sent");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "status not encoded"),
            }
        }
    }))
}

/// Ask every process on `bus` for its status and collect the answers that arrive within
/// `wait`, sorted by host and pid.
pub async fn gather(bus: &SharedBus, wait: Duration) -> Result<Vec<ProcessStatus>, BusError> {
    let reply_to = format!(
        "{}.reply.{}",
        subjects::STATUS,
        uuid::Uuid::new_v4().simple()
    );
    let mut answers = bus.subscribe(&reply_to).await?;
    bus.flush().await?;
    let request = Envelope::event(StatusRequest {
        reply_to: reply_to.clone(),
    });
    let payload = request
        .encode()
        .map_err(|e| BusError::Io(format!("status request not encoded: {e}")))?;
    bus.publish(subjects::STATUS, payload).await?;
    let mut out = Vec::new();
    let until = tokio::time::Instant::now() + wait;
    while let Ok(Some(message)) = tokio::time::timeout_at(until, answers.next()).await {
        match Envelope::<ProcessStatus>::decode_event(&message.payload, usize::MAX) {
            Ok(status) => out.push(status.body),
            Err(e) => tracing::warn!(error = %e, "unreadable status answer skipped"),
        }
    }
    out.sort_by(|a, b| (&a.host, a.pid).cmp(&(&b.host, b.pid)));
    Ok(out)
}
