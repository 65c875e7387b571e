//! The memory side of Hermes' MCP server: the arguments of `memory_write`, `memory_search` and
//! `memory_forget`, and the requests they become on `hermes.memory.write` / `.recall` /
//! `.forget` / `.list` (the memory service answers; this file never opens the store).

use std::time::Duration;

use rmcp::schemars;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::bus::rpc::{self, RpcError};
use crate::bus::Bus;
use crate::memory::{MemoryKind, MemoryUpdate, UpdateOp};
use crate::protocol::envelope::Envelope;
use crate::protocol::memory::Memory as MemoryRecord;
use crate::protocol::request::Request;
use crate::protocol::{
    MemoryForgetRequest, MemoryListRequest, MemoryWriteReply, MemoryWriteRequest, RecallReply,
    RecallRequest,
};

use super::auth::DEFAULT_NAMESPACE;

/// Arguments of `memory_write`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// What to remember, as one self-contained sentence (e.g. "Prefers Sony headphones").
    pub content: String,
    /// Stable slot name, e.g. "budget" or "headphone_brand": writing the same key again updates
    /// the memory instead of adding one. Derived from the content when omitted.
    #[serde(default)]
    pub key: Option<String>,
    /// "fact" (default), "preference", "constraint" or "event".
    #[serde(default)]
    pub kind: Option<String>,
    /// 0 to 1; default 0.5.
    #[serde(default)]
    pub importance: Option<f32>,
    /// Days until it is forgotten; omit for a long-term memory.
    #[serde(default)]
    pub expiry_days: Option<u32>,
    #[serde(default)]
    pub topics: Vec<String>,
    /// Whose memory (default: the caller's own user).
    #[serde(default)]
    pub user: Option<String>,
    /// Memory namespace (default "default"); shared namespaces need a role that grants them.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Arguments of `memory_search`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for, in words (Chinese or English).
    pub query: String,
    /// At most this many memories (1–5, default 5).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Whose memories (default: the caller's own user).
    #[serde(default)]
    pub user: Option<String>,
    /// Only this namespace (required to search another user's memories).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Arguments of `memory_forget`: the memory's `id` (from memory_search) or its `key`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub key: Option<String>,
    /// Whose memory (default: the caller's own user).
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Arguments of a memory tool that cannot make a request; each message says what to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryArgsError {
    #[error("invalid arguments for `{tool}`: {reason}; see the tool's input schema")]
    Invalid { tool: String, reason: String },
    #[error("`content` is empty; say what to remember")]
    EmptyContent,
    #[error("unknown kind `{0}`; use fact, preference, constraint or event")]
    UnknownKind(String),
}

/// Arguments in `Value` form, parsed with a message the caller can act on.
pub fn parse<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, MemoryArgsError> {
    serde_json::from_value(arguments).map_err(|e| MemoryArgsError::Invalid {
        tool: tool.to_owned(),
        reason: e.to_string(),
    })
}

/// `memory_write` as a [`MemoryWriteRequest`] for `user`.
pub fn write_request(
    args: WriteArgs,
    user: &str,
    namespace: &str,
    source: &str,
) -> Result<MemoryWriteRequest, MemoryArgsError> {
    if args.content.trim().is_empty() {
        return Err(MemoryArgsError::EmptyContent);
    }
    let kind_text = args.kind.as_deref().unwrap_or("fact");
    let kind = MemoryKind::parse(kind_text)
        .ok_or_else(|| MemoryArgsError::UnknownKind(kind_text.to_owned()))?;
    let key = args.key.unwrap_or_else(|| derived_key(&args.content));
    Ok(MemoryWriteRequest {
        user: user.to_owned(),
        namespace: namespace.to_owned(),
        update: MemoryUpdate {
            op: UpdateOp::Add,
            kind,
            key,
            content: args.content,
            // The store clamps it into 0..=1 (memory::merge::clamp_unit).
            importance: args.importance.unwrap_or(0.5),
            expiry_days: args.expiry_days,
            topics: args.topics,
        },
        source: source.to_owned(),
    })
}

/// A key from the first words of the content: `prefers_sony_headphones`.
fn derived_key(content: &str) -> String {
    let words: Vec<String> = content
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(5)
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        "note".to_owned()
    } else {
        words.join("_")
    }
}

/// The scheme of memory resources.
pub const URI_SCHEME: &str = "memory://";

/// The `memory://<user>/<id>` URI of a record.
pub fn uri(record: &MemoryRecord) -> String {
    format!("memory://{}/{}", record.user, record.id)
}

/// `memory://<user>/<id>` → (user, id).
pub fn parse_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix("memory://")?;
    let (user, id) = rest.split_once('/')?;
    (!user.is_empty() && !id.is_empty() && !id.contains('/'))
        .then(|| (user.to_owned(), id.to_owned()))
}

/// What a search returns for one record.
pub fn hit_json(record: &MemoryRecord, score: f64) -> Value {
    json!({
        "id": record.id, "uri": uri(record), "user": record.user, "namespace": record.namespace,
        "kind": record.kind, "key": record.key, "content": record.content,
        "updated_at": record.updated_at, "score": score,
    })
}

/// Why the memory service gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum MemoryServiceError {
    /// Nothing answered (no memory service, a bus timeout): the server's fault, not the
    /// caller's.
    #[error("the memory service did not answer on {subject}: {reason}; is a memory-extractor running on this bus?")]
    Unreachable { subject: String, reason: String },
    /// The service answered, refusing the request.
    #[error("the memory service refused: {0}")]
    Refused(String),
}

/// Why a `memory://` resource could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    #[error("`{0}` is not a memory URI; use memory://<user>/<id> from resources/list")]
    NotAMemoryUri(String),
    #[error("no memory at `{0}`; it may have been forgotten")]
    NotFound(String),
    #[error(transparent)]
    Service(#[from] MemoryServiceError),
}

impl ReadFailure {
    /// The MCP error that fits: a malformed URI or a missing record is invalid params with
    /// the URI in `data` (SEP-2164: -32602, not the older -32002), a memory service that does
    /// not answer is an internal error (retry later) — never "not found".
    pub fn to_error_data(&self) -> rmcp::ErrorData {
        let message = self.to_string();
        match self {
            ReadFailure::NotAMemoryUri(uri) | ReadFailure::NotFound(uri) => {
                rmcp::ErrorData::invalid_params(message, Some(serde_json::json!({"uri": uri})))
            }
            ReadFailure::Service(_) => rmcp::ErrorData::internal_error(message, None),
        }
    }
}

/// Talks to the memory service over the bus.
pub struct MemoryClient<'a> {
    pub bus: &'a dyn Bus,
    pub timeout: Duration,
}

impl MemoryClient<'_> {
    pub async fn write(
        &self,
        request: MemoryWriteRequest,
    ) -> Result<MemoryWriteReply, MemoryServiceError> {
        self.call(request).await
    }

    pub async fn forget(
        &self,
        request: MemoryForgetRequest,
    ) -> Result<MemoryWriteReply, MemoryServiceError> {
        self.call(request).await
    }

    pub async fn recall(&self, request: RecallRequest) -> Result<RecallReply, MemoryServiceError> {
        self.call(request).await
    }

    pub async fn list(
        &self,
        request: MemoryListRequest,
    ) -> Result<Vec<MemoryRecord>, MemoryServiceError> {
        Ok(self.call(request).await?.records)
    }

    /// One typed request to the memory service.
    async fn call<R: Request>(&self, body: R) -> Result<R::Reply, MemoryServiceError> {
        let envelope = Envelope::request(body);
        let subject =
            R::subject(&envelope).map_err(|e| MemoryServiceError::Refused(e.to_string()))?;
        match rpc::request(self.bus, envelope, self.timeout).await {
            Ok(reply) => Ok(reply.body),
            Err(RpcError::Bus(e)) => Err(MemoryServiceError::Unreachable {
                subject,
                reason: e.to_string(),
            }),
            Err(e) => Err(MemoryServiceError::Refused(e.to_string())),
        }
    }
}

/// The namespace of a request (`default` when none).
pub fn namespace_or_default(namespace: Option<&str>) -> &str {
    namespace
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_NAMESPACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_memory_is_invalid_params_naming_its_uri_and_a_silent_service_an_internal_error() {
        let silent = ReadFailure::Service(MemoryServiceError::Unreachable {
            subject: "hermes.memory.list".into(),
            reason: "timeout".into(),
        });
        assert_eq!(
            silent.to_error_data().code,
            rmcp::model::ErrorCode::INTERNAL_ERROR
        );
        let missing = ReadFailure::NotFound("memory://a/m-1".into()).to_error_data();
        assert_eq!(missing.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(
            missing.data,
            Some(serde_json::json!({"uri": "memory://a/m-1"}))
        );
        let malformed = ReadFailure::NotAMemoryUri("file:///x".into());
        assert_eq!(
            malformed.to_error_data().code,
            rmcp::model::ErrorCode::INVALID_PARAMS
        );
    }

    #[test]
    fn keys_are_derived_from_the_first_words() {
        assert_eq!(
            derived_key("Prefers Sony headphones, not Bose!"),
            "prefers_sony_headphones_not_bose"
        );
        assert_eq!(derived_key("..."), "note");
    }

    #[test]
    fn memory_uris_round_trip_and_bad_ones_are_rejected() {
        assert_eq!(
            parse_uri("memory://alice/m-1"),
            Some(("alice".into(), "m-1".into()))
        );
        assert_eq!(parse_uri("memory://alice/"), None);
        assert_eq!(parse_uri("memory://alice/a/b"), None);
        assert_eq!(parse_uri("file:///x"), None);
    }

    #[test]
    fn write_request_checks_kind_and_content() {
        let args = |kind: &str, content: &str| WriteArgs {
            content: content.into(),
            key: None,
            kind: Some(kind.into()),
            importance: Some(3.0),
            expiry_days: None,
            topics: vec![],
            user: None,
            namespace: None,
        };
        let request = write_request(
            args("preference", "Likes tea"),
            "alice",
            "default",
            "mcp:alice",
        )
        .unwrap();
        assert_eq!(request.update.kind, MemoryKind::Preference);
        assert_eq!(request.update.key, "likes_tea");
        assert_eq!(
            request.update.importance, 3.0,
            "the store clamps, not the MCP side"
        );
        assert_eq!(
            write_request(args("mood", "x"), "a", "default", "s").unwrap_err(),
            MemoryArgsError::UnknownKind("mood".into())
        );
        assert_eq!(
            write_request(args("fact", " "), "a", "default", "s").unwrap_err(),
            MemoryArgsError::EmptyContent
        );
    }
}
