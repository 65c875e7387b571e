//! What a turn needs from the world, as one small trait: plan a step, recall memories, read
//! the tool catalog, call a tool, summarise older turns, emit an event, queue the extraction.
//! [`BusPorts`] does each over the bus; the unit tests use a scripted fake (`fake.rs`), so the
//! whole turn — confirmations, job waits, resumes, the loop guard, scenes, timeouts — is tested
//! without one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::a2a::delegate::{RemoteDelegates, RemotePoll, RemoteTask};
use crate::bus::events::{self, EventScope};
use crate::bus::retry::{self, Repeat};
use crate::bus::rpc::RpcError;
use crate::bus::{rpc, BusError, SharedBus};
use crate::config::Config;
use crate::llm::ModelErrorKind;
use crate::protocol::envelope::{Envelope, EnvelopeError};
use crate::protocol::request::ToolsListRequest;
use crate::protocol::subjects;
use crate::protocol::tool::{repeated_write_wait, ToolEffect, ToolSource};
use crate::protocol::{
    Cancel, CancelAccepted, ExtractJob, JobEvent, PlanReply, PlanRequest, RecallHit, RecallRequest,
    SummariseRequest, ToolCallRequest, ToolCallResult, ToolStatus, ToolsCatalog, TurnEvent,
    UserMessage,
};
use crate::tools::{ToolError, ToolErrorCode};

use super::{PortError, TurnError};

/// The ports of a turn.
#[async_trait]
pub trait TurnPorts: Send + Sync {
    /// One planning step.
    /// One planning step; a model's failure keeps its kind ([`TurnError::Model`]).
    async fn plan(&self, scope: &EventScope, request: PlanRequest) -> Result<PlanReply, TurnError>;
    /// Up to `limit` of the user's memories for the query, held for the turn until its
    /// extraction job releases them.
    async fn recall(
        &self,
        scope: &EventScope,
        recall: Recall<'_>,
    ) -> Result<Vec<RecallHit>, PortError>;
    /// The tool catalog (the executor's and the workers' tools).
    async fn catalog(&self) -> Result<Arc<ToolsCatalog>, PortError>;
    /// Run one call, waiting at most `timeout`; every failure is a result.
    async fn call_tool(
        &self,
        scope: &EventScope,
        request: ToolCallRequest,
        timeout: Duration,
    ) -> ToolCallResult;
    /// Fold older turns into the summary; the new summary.
    async fn summarise(
        &self,
        scope: &EventScope,
        request: SummariseRequest,
    ) -> Result<String, PortError>;
    /// Publish a turn event.
    async fn emit(&self, scope: &EventScope, event: TurnEvent);
    /// Publish a turn's events that leave together, in order (one message where the bus
    /// carries them).
    async fn emit_all(&self, scope: &EventScope, events: Vec<TurnEvent>) {
        for event in events {
            self.emit(scope, event).await;
        }
    }
    /// Put a finished turn on the extraction queue; false when it could not be queued.
    async fn enqueue_extraction(&self, scope: &EventScope, job: ExtractJob) -> bool;
    /// Whether the session inbox still holds item `seq` (unacked); `None` when there is no
    /// inbox or it could not be asked.
    async fn inbox_holds(&self, seq: u64) -> Option<bool> {
        let _ = seq;
        None
    }
    /// Whether the deployment's memory-extractors take extraction jobs from the replicated
    /// session log, so an answer's append may carry its job ([`super::outbox`]).
    fn extraction_rides_on_log(&self) -> bool {
        false
    }
    /// Whether plans are made in this process, so the model's streamed text reaches the
    /// session only through the turn's own events (see [`super::first_write`]).
    fn plans_in_process(&self) -> bool {
        true
    }
    /// Answer the publisher of an inbound message on its reply subject.
    async fn reply(&self, to: &str, payload: bytes::Bytes);
    /// Give another session a message (a delegated task); Ok once it is stored there.
    async fn send_message(
        &self,
        scope: &EventScope,
        envelope: Envelope<UserMessage>,
    ) -> Result<(), PortError>;
    /// Ask another session to cancel its turn.
    async fn send_cancel(&self, envelope: Envelope<Cancel>) -> Result<CancelAccepted, PortError>;
    /// Publish an event on `hermes.job.<id>` (a delegated turn's end wakes its parent).
    async fn publish_job_event(&self, scope: &EventScope, event: JobEvent);
    /// Start a delegated task on a remote A2A agent: Ok once it is recorded (it is sent and
    /// followed from there; its end arrives on `hermes.job.<id>`).
    async fn remote_start(&self, task: RemoteTask) -> Result<(), PortError> {
        Err(PortError::NoRemote { agent: task.agent })
    }
    /// What became of the remote task of delegation `job_id`.
    async fn remote_poll(&self, job_id: &str) -> RemotePoll {
        let _ = job_id;
        RemotePoll::Working
    }
    /// Ask the remote agent to cancel the task of delegation `job_id`.
    async fn remote_cancel(&self, job_id: &str, reason: &str) {
        let _ = (job_id, reason);
    }
    /// Ask the tool-executor to stop an async job the turn no longer waits for (an MCP
    /// server's task is cancelled there).
    async fn cancel_job(&self, job_id: &str, reason: &str) {
        let _ = (job_id, reason);
    }
}

/// What a turn recalls.
pub struct Recall<'a> {
    pub user: &'a str,
    pub query: &'a str,
    pub limit: usize,
    /// The turn that relies on the memories.
    pub task: &'a str,
    /// The agent's `memory.read` namespaces.
    pub namespaces: &'a [String],
}

/// The ports over the bus. The tool catalog is cached, and dropped when the tool-executor
/// or the MCP-bridge announces a change (`hermes.tools.changed`, `hermes.mcp.changed`).
pub struct BusPorts {
    bus: SharedBus,
    config: Arc<Config>,
    catalog: Arc<Mutex<Option<Arc<ToolsCatalog>>>>,
    /// Tasks delegated to remote A2A agents, when the config declares any.
    remote: Option<Arc<RemoteDelegates>>,
}

impl BusPorts {
    pub fn new(bus: SharedBus, config: Arc<Config>) -> Self {
        Self {
            bus,
            config,
            catalog: Arc::default(),
            remote: None,
        }
    }

    /// Delegate to remote A2A agents through `remote`.
    pub fn with_remote(mut self, remote: Arc<RemoteDelegates>) -> Self {
        self.remote = Some(remote);
        self
    }

    /// Forget the cached catalog whenever tools change. Call on the I/O runtime; the watch
    /// ends with the bus.
    pub async fn watch_catalog(&self) -> Result<(), BusError> {
        for subject in [
            crate::protocol::subjects::TOOLS_CHANGED,
            crate::protocol::subjects::MCP_CHANGED,
        ] {
            let mut changes = self.bus.subscribe(subject).await?;
            let cache = self.catalog.clone();
            tokio::spawn(async move {
                while changes.next().await.is_some() {
                    *lock(&cache) = None;
                }
            });
        }
        Ok(())
    }

    fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.config.engine.request_timeout_secs)
    }

    /// Whether a call of `tool` that got no reply within `wait` may be sent again: executor
    /// tools yes (reads are harmless to repeat, and the executor runs a `write` once per
    /// idempotency key, holding a copy until the first execution's outcome is recorded, so the
    /// copy is waited for longer); a worker's `write` tool no, as nothing deduplicates it.
    fn repeat_of(&self, tool: &str, wait: Duration) -> Repeat {
        let catalog = lock(&self.catalog).clone();
        let definition = catalog
            .as_ref()
            .and_then(|c| c.definitions.iter().find(|d| d.name == tool));
        match definition {
            Some(d) if d.source == ToolSource::Worker && d.effect == ToolEffect::Write => {
                Repeat::Never
            }
            Some(d) if d.effect == ToolEffect::Write => {
                Repeat::OnSilenceWaiting(repeated_write_wait(wait))
            }
            Some(_) => Repeat::OnSilence,
            None => Repeat::Never,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `envelope`, addressed like the session's events.
fn addressed<B>(scope: &EventScope, envelope: Envelope<B>) -> Envelope<B> {
    envelope
        .for_session(&scope.agent, &scope.session, scope.user.as_deref())
        .in_trace(&scope.trace_id)
}

#[async_trait]
impl TurnPorts for BusPorts {
    async fn plan(&self, scope: &EventScope, request: PlanRequest) -> Result<PlanReply, TurnError> {
        let envelope = addressed(scope, Envelope::request(request));
        let timeout = Duration::from_secs(self.config.engine.plan_timeout_secs);
        retry::request(self.bus.as_ref(), envelope, timeout, Repeat::OnSilence)
            .await
            .map(|r| r.body)
            .map_err(plan_failed)
    }

    async fn recall(
        &self,
        scope: &EventScope,
        recall: Recall<'_>,
    ) -> Result<Vec<RecallHit>, PortError> {
        let request = RecallRequest {
            user: recall.user.to_string(),
            query: recall.query.to_string(),
            limit: recall.limit,
            task: Some(recall.task.to_string()),
            namespaces: recall.namespaces.to_vec(),
            ..RecallRequest::default()
        };
        let envelope = Envelope::request(request).in_trace(&scope.trace_id);
        let timeout = self.request_timeout();
        retry::request(self.bus.as_ref(), envelope, timeout, Repeat::OnSilence)
            .await
            .map(|r| r.body.hits)
            .map_err(PortError::request("recalling memories"))
    }

    async fn catalog(&self) -> Result<Arc<ToolsCatalog>, PortError> {
        if let Some(cached) = lock(&self.catalog).clone() {
            return Ok(cached);
        }
        let envelope = Envelope::request(ToolsListRequest);
        let timeout = self.request_timeout();
        let catalog = retry::request(self.bus.as_ref(), envelope, timeout, Repeat::OnSilence)
            .await
            .map(|r| Arc::new(r.body))
            .map_err(PortError::request("reading the tool catalog"))?;
        *lock(&self.catalog) = Some(catalog.clone());
        Ok(catalog)
    }

    async fn call_tool(
        &self,
        scope: &EventScope,
        request: ToolCallRequest,
        timeout: Duration,
    ) -> ToolCallResult {
        let (call_id, name) = (request.call_id.clone(), request.name.clone());
        let repeat = self.repeat_of(&name, timeout);
        let envelope = addressed(scope, Envelope::request(request));
        match retry::request(self.bus.as_ref(), envelope, timeout, repeat).await {
            Ok(reply) => reply.body,
            Err(rpc::RpcError::Subject(e)) => failed(
                call_id,
                name,
                ToolError::new(ToolErrorCode::UnknownTool, e.to_string()),
            ),
            Err(rpc::RpcError::Bus(BusError::NoResponders { .. })) => {
                let message = format!("no executor serves `{name}` right now");
                failed(
                    call_id,
                    name,
                    ToolError::new(ToolErrorCode::Unavailable, message)
                        .with_hint("the tool's service is down; tell the user instead of retrying"),
                )
            }
            Err(e) => failed(
                call_id,
                name,
                ToolError::new(ToolErrorCode::Unavailable, e.to_string())
                    .with_hint("the tool did not answer; retry once at most"),
            ),
        }
    }

    async fn summarise(
        &self,
        scope: &EventScope,
        request: SummariseRequest,
    ) -> Result<String, PortError> {
        let envelope = Envelope::request(request).in_trace(&scope.trace_id);
        let timeout = Duration::from_secs(self.config.engine.plan_timeout_secs);
        retry::request(self.bus.as_ref(), envelope, timeout, Repeat::OnSilence)
            .await
            .map(|r| r.body.summary)
            .map_err(PortError::request("summarising older turns"))
    }

    async fn emit(&self, scope: &EventScope, event: TurnEvent) {
        events::publish(self.bus.as_ref(), scope, event).await;
    }

    async fn emit_all(&self, scope: &EventScope, events: Vec<TurnEvent>) {
        events::publish_all(self.bus.as_ref(), scope, events).await;
    }

    async fn reply(&self, to: &str, payload: bytes::Bytes) {
        if let Err(e) = self.bus.publish(to, payload).await {
            tracing::warn!(error = %e, "reply to publisher failed");
        }
    }

    async fn send_message(
        &self,
        _: &EventScope,
        envelope: Envelope<UserMessage>,
    ) -> Result<(), PortError> {
        // Sent again after silence: the receiving session recognises the message id.
        retry::request(
            self.bus.as_ref(),
            envelope,
            self.request_timeout(),
            Repeat::OnSilence,
        )
        .await
        .map(|_| ())
        .map_err(PortError::request(
            "giving the delegated task to its session",
        ))
    }

    async fn send_cancel(&self, envelope: Envelope<Cancel>) -> Result<CancelAccepted, PortError> {
        retry::request(
            self.bus.as_ref(),
            envelope,
            self.request_timeout(),
            Repeat::OnSilence,
        )
        .await
        .map(|r| r.body)
        .map_err(PortError::request("cancelling the delegated turn"))
    }

    async fn publish_job_event(&self, scope: &EventScope, event: JobEvent) {
        let subject = match crate::protocol::subjects::job(&event.job_id) {
            Ok(subject) => subject,
            Err(e) => {
                tracing::error!(error = %e, "job event with an invalid id not published");
                return;
            }
        };
        let envelope = addressed(scope, Envelope::new(event.status.event_kind(), event));
        match envelope.encode() {
            Ok(payload) => {
                if let Err(e) = self.bus.publish(&subject, payload).await {
                    tracing::warn!(subject, error = %e, "job event not published; the waiting turn reads the outcome when it resumes");
                }
            }
            Err(e) => tracing::error!(error = %e, "job event not encoded"),
        }
    }

    async fn remote_start(&self, task: RemoteTask) -> Result<(), PortError> {
        match &self.remote {
            Some(remote) => Ok(remote.start(task).await?),
            None => Err(PortError::NoRemote { agent: task.agent }),
        }
    }

    async fn remote_poll(&self, job_id: &str) -> RemotePoll {
        match &self.remote {
            Some(remote) => remote.poll(job_id).await,
            None => RemotePoll::Working,
        }
    }

    async fn remote_cancel(&self, job_id: &str, reason: &str) {
        if let Some(remote) = &self.remote {
            remote.cancel(job_id, reason).await;
        }
    }

    async fn cancel_job(&self, job_id: &str, reason: &str) {
        let request = Envelope::request(crate::protocol::JobCancelRequest {
            job_id: job_id.to_owned(),
            reason: Some(reason.to_owned()),
        });
        match crate::bus::rpc::request(self.bus.as_ref(), request, self.request_timeout()).await {
            Ok(reply) if reply.body.cancelled => {}
            Ok(reply) => {
                tracing::debug!(job = %job_id, note = ?reply.body.note, "job not cancelled")
            }
            Err(e) => tracing::warn!(job = %job_id, error = %e, "job not cancelled"),
        }
    }

    fn plans_in_process(&self) -> bool {
        self.bus.local_handler(subjects::PLAN).is_some()
    }

    /// On NATS every memory-extractor reads jobs from the session log as well as the queue.
    fn extraction_rides_on_log(&self) -> bool {
        self.bus.cluster().is_some()
    }

    async fn inbox_holds(&self, seq: u64) -> Option<bool> {
        let cluster = self.bus.cluster()?;
        match cluster.inbox_holds(seq).await {
            Ok(holds) => Some(holds),
            Err(e) => {
                tracing::warn!(item = seq, error = %e, "could not ask the session inbox whether it still holds an item; taking it as held");
                None
            }
        }
    }

    async fn enqueue_extraction(&self, scope: &EventScope, job: ExtractJob) -> bool {
        let envelope = addressed(scope, Envelope::event(job));
        let queue = crate::protocol::subjects::MEMORY_EXTRACT;
        // An extractor in this process takes the job as it is (embedded bus).
        match self
            .bus
            .durable_publish_local(queue, Arc::new(envelope))
            .await
        {
            Ok(()) => true,
            Err(e @ crate::bus::BusError::Encode { .. }) => {
                tracing::error!(error = %e, "extraction job not encoded");
                true
            }
            Err(e) => {
                tracing::error!(session = %scope.session, error = %e, "extraction job not queued; it is queued again when the session service restarts");
                false
            }
        }
    }
}

/// A call that did not run, as its result.
pub fn failed(call_id: String, name: String, error: ToolError) -> ToolCallResult {
    ToolCallResult {
        call_id,
        name,
        status: ToolStatus::Error,
        output: serde_json::Value::Null,
        error: Some(error),
        auto_corrected: false,
        corrections: Vec::new(),
        via: String::new(),
        duration_ms: 0,
        raw_reference: None,
    }
}

/// A planning request's failure as the turn's: the planner's error answer names the model
/// error's kind in its code; anything else (no planner, a bus failure) is [`TurnError::Plan`].
fn plan_failed(error: RpcError) -> TurnError {
    if let RpcError::Envelope(EnvelopeError::Answered { code, message, .. }) = &error {
        if let Some(kind) = ModelErrorKind::from_code(code) {
            return TurnError::Model {
                kind,
                message: message.clone(),
            };
        }
    }
    TurnError::Plan(error.to_string())
}
