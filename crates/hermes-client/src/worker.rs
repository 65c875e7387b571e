//! Serve a tool as a worker: a process that answers `hermes.tool.<name>` in queue group
//! `tool` is a Hermes tool (README, "External tool workers"). Declare the tool in the Hermes
//! config (`[[tools.define]]` with its input schema) so sessions see it and validate the
//! arguments before they reach the worker.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use hermes_protocol::envelope::{error_envelope, Envelope};
use hermes_protocol::subjects::{self, groups};
use hermes_protocol::{ToolCallRequest, ToolCallResult, ToolError, ToolStatus};
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::transport::{Incoming, Transport};
use crate::{ClientError, Hermes};

/// Largest call accepted.
const MAX_CALL_BYTES: usize = 64 * 1024 * 1024;

/// A tool being served; stops when dropped or [`ToolWorker::stop`]ped.
pub struct ToolWorker {
    name: String,
    task: JoinHandle<()>,
}

impl Hermes {
    /// Answer the calls of tool `name` with `handler(call)`: its output, or a
    /// [`ToolError`] the model can act on (code, message, hint). Calls are handled
    /// concurrently; start more workers (here or elsewhere) to spread them.
    pub async fn serve_tool<F, Fut>(
        &self,
        name: &str,
        handler: F,
    ) -> Result<ToolWorker, ClientError>
    where
        F: Fn(ToolCallRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        let subject = subjects::tool(name)?;
        let mut calls = self
            .transport
            .subscribe(&subject, Some(groups::TOOL))
            .await?;
        self.transport.flush().await?;
        let transport = self.transport.clone();
        let handler = Arc::new(handler);
        let task = tokio::spawn(async move {
            while let Some(call) = calls.next().await {
                let (transport, handler) = (transport.clone(), handler.clone());
                tokio::spawn(
                    async move { answer(transport.as_ref(), call, handler.as_ref()).await },
                );
            }
        });
        Ok(ToolWorker {
            name: name.to_string(),
            task,
        })
    }
}

impl ToolWorker {
    /// The tool served.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stop answering calls.
    pub fn stop(self) {}
}

impl Drop for ToolWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answer one call: a `tool.result`, or an `error` envelope for a request that is not one.
async fn answer<F, Fut>(transport: &dyn Transport, call: Incoming, handler: &F)
where
    F: Fn(ToolCallRequest) -> Fut,
    Fut: Future<Output = Result<Value, ToolError>>,
{
    let Some(reply_to) = call.reply else {
        return;
    };
    let reply: Result<Bytes, _> =
        match Envelope::<ToolCallRequest>::decode_request(&call.payload, MAX_CALL_BYTES) {
            Err(e) => error_envelope("bad_request", e.to_string()).encode(),
            Ok(request) => {
                let started = Instant::now();
                let outcome = handler(request.body.clone()).await;
                let (status, output, error) = match outcome {
                    Ok(output) => (ToolStatus::Ok, output, None),
                    Err(error) => (ToolStatus::Error, Value::Null, Some(error)),
                };
                let result = ToolCallResult {
                    call_id: request.body.call_id.clone(),
                    name: request.body.name.clone(),
                    status,
                    output,
                    error,
                    auto_corrected: false,
                    corrections: Vec::new(),
                    via: "worker".into(),
                    duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    raw_reference: None,
                };
                let mut reply = request.reply(result);
                reply.user.clone_from(&request.user);
                reply.encode()
            }
        };
    match reply {
        Ok(payload) => {
            if let Err(e) = transport.publish(&reply_to, payload, None).await {
                tracing::warn!(error = %e, "a tool result was not sent");
            }
        }
        Err(e) => tracing::warn!(error = %e, "a tool result could not be encoded"),
    }
}
