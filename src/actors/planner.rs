//! The Planner: one planning step per request on `hermes.plan` (queue `planner`).
//!
//! It calls the planner model with the assembled context and the visible tools, streams text
//! deltas to the session's out subject while the model answers, and returns the tool calls or
//! the answer. It keeps no per-session state, so any number of planners can share the queue.

use std::sync::Arc;

use actix::prelude::*;
use bytes::Bytes;

use super::adapter::Incoming;
use super::{error_bytes, reply_bytes, ActorDeps};
use crate::bus::messages::{
    kinds, PlanReply, PlanRequest, SummariseReply, SummariseRequest, TurnEvent,
};
use crate::bus::{rpc, subjects};
use crate::envelope::Envelope;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, Role};

pub struct Planner {
    deps: ActorDeps,
    model: Arc<dyn ChatModel>,
    summariser: Arc<dyn ChatModel>,
}

impl Planner {
    pub fn new(deps: ActorDeps, model: Arc<dyn ChatModel>, summariser: Arc<dyn ChatModel>) -> Self {
        Self {
            deps,
            model,
            summariser,
        }
    }
}

impl Actor for Planner {
    type Context = Context<Self>;
}

impl Handler<Incoming> for Planner {
    type Result = ResponseFuture<Option<Bytes>>;

    fn handle(&mut self, msg: Incoming, _ctx: &mut Self::Context) -> Self::Result {
        let deps = self.deps.clone();
        if msg.subject == subjects::SUMMARISE {
            return Box::pin(summarise_request(deps, self.summariser.clone(), msg));
        }
        let model = self.model.clone();
        Box::pin(async move {
            let max = deps.config.engine.max_envelope_bytes.max(64 * 1024 * 1024);
            let request =
                match Envelope::decode_as::<PlanRequest>(&msg.payload, max, kinds::PLAN_REQUEST) {
                    Ok(r) => r,
                    Err(e) => return error_bytes("bad_request", e.to_string()),
                };
            // Model I/O runs on the I/O runtime, not on this actor's arbiter.
            let io = deps.io.clone();
            match io.spawn(plan(deps, model, request)).await {
                Ok(Ok(reply)) => reply_bytes(&reply),
                Ok(Err(e)) => error_bytes("model_failed", e),
                Err(e) => error_bytes("planner_crashed", e.to_string()),
            }
        })
    }
}

async fn plan(
    deps: ActorDeps,
    model: Arc<dyn ChatModel>,
    request: Envelope<PlanRequest>,
) -> Result<Envelope<PlanReply>, String> {
    let body = &request.body;
    let chat = ChatRequest {
        messages: body.messages.clone(),
        tools: body.tools.clone(),
        ..ChatRequest::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let forwarder = body.stream_to.clone().map(|subject| {
        let turn_id = body.turn_id.clone();
        let (agent, session, user) = (
            request.agent.clone().unwrap_or_default(),
            request.session.clone().unwrap_or_default(),
            request.user.clone(),
        );
        let trace = request.trace_id.clone();
        tokio::spawn(async move {
            while let Some(text) = rx.recv().await {
                let event = TurnEvent::Delta {
                    turn_id: turn_id.clone(),
                    text,
                };
                let env = Envelope::new(kinds::TURN_EVENT, event)
                    .for_session(&agent, &session, user.as_deref())
                    .in_trace(&trace);
                if let Err(e) = rpc::publish(deps.bus.as_ref(), &subject, &env).await {
                    tracing::debug!(error = %e, "delta not published");
                }
            }
        })
    });
    let deltas = forwarder.as_ref().map(|_| tx);
    let result = model.complete(&chat, deltas).await;
    if let Some(f) = forwarder {
        // The sender was moved into `complete` and is dropped now: the forwarder drains and ends.
        let _ = f.await;
    }
    let response = result.map_err(|e| e.to_string())?;
    let reply = PlanReply {
        text: response.text,
        tool_calls: response.tool_calls,
        usage: response.usage,
        model: model.id(),
    };
    let mut env = Envelope::new(kinds::PLAN_REPLY, reply).in_trace(&request.trace_id);
    env.agent = request.agent.clone();
    env.session = request.session.clone();
    Ok(env)
}

/// The summariser's instructions: keep what the goal needs, drop chit-chat.
const SUMMARY_PROMPT: &str = "You maintain the running summary of a conversation between a \
user and an assistant. Fold the new messages into the previous summary. Keep facts, \
decisions, open questions, identifiers (order ids, names, numbers) and everything the task \
goal needs; drop greetings, chit-chat and moods. Reply with the new summary only, at most \
200 words, in the user's language.";

async fn summarise_request(
    deps: ActorDeps,
    model: Arc<dyn ChatModel>,
    msg: Incoming,
) -> Option<Bytes> {
    let max = deps.config.engine.max_envelope_bytes.max(64 * 1024 * 1024);
    let request = match Envelope::decode_as::<SummariseRequest>(
        &msg.payload,
        max,
        kinds::SUMMARISE_REQUEST,
    ) {
        Ok(r) => r,
        Err(e) => return error_bytes("bad_request", e.to_string()),
    };
    let chat = summary_chat(&request.body);
    let io = deps.io.clone();
    let result = io
        .spawn(async move { model.complete(&chat, None).await })
        .await;
    match result {
        Ok(Ok(r)) => reply_bytes(
            &Envelope::new(
                kinds::SUMMARISE_REPLY,
                SummariseReply {
                    summary: r.text.trim().to_string(),
                },
            )
            .in_trace(&request.trace_id),
        ),
        Ok(Err(e)) => error_bytes("model_failed", e.to_string()),
        Err(e) => error_bytes("planner_crashed", e.to_string()),
    }
}

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
            ChatMessage::system(SUMMARY_PROMPT),
            ChatMessage::user(transcript),
        ],
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}
