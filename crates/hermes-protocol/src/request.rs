//! Requests, replies and events, declared once: each request type names the subject it goes
//! to, its envelope kind and its reply type; each reply and each published event its kind. So
//! encoding, decoding and dispatch follow from the type and nobody pairs a body type with a
//! kind by hand.
//!
//! ```ignore
//! let reply: Envelope<PlanReply> = rpc::request(bus, Envelope::request(plan), timeout).await?;
//! // a service:    Envelope::<PlanRequest>::decode_request(&payload, max)?
//! // a subscriber: Envelope::<TurnEvent>::decode_event(&payload, max)?
//! ```

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::envelope::{Envelope, EnvelopeError, ErrorBody, ERROR_KIND};
use super::kinds;
use super::mcp::{
    AuditEntry, McpAuditReply, McpAuditRequest, McpCallReply, McpCallRequest, McpCatalog,
    McpPromptReply, McpPromptRequest, McpReadReply, McpReadRequest, McpTaskReply, McpTaskRequest,
};
use super::memory::{
    ExtractJob, MemoryForgetRequest, MemoryListReply, MemoryListRequest, MemoryWriteReply,
    MemoryWriteRequest, RecallReply, RecallRequest,
};
use super::session::{
    Accepted, Cancel, CancelAccepted, Confirmation, ConfirmationAccepted, PlanReply, PlanRequest,
    SessionSearchReply, SessionSearchRequest, SummariseReply, SummariseRequest, TurnEvent,
    TurnEvents, UserMessage,
};
use super::session_view::{
    SessionListReply, SessionListRequest, SessionShowReply, SessionShowRequest,
};
use super::status::{ProcessStatus, StatusRequest};
use super::subjects::{self, IdError};
use super::tool::{
    JobCancelReply, JobCancelRequest, ToolCallRequest, ToolCallResult, ToolMetrics, ToolsCatalog,
    ToolsChanged,
};

/// A body that answers a request.
pub trait Reply: Serialize + DeserializeOwned + Send + 'static {
    /// The reply envelope's kind.
    const KIND: &'static str;
}

/// A body sent as a request.
pub trait Request: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The request envelope's kind.
    const KIND: &'static str;
    /// What answers it.
    type Reply: Reply;
    /// The subject an envelope of this request goes to.
    fn subject(envelope: &Envelope<Self>) -> Result<String, IdError>;
    /// [`Self::subject`] for a sender with `identity` on the bus: messages to a session go
    /// to `hermes.in.<agent>.<session>.<identity>` ([`subjects::inbound_from`]); every other
    /// request to its one subject.
    fn subject_from(envelope: &Envelope<Self>, identity: Option<&str>) -> Result<String, IdError> {
        let _ = identity;
        Self::subject(envelope)
    }
}

/// `hermes.tools.list`: the tool catalog.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ToolsListRequest;

/// `hermes.tools.metrics`: the executor's counters.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ToolsMetricsRequest;

/// `hermes.mcp.catalog`: the mounted servers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct McpCatalogRequest;

macro_rules! reply {
    ($($body:ty => $kind:expr),* $(,)?) => {
        $(impl Reply for $body { const KIND: &'static str = $kind; })*
    };
}

/// Requests on a fixed subject.
macro_rules! request {
    ($($body:ty => $subject:expr, $kind:expr, $reply:ty);* $(;)?) => {
        $(impl Request for $body {
            const KIND: &'static str = $kind;
            type Reply = $reply;
            fn subject(_: &Envelope<Self>) -> Result<String, IdError> {
                Ok($subject.to_string())
            }
        })*
    };
}

reply! {
    Accepted => kinds::ACCEPTED,
    ConfirmationAccepted => kinds::CONFIRMATION_ACCEPTED,
    CancelAccepted => kinds::CANCEL_ACCEPTED,
    PlanReply => kinds::PLAN_REPLY,
    SummariseReply => kinds::SUMMARISE_REPLY,
    SessionSearchReply => kinds::SESSIONS_FOUND,
    SessionListReply => kinds::SESSIONS_LISTED,
    SessionShowReply => kinds::SESSIONS_SHOWN,
    ToolCallResult => kinds::TOOL_RESULT,
    ToolsCatalog => kinds::TOOLS_CATALOG,
    ToolMetrics => kinds::TOOLS_METRICS,
    McpCallReply => kinds::MCP_RESULT,
    McpCatalog => kinds::MCP_CATALOG,
    McpReadReply => kinds::MCP_READ_RESULT,
    McpPromptReply => kinds::MCP_PROMPT_RESULT,
    McpTaskReply => kinds::MCP_TASK_STATE,
    JobCancelReply => kinds::JOB_CANCEL_RESULT,
    McpAuditReply => kinds::MCP_AUDIT,
    RecallReply => kinds::RECALL_REPLY,
    MemoryWriteReply => kinds::MEMORY_WRITTEN,
    MemoryListReply => kinds::MEMORY_LISTED,
}

request! {
    PlanRequest => subjects::PLAN, kinds::PLAN_REQUEST, PlanReply;
    SummariseRequest => subjects::SUMMARISE, kinds::SUMMARISE_REQUEST, SummariseReply;
    SessionSearchRequest => subjects::SESSIONS_SEARCH, kinds::SESSIONS_SEARCH, SessionSearchReply;
    SessionListRequest => subjects::SESSIONS_LIST, kinds::SESSIONS_LIST, SessionListReply;
    SessionShowRequest => subjects::SESSIONS_SHOW, kinds::SESSIONS_SHOW, SessionShowReply;
    ToolsListRequest => subjects::TOOLS_LIST, kinds::TOOLS_LIST, ToolsCatalog;
    ToolsMetricsRequest => subjects::TOOLS_METRICS, kinds::TOOLS_METRICS_REQUEST, ToolMetrics;
    McpCallRequest => subjects::MCP_CALL, kinds::MCP_CALL, McpCallReply;
    McpCatalogRequest => subjects::MCP_CATALOG, kinds::MCP_CATALOG_REQUEST, McpCatalog;
    McpReadRequest => subjects::MCP_READ, kinds::MCP_READ, McpReadReply;
    McpPromptRequest => subjects::MCP_PROMPT, kinds::MCP_PROMPT, McpPromptReply;
    McpTaskRequest => subjects::MCP_TASK, kinds::MCP_TASK, McpTaskReply;
    JobCancelRequest => subjects::JOBS_CANCEL, kinds::JOB_CANCEL, JobCancelReply;
    McpAuditRequest => subjects::MCP_AUDIT, kinds::MCP_AUDIT_REQUEST, McpAuditReply;
    RecallRequest => subjects::MEMORY_RECALL, kinds::RECALL_REQUEST, RecallReply;
    MemoryWriteRequest => subjects::MEMORY_WRITE, kinds::MEMORY_WRITE, MemoryWriteReply;
    MemoryForgetRequest => subjects::MEMORY_FORGET, kinds::MEMORY_FORGET, MemoryWriteReply;
    MemoryListRequest => subjects::MEMORY_LIST, kinds::MEMORY_LIST, MemoryListReply;
}

impl Request for ToolCallRequest {
    const KIND: &'static str = kinds::TOOL_CALL;
    type Reply = ToolCallResult;
    fn subject(envelope: &Envelope<Self>) -> Result<String, IdError> {
        subjects::tool(&envelope.body.name)
    }
}

/// The session the envelope is addressed to (`for_session`), sent by `identity`.
fn inbound_of<B>(envelope: &Envelope<B>, identity: Option<&str>) -> Result<String, IdError> {
    subjects::inbound_from(
        envelope.agent.as_deref().unwrap_or_default(),
        envelope.session.as_deref().unwrap_or_default(),
        identity,
    )
}

impl Request for UserMessage {
    const KIND: &'static str = kinds::USER_MESSAGE;
    type Reply = Accepted;
    fn subject(envelope: &Envelope<Self>) -> Result<String, IdError> {
        inbound_of(envelope, None)
    }
    fn subject_from(envelope: &Envelope<Self>, identity: Option<&str>) -> Result<String, IdError> {
        inbound_of(envelope, identity)
    }
}

impl Request for Confirmation {
    const KIND: &'static str = kinds::CONFIRMATION;
    type Reply = ConfirmationAccepted;
    fn subject(envelope: &Envelope<Self>) -> Result<String, IdError> {
        inbound_of(envelope, None)
    }
    fn subject_from(envelope: &Envelope<Self>, identity: Option<&str>) -> Result<String, IdError> {
        inbound_of(envelope, identity)
    }
}

impl Request for Cancel {
    const KIND: &'static str = kinds::CANCEL;
    type Reply = CancelAccepted;
    fn subject(envelope: &Envelope<Self>) -> Result<String, IdError> {
        inbound_of(envelope, None)
    }
    fn subject_from(envelope: &Envelope<Self>, identity: Option<&str>) -> Result<String, IdError> {
        inbound_of(envelope, identity)
    }
}

/// A body that is published rather than requested (events, catalog changes, queue jobs), with
/// the one kind its envelopes carry.
pub trait Event: Serialize + DeserializeOwned + Send + 'static {
    const KIND: &'static str;
}

macro_rules! event {
    ($($body:ty => $kind:expr),* $(,)?) => {
        $(impl Event for $body { const KIND: &'static str = $kind; })*
    };
}

event! {
    TurnEvent => kinds::TURN_EVENT,
    TurnEvents => kinds::TURN_EVENTS,
    McpCatalog => kinds::MCP_CATALOG,
    ToolsChanged => kinds::TOOLS_CHANGED,
    ExtractJob => kinds::EXTRACT_JOB,
    AuditEntry => kinds::AUDIT_EVENT,
    StatusRequest => kinds::STATUS_REQUEST,
    ProcessStatus => kinds::PROCESS_STATUS,
}

/// An `error` envelope's body answers any request that failed.
impl Reply for ErrorBody {
    const KIND: &'static str = ERROR_KIND;
}

impl<B: Event> Envelope<B> {
    /// A new envelope of `B`'s kind.
    pub fn event(body: B) -> Self {
        Envelope::new(B::KIND, body)
    }

    /// Decode a payload that must be a `B` event.
    pub fn decode_event(payload: &[u8], max_bytes: usize) -> Result<Self, EnvelopeError> {
        Envelope::decode_typed(payload, max_bytes, B::KIND)
    }
}

/// The kind of an envelope, read from the keys before it, to pick the body type before
/// decoding it: reading stops at `kind`, so the body is not scanned when `kind` comes before
/// it (as Hermes writes envelopes). `None` when the payload is not a JSON object with a string
/// `kind` among keys it can read.
pub(crate) fn peek_kind(payload: &[u8]) -> Option<String> {
    struct Peek<'k>(&'k mut Option<String>);
    impl<'de> serde::de::Visitor<'de> for Peek<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an envelope")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "kind" {
                    *self.0 = Some(map.next_value::<String>()?);
                    return Ok(());
                }
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut kind = None;
    let mut reader = serde_json::Deserializer::from_slice(payload);
    // Leaving at `kind` leaves the rest of the object unread, which the reader reports as an
    // error once the visitor is done: the kind was read all the same.
    let _ = serde::Deserializer::deserialize_map(&mut reader, Peek(&mut kind));
    kind
}

impl Envelope<TurnEvents> {
    /// The events a message on `hermes.out.<agent>.<session>.<reader>` carries, in order: the
    /// several of a `turn.events` envelope, or the one of a `turn.event` envelope (its id and
    /// addressing kept). One pass over the body either way.
    pub fn decode_events(payload: &[u8], max_bytes: usize) -> Result<Self, EnvelopeError> {
        let single = peek_kind(payload).is_some_and(|kind| kind == kinds::TURN_EVENT);
        if !single {
            return Envelope::decode_event(payload, max_bytes);
        }
        let one = Envelope::<TurnEvent>::decode_event(payload, max_bytes)?;
        Ok(Envelope {
            v: one.v,
            id: one.id,
            kind: one.kind,
            ts: one.ts,
            trace_id: one.trace_id,
            agent: one.agent,
            session: one.session,
            user: one.user,
            body: TurnEvents {
                events: vec![one.body],
            },
        })
    }

    /// Each event in an envelope of its own, addressed and timed like this one.
    pub fn into_each(self) -> Vec<Envelope<TurnEvent>> {
        let Envelope {
            v,
            id,
            kind: _,
            ts,
            trace_id,
            agent,
            session,
            user,
            body,
        } = self;
        body.events
            .into_iter()
            .map(|event| Envelope {
                v,
                id: id.clone(),
                kind: kinds::TURN_EVENT.to_string(),
                ts,
                trace_id: trace_id.clone(),
                agent: agent.clone(),
                session: session.clone(),
                user: user.clone(),
                body: event,
            })
            .collect()
    }
}

impl<B: Reply> Envelope<B> {
    /// Decode a payload that must be a `B` reply; an `error` envelope is an error that says
    /// what the service answered.
    pub fn decode_reply(payload: &[u8], max_bytes: usize) -> Result<Self, EnvelopeError> {
        Envelope::decode_typed(payload, max_bytes, B::KIND)
    }
}

impl<R: Request> Envelope<R> {
    /// A new request envelope of `R`'s kind.
    pub fn request(body: R) -> Self {
        Envelope::new(R::KIND, body)
    }

    /// Decode a payload that must be an `R` request.
    pub fn decode_request(payload: &[u8], max_bytes: usize) -> Result<Self, EnvelopeError> {
        Envelope::decode_typed(payload, max_bytes, R::KIND)
    }

    /// The reply to this request, in its trace and addressed like it.
    pub fn reply(&self, body: R::Reply) -> Envelope<R::Reply> {
        let mut reply = Envelope::new(<R::Reply as Reply>::KIND, body).in_trace(&self.trace_id);
        reply.agent.clone_from(&self.agent);
        reply.session.clone_from(&self.session);
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::error_envelope;

    #[test]
    fn request_names_its_subject_and_reply_kind() {
        let env = Envelope::request(RecallRequest::default());
        assert_eq!(env.kind, kinds::RECALL_REQUEST);
        assert_eq!(
            RecallRequest::subject(&env).unwrap(),
            subjects::MEMORY_RECALL
        );
        let reply = env.reply(RecallReply::default());
        assert_eq!(reply.kind, kinds::RECALL_REPLY);
        assert_eq!(reply.trace_id, env.trace_id);
    }

    #[test]
    fn tool_call_goes_to_its_tools_subject() {
        let env = Envelope::request(ToolCallRequest {
            name: "add".into(),
            ..ToolCallRequest::default()
        });
        assert_eq!(ToolCallRequest::subject(&env).unwrap(), "hermes.tool.add");
        let bad = Envelope::request(ToolCallRequest {
            name: "a.b".into(),
            ..ToolCallRequest::default()
        });
        assert!(ToolCallRequest::subject(&bad).is_err());
    }

    #[test]
    fn decode_request_refuses_another_kind_and_reports_errors() {
        let env = Envelope::request(ToolsListRequest);
        let bytes = env.encode().unwrap();
        assert!(Envelope::<ToolsListRequest>::decode_request(&bytes, 1024).is_ok());
        assert!(Envelope::<ToolsMetricsRequest>::decode_request(&bytes, 1024).is_err());
        let err = error_envelope("nope", "bad").encode().unwrap();
        let e = Envelope::<ToolsListRequest>::decode_request(&err, 1024).unwrap_err();
        assert!(e.to_string().contains("nope: bad"), "{e}");
    }

    #[test]
    fn decode_events_reads_one_event_or_several_in_order() {
        let started = TurnEvent::TurnStarted {
            turn_id: "t".into(),
            message_id: "m".into(),
        };
        let answer = TurnEvent::Answer {
            turn_id: "t".into(),
            text: "4".into(),
        };
        let one = Envelope::event(answer.clone()).for_session("a", "s", Some("u"));
        let read = Envelope::decode_events(&one.encode().unwrap(), 1024).unwrap();
        assert_eq!(read.body.events, std::slice::from_ref(&answer));
        assert_eq!((read.id, read.session), (one.id, Some("s".to_string())));
        let both = Envelope::event(TurnEvents {
            events: vec![started.clone(), answer.clone()],
        });
        assert_eq!(both.kind, kinds::TURN_EVENTS);
        let read = Envelope::decode_events(&both.encode().unwrap(), 1024).unwrap();
        assert_eq!(read.body.events, [started, answer]);
        let other = Envelope::request(ToolsListRequest).encode().unwrap();
        assert!(Envelope::decode_events(&other, 1024).is_err());
    }

    #[test]
    fn an_envelope_whose_kind_follows_its_body_is_read_all_the_same() {
        // Another publisher may order the keys as it likes.
        let one = br#"{"body":{"type":"answer","turn_id":"t","text":"4"},"v":1,"id":"e1","ts":"2026-12-07T10:00:00Z","trace_id":"x","kind":"turn.event"}"#;
        let read = Envelope::decode_events(one, 1024).unwrap();
        assert_eq!(
            read.body.events,
            [TurnEvent::Answer {
                turn_id: "t".into(),
                text: "4".into()
            }]
        );
    }

    #[test]
    fn the_kind_is_peeked_without_reading_past_it() {
        // What follows `kind` is never read: not even a body that is no JSON at all.
        assert_eq!(
            peek_kind(br#"{"v":1,"id":"e","kind":"turn.events","body":!!!"#).as_deref(),
            Some(kinds::TURN_EVENTS)
        );
        assert_eq!(
            peek_kind(br#"{"v":1,"body":{"kind":"inner"},"kind":"turn.event"}"#).as_deref(),
            Some(kinds::TURN_EVENT)
        );
        assert_eq!(peek_kind(br#"{"v":1,"kind":7}"#), None);
        assert_eq!(peek_kind(br#"{"v":1}"#), None);
        assert_eq!(peek_kind(b"[1,2]"), None);
        assert_eq!(peek_kind(b"not json"), None);
    }
}
