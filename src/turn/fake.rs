//! A scripted [`TurnPorts`] for the turn's unit tests: the planner is a closure over the
//! request, tools are closures over the call, and everything the turn sends out — events, tool
//! calls with their timeouts, extraction jobs, replies — is recorded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::ports::{failed, Recall, TurnPorts};
use super::{PortError, TurnError};
use crate::bus::events::EventScope;
use crate::protocol::envelope::{Envelope, EnvelopeError};
use crate::protocol::{
    Cancel, CancelAccepted, ExtractJob, JobEvent, PlanReply, PlanRequest, RecallHit,
    SummariseRequest, ToolCallRequest, ToolCallResult, ToolDefinition, ToolStatus, ToolsCatalog,
    TurnEvent, UserMessage,
};
use crate::tools::{ToolError, ToolErrorCode};

type Planner = Box<dyn Fn(&PlanRequest) -> PlanReply + Send + Sync>;
type ToolFn = Box<dyn Fn(&ToolCallRequest) -> Result<serde_json::Value, ToolError> + Send + Sync>;

/// The scripted world of a turn.
#[derive(Default)]
pub struct FakePorts {
    planner: Option<Planner>,
    tools: HashMap<String, ToolFn>,
    definitions: Vec<ToolDefinition>,
    pub recalled: Vec<RecallHit>,
    pub seen: Mutex<Seen>,
    /// Every delegated task is refused by its session.
    pub refuse_sends: bool,
    /// What the session inbox says when asked whether it still holds an item (`None`: it
    /// cannot be asked).
    pub inbox_holding: Option<bool>,
    /// The extraction queue refuses every job.
    pub refuse_extractions: bool,
    /// Extraction jobs ride on the session log's appends ([`super::outbox`]).
    pub extraction_on_log: bool,
}

/// What the turn sent out.
#[derive(Default)]
pub struct Seen {
    pub plans: Vec<PlanRequest>,
    pub calls: Vec<(ToolCallRequest, Duration)>,
    pub events: Vec<TurnEvent>,
    pub extractions: Vec<ExtractJob>,
    pub replies: Vec<(String, Bytes)>,
    pub summaries: usize,
    /// Messages sent to other sessions (delegated tasks).
    pub sent: Vec<Envelope<UserMessage>>,
    pub cancels: Vec<Envelope<Cancel>>,
    pub job_events: Vec<JobEvent>,
    /// The namespaces of the last recall.
    pub recall_namespaces: Vec<String>,
    /// Recalls asked for.
    pub recalls: usize,
    /// What left the turn, in order: `reply`, `call` (a tool call) or an event's kind.
    pub out: Vec<String>,
    /// How many events each message of events carried, in order.
    pub event_messages: Vec<usize>,
    /// The inbox items asked about.
    pub inbox_asked: Vec<u64>,
}

impl FakePorts {
    /// A world whose planner answers with `plan`.
    pub fn new(plan: impl Fn(&PlanRequest) -> PlanReply + Send + Sync + 'static) -> Self {
        Self {
            planner: Some(Box::new(plan)),
            ..Self::default()
        }
    }

    /// Add a tool with its definition and what it does.
    pub fn tool(
        mut self,
        definition: ToolDefinition,
        run: impl Fn(&ToolCallRequest) -> Result<serde_json::Value, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.tools.insert(definition.name.clone(), Box::new(run));
        self.definitions.push(definition);
        self
    }

    pub fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl TurnPorts for FakePorts {
    async fn plan(&self, _: &EventScope, request: PlanRequest) -> Result<PlanReply, TurnError> {
        let reply = match &self.planner {
            Some(plan) => plan(&request),
            None => return Err(TurnError::Plan("no planner scripted".into())),
        };
        self.seen().plans.push(request);
        Ok(reply)
    }

    async fn recall(
        &self,
        _: &EventScope,
        recall: Recall<'_>,
    ) -> Result<Vec<RecallHit>, PortError> {
        let mut seen = self.seen();
        seen.recall_namespaces = recall.namespaces.to_vec();
        seen.recalls += 1;
        drop(seen);
        Ok(self.recalled.iter().take(recall.limit).cloned().collect())
    }

    async fn catalog(&self) -> Result<Arc<ToolsCatalog>, PortError> {
        Ok(Arc::new(ToolsCatalog {
            tools: self.definitions.iter().map(ToolDefinition::spec).collect(),
            definitions: self.definitions.clone(),
            metrics: Default::default(),
        }))
    }

    async fn call_tool(
        &self,
        _: &EventScope,
        request: ToolCallRequest,
        timeout: Duration,
    ) -> ToolCallResult {
        let mut seen = self.seen();
        seen.out.push("call".into());
        seen.calls.push((request.clone(), timeout));
        drop(seen);
        let Some(run) = self.tools.get(&request.name) else {
            let error = ToolError::new(ToolErrorCode::Unavailable, "no executor serves it");
            return failed(request.call_id, request.name, error);
        };
        match run(&request) {
            Ok(output) => ToolCallResult {
                call_id: request.call_id,
                name: request.name,
                status: ToolStatus::Ok,
                output,
                error: None,
                auto_corrected: false,
                corrections: Vec::new(),
                via: "fake".into(),
                duration_ms: 0,
                raw_reference: None,
            },
            Err(error) => failed(request.call_id, request.name, error),
        }
    }

    async fn summarise(&self, _: &EventScope, _: SummariseRequest) -> Result<String, PortError> {
        self.seen().summaries += 1;
        Ok("earlier turns, summarised".into())
    }

    async fn emit(&self, scope: &EventScope, event: TurnEvent) {
        self.emit_all(scope, vec![event]).await;
    }

    async fn emit_all(&self, _: &EventScope, events: Vec<TurnEvent>) {
        let mut seen = self.seen();
        seen.event_messages.push(events.len());
        for event in events {
            seen.out.push(event.type_name().to_string());
            seen.events.push(event);
        }
    }

    async fn enqueue_extraction(&self, _: &EventScope, job: ExtractJob) -> bool {
        if self.refuse_extractions {
            return false;
        }
        self.seen().extractions.push(job);
        true
    }

    fn extraction_rides_on_log(&self) -> bool {
        self.extraction_on_log
    }

    async fn inbox_holds(&self, seq: u64) -> Option<bool> {
        self.seen().inbox_asked.push(seq);
        self.inbox_holding
    }

    async fn reply(&self, to: &str, payload: Bytes) {
        let mut seen = self.seen();
        seen.out.push("reply".into());
        seen.replies.push((to.to_string(), payload));
    }

    async fn send_message(
        &self,
        _: &EventScope,
        envelope: Envelope<UserMessage>,
    ) -> Result<(), PortError> {
        if self.refuse_sends {
            return Err(PortError::Request {
                what: "giving the delegated task to its session",
                source: EnvelopeError::Answered {
                    kind: "accepted".into(),
                    code: "unknown_agent".into(),
                    message: "no such agent".into(),
                }
                .into(),
            });
        }
        self.seen().sent.push(envelope);
        Ok(())
    }

    async fn send_cancel(&self, envelope: Envelope<Cancel>) -> Result<CancelAccepted, PortError> {
        self.seen().cancels.push(envelope);
        Ok(CancelAccepted {
            turn_id: None,
            children: Vec::new(),
        })
    }

    async fn publish_job_event(&self, _: &EventScope, event: JobEvent) {
        self.seen().job_events.push(event);
    }
}
