//! Memory on the wire: recall requests and hits, direct writes and forgets, listing, the
//! extraction job a finished turn queues, and what changed. The sled record
//! (`MemoryRecord` in the memory module) is a type of its own; [`Memory`] is its wire form.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::chat::ChatMessage;

/// The namespace of a user's own memories: what extraction writes and what a write or forget
/// that names no namespace uses.
pub const DEFAULT_NAMESPACE: &str = "default";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    Preference,
    Fact,
    Constraint,
    Event,
}

impl MemoryKind {
    /// `preference`, `fact`, `constraint` or `event` (any case); `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(text.to_lowercase())).ok()
    }
}

/// Where a memory came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Source {
    pub session: String,
    pub message_id: String,
    /// When the user said it (not when it was stored): newer source time wins a conflict.
    #[serde(with = "crate::timestamp")]
    #[schemars(with = "chrono::DateTime<chrono::Utc>")]
    pub source_time: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UpdateOp {
    Add,
    Update,
    Delete,
    Noop,
}

/// One entry of the extractor's `{memory_updates: [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryUpdate {
    pub op: UpdateOp,
    pub kind: MemoryKind,
    pub key: String,
    #[serde(default)]
    pub content: String,
    #[serde(default = "default_importance")]
    pub importance: f32,
    /// Days until it expires; none for long-term memories.
    #[serde(default)]
    pub expiry_days: Option<u32>,
    #[serde(default)]
    pub topics: Vec<String>,
}

fn default_importance() -> f32 {
    0.5
}

/// A memory as it travels (recall hits, `hermes.memory.list`): the stored record's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Memory {
    pub id: String,
    pub user: String,
    pub namespace: String,
    pub kind: MemoryKind,
    /// Stable slot name, e.g. `budget` or `headphone_brand`: same key → update, not a new record.
    pub key: String,
    pub content: String,
    pub importance: f32,
    pub confidence: f32,
    #[serde(default)]
    pub topics: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    pub source: Source,
    pub version: u32,
    /// Earlier contents, oldest first.
    #[serde(default)]
    pub history: Vec<String>,
    /// When the sweep demoted this expired record (importance halved, out of recall); the
    /// next sweep removes it unless an open task references it. A new write clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demoted_at: Option<DateTime<Utc>>,
}

/// A recalled memory with its score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallHit {
    pub record: Memory,
    pub score: f64,
}

/// A user's memories, newest first, or the one with `id`, on `hermes.memory.list`
/// (read-only). Live records only, unless `include_inactive`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryListRequest {
    pub user: String,
    /// Only this namespace (all when none).
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    /// Also expired and demoted records (`hermes memory ls --all`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_inactive: bool,
    /// Records to skip: the previous page's `next_offset`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offset: usize,
    /// Ask for a page: at most this many records, fewer when they would not fit in one
    /// reply. None: every record at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryListReply {
    pub records: Vec<Memory>,
    /// Records that match, on every page.
    #[serde(default)]
    pub total: usize,
    /// Where the next page starts (a paged request only); none when this page is the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// Ask memory for what it knows about the current message. Besides the user, recall can be
/// narrowed to a namespace and to kinds / topics (a record passes with any listed one).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallRequest {
    pub user: String,
    pub query: String,
    pub limit: usize,
    #[serde(default)]
    pub namespace: Option<String>,
    /// Several namespaces at once (an agent's `memory.read`); with `namespace`, either admits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub kinds: Vec<MemoryKind>,
    #[serde(default)]
    pub topics: Vec<String>,
    /// The task (turn id) that will rely on the recalled memories: they are held against the
    /// expiry sweep until the turn's extraction job releases them.
    #[serde(default)]
    pub task: Option<String>,
    /// A score threshold of the caller's own instead of `memory.min_score` (`hermes memory
    /// search --no-threshold` sends 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallReply {
    pub hits: Vec<RecallHit>,
    /// The embedder whose vectors were fused with BM25; none: BM25 alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder: Option<String>,
}

/// A finished turn to mine for memories (durable queue `hermes.memory.extract`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExtractJob {
    /// The namespace memories mined from this turn go into (the agent's `memory.write`).
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// False when the agent writes no memories: the job only releases the turn's holds.
    #[serde(default = "yes")]
    pub write: bool,
    pub agent: String,
    pub session: String,
    pub user: String,
    pub turn_id: String,
    pub message_id: String,
    pub source_time: chrono::DateTime<chrono::Utc>,
    pub transcript: Vec<ChatMessage>,
}

/// What the memory store did with one update (`memory::MemoryStore::apply`), as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AppliedOp {
    Added,
    Updated,
    Deleted,
    /// The update's source time is older than the stored record's: nothing changed.
    IgnoredStale,
    Noop,
}

impl AppliedOp {
    /// `added`, `updated`, `deleted`, `ignored_stale` or `noop`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Updated => "updated",
            Self::Deleted => "deleted",
            Self::IgnoredStale => "ignored_stale",
            Self::Noop => "noop",
        }
    }
}

/// One memory write, as reported after extraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryChange {
    pub op: AppliedOp,
    pub key: String,
    #[serde(default)]
    pub content: String,
}

/// Write one memory for a user directly (the MCP server's `memory_write`, other agents), on
/// `hermes.memory.write`. Merged by the same rules as extracted memories.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryWriteRequest {
    pub user: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub update: MemoryUpdate,
    /// Who wrote it (session id, agent name or MCP principal), for the record's source.
    pub source: String,
}

/// Forget memories on `hermes.memory.forget`: by record id, or by key.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryForgetRequest {
    pub user: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub key: Option<String>,
}

/// The answer to a write or forget: what changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryWriteReply {
    pub changes: Vec<MemoryChange>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn yes() -> bool {
    true
}

fn default_namespace() -> String {
    DEFAULT_NAMESPACE.into()
}
