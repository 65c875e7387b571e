//! The Planner: one planning step per request on `hermes.plan` (queue `planner`).
//!
//! It calls the planner model with the assembled context and the visible tools, streams text
//! deltas to the session's out subject while the model answers, and returns the tool calls or
//! the answer. It keeps no per-session state, so any number of planners can share the queue,
//! and it is a bus service rather than a mailbox: a request runs where it arrives (in the
//! session's task on the embedded bus), and only a model behind a network endpoint moves to
//! the I/O runtime.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use tracing::Instrument;

use super::ActorDeps;
use crate::bus::events::{self, EventScope};
use crate::bus::service::{typed, Service, ServiceError};
use crate::bus::{BusError, Serving};
use crate::llm::{ChatMessage, ChatModel, ChatRequest, LlmError, Role, Usage};
use crate::protocol::envelope::Envelope;
use crate::protocol::subjects;
use crate::protocol::{PlanReply, PlanRequest, SummariseReply, SummariseRequest, TurnEvent};
use crate::telemetry::{metrics, spans};

/// The planning service: the planner and summariser models, and the named models agents
/// choose (`[agents.<name>] model`).
pub struct Planner {
    deps: ActorDeps,
    model: Arc<dyn ChatModel>,
    summariser: Arc<dyn ChatModel>,
    named: HashMap<String, Arc<dyn ChatModel>>,
}

impl Planner {
    pub fn new(deps: ActorDeps, model: Arc<dyn ChatModel>, summariser: Arc<dyn ChatModel>) -> Self {
        Self {
            deps,
            model,
            summariser,
            named: HashMap::new(),
        }
    }

    /// Also plan with `model` for agents that name it.
    pub fn with_model(mut self, name: &str, model: Arc<dyn ChatModel>) -> Self {
        self.named.insert(name.to_string(), model);
        self
    }

    /// The model a request names (none or `planner`: the planner model).
    fn model_for(&self, name: Option<&str>) -> Result<&Arc<dyn ChatModel>, ServiceError> {
        match name {
            None | Some("planner") => Ok(&self.model),
            Some(name) => self.named.get(name).ok_or_else(|| {
                ServiceError::new(
                    "unknown_model",
                    format!(
                        "this planner has no model `{name}`; add [models.{name}] to the config \
                         of every planner process"
                    ),
                )
            }),
        }
    }

    /// Serve `hermes.plan` and `hermes.summarise` (queue `planner`) until the guards drop.
    pub async fn serve(self) -> Result<Vec<Serving>, BusError> {
        let planner = Arc::new(self);
        let bus = planner.deps.bus.clone();
        let max = planner
            .deps
            .config
            .engine
            .max_envelope_bytes
            .max(64 * 1024 * 1024);
        let group = subjects::groups::PLANNER;
        Ok(vec![
            bus.serve(
                subjects::PLAN,
                group,
                typed::<PlanRequest, _>(planner.clone(), max),
            )
            .await?,
            bus.serve(
                subjects::SUMMARISE,
                group,
                typed::<SummariseRequest, _>(planner, max),
            )
            .await?,
        ])
    }

    /// Run `call` where it belongs: a model answering in-process runs here, in the caller's
    /// task; one that talks to a server runs on the I/O runtime.
    async fn run_model<T: Send + 'static>(
        &self,
        model: &Arc<dyn ChatModel>,
        call: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, ServiceError> {
        if model.is_local() {
            return Ok(call.await);
        }
        self.deps
            .io
            .spawn(call.in_current_span())
            .await
            .map_err(|e| ServiceError::new("planner_crashed", e.to_string()))
    }
}

#[async_trait]
impl Service<PlanRequest> for Planner {
    async fn call(&self, request: Envelope<PlanRequest>) -> Result<PlanReply, ServiceError> {
        let model = self.model_for(request.body.model.as_deref())?.clone();
        let span = chat_span(&model);
        let call = plan(self.deps.clone(), model.clone(), request);
        let reply = self
            .run_model(&model, call)
            .instrument(span.clone())
            .await
            .and_then(|r| r.map_err(model_failed));
        record_chat(&span, reply.as_ref().map(|r| r.usage));
        reply
    }
}

#[async_trait]
impl Service<SummariseRequest> for Planner {
    async fn call(
        &self,
        request: Envelope<SummariseRequest>,
    ) -> Result<SummariseReply, ServiceError> {
        let chat = summary_chat(&request.body);
        let model = self.summariser.clone();
        let span = chat_span(&model);
        let reply = self
            .run_model(&self.summariser, async move {
                model.complete(&chat, None).await
            })
            .instrument(span.clone())
            .await
            .and_then(|r| r.map_err(model_failed));
        record_chat(&span, reply.as_ref().map(|r| r.usage));
        let reply = reply?;
        Ok(SummariseReply {
            summary: reply.text.trim().to_string(),
        })
    }
}

/// The `chat {model}` span of one call of `model`.
fn chat_span(model: &Arc<dyn ChatModel>) -> tracing::Span {
    let span = spans::chat();
    if !span.is_disabled() {
        spans::record_model(&span, &model.id());
    }
    span
}

/// A model call's token usage, or its failure, on its `chat` span.
fn record_chat(span: &tracing::Span, outcome: Result<Option<Usage>, &ServiceError>) {
    match outcome {
        Ok(Some(usage)) => {
            let (input, output) = (usage.prompt_tokens, usage.completion_tokens);
            spans::record_usage(span, input.into(), output.into());
        }
        Ok(None) => {}
        Err(e) => spans::record_error(span, e.code),
    }
}

async fn plan(
    deps: ActorDeps,
    model: Arc<dyn ChatModel>,
    request: Envelope<PlanRequest>,
) -> Result<PlanReply, LlmError> {
    let Envelope {
        body,
        agent,
        session,
        user,
        trace_id,
        ..
    } = request;
    // The request is ours: its history and tools move into the model's request, uncopied.
    let chat = ChatRequest {
        messages: body.messages,
        tools: body.tools,
        cache_key: cache_key(agent.as_deref(), session.as_deref()),
        ..ChatRequest::default()
    };
    // Deltas go to the session's events when the request says where (`stream_to`), forwarded
    // in this task alongside the model's call (no task of their own: most plans send none).
    if body.stream_to.is_none() {
        let result = model.complete(&chat, None).await;
        return reply_of(result, model.id());
    }
    if let Some(sink) = events::delta_sink() {
        // The session asked in-process, in this task: it publishes the deltas itself, in order
        // with its other events.
        let result = model.complete(&chat, Some(sink)).await;
        return reply_of(result, model.id());
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let turn_id = body.turn_id;
    // The session named the subject (with its reader); the envelope's address is the fallback.
    let stream_to = body
        .stream_to
        .as_deref()
        .and_then(|s| subjects::parse_outbound(s).ok());
    let scope = match stream_to {
        Some(to) => EventScope {
            agent: to.agent,
            session: to.session,
            user,
            trace_id,
            reader: to.reader,
        },
        None => EventScope {
            agent: agent.unwrap_or_default(),
            session: session.unwrap_or_default(),
            reader: crate::config::publishers::reader_of(
                &deps.config.bus.publishers,
                user.as_deref(),
            ),
            user,
            trace_id,
        },
    };
    let forward = async {
        while let Some(text) = rx.recv().await {
            let event = TurnEvent::Delta {
                turn_id: turn_id.clone(),
                text,
            };
            events::publish(deps.bus.as_ref(), &scope, event).await;
        }
    };
    // The sender moves into `complete` and is dropped when it returns: the forwarding drains
    // what is left and ends.
    let (result, ()) = futures::join!(model.complete(&chat, Some(tx)), forward);
    reply_of(result, model.id())
}

/// The prompt-cache key of a session's planning requests: stable for the session, the same
/// whichever process plans, at most 64 characters (a hash stands in for long ids).
fn cache_key(agent: Option<&str>, session: Option<&str>) -> Option<String> {
    let key = format!("hermes:{}:{}", agent?, session?);
    if key.len() <= 64 {
        return Some(key);
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    Some(format!("hermes:{hex}"))
}

/// A failed model call as the planner's error answer: its code is the error's kind, so the
/// turn (and its `error` event) keep it; counted by kind (a fallback's failure as its own).
fn model_failed(e: LlmError) -> ServiceError {
    let last = match &e {
        LlmError::BothFailed { fallback, .. } => fallback.kind(),
        other => other.kind(),
    };
    metrics::model_error(last.code());
    ServiceError::new(e.kind().code(), e.to_string())
}

/// The planner's answer from the model's.
fn reply_of(
    result: Result<crate::llm::ChatResponse, LlmError>,
    model: String,
) -> Result<PlanReply, LlmError> {
    let response = result?;
    Ok(PlanReply {
        text: response.text,
        tool_calls: response.tool_calls,
        usage: response.usage,
        model,
        parts: response.parts,
        reasoning: response.reasoning,
    })
}

/// The summariser's instructions: keep what the goal needs, drop chit-chat.
const SUMMARY_PROMPT: &str = "You maintain the running summary of a conversation between a \
user and an assistant. Fold the new messages into the previous summary. Keep facts, \
decisions, open questions, identifiers (order ids, names, numbers) and everything the task \
goal needs; drop greetings, chit-chat and moods. Reply with the new summary only, at most \
200 words, in the user's language.";

/// The summariser's request: instructions, then the transcript as one user message.
fn summary_chat(request: &SummariseRequest) -> ChatRequest {
    let mut transcript = String::new();
    if let Some(goal) = &request.goal {
        transcript.push_str(&format!("Task goal: {goal}\n\n"));
    }
    transcript.push_str(&format!(
        "Previous summary:\n{}\n\nNew messages:\n",
        request.previous
    ));
    for m in &request.messages {
        let who = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
        };
        transcript.push_str(&format!("{who}: {}\n", m.content));
    }
    ChatRequest {
        messages: vec![
            ChatMessage::system(SUMMARY_PROMPT).into(),
            ChatMessage::user(transcript).into(),
        ],
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}
