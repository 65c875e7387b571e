//! What kind of failure a model call ended in, as a closed set: the planner answers with its
//! [`ModelErrorKind::code`], the turn carries it to its `error` event, and the metrics count
//! by it — so a client can tell a refused key from an over-long prompt without reading text.

use serde::{Deserialize, Serialize};

use super::LlmError;

/// The kind of an [`LlmError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The endpoint could not be reached.
    Unreachable,
    /// HTTP 429 after the retries.
    RateLimited,
    /// Another HTTP failure (5xx, an unexpected 4xx) after the retries.
    ServerError,
    /// The key was refused (401/403).
    Auth,
    /// The model does not exist at the endpoint (404).
    ModelNotFound,
    /// The request does not fit the model's context window.
    ContextLength,
    /// The reply could not be understood.
    BadResponse,
    /// No answer in time.
    Timeout,
    /// The replay scenario has no rule for the request.
    NoReplayRule,
    /// The model's configuration is invalid.
    Config,
}

impl ModelErrorKind {
    /// Every kind, for tables and tests.
    pub const ALL: [ModelErrorKind; 10] = [
        Self::Unreachable,
        Self::RateLimited,
        Self::ServerError,
        Self::Auth,
        Self::ModelNotFound,
        Self::ContextLength,
        Self::BadResponse,
        Self::Timeout,
        Self::NoReplayRule,
        Self::Config,
    ];

    /// The stable code a turn's `error` event, the planner's error answer and the metrics
    /// carry.
    pub fn code(self) -> &'static str {
        match self {
            Self::Unreachable => "model_unreachable",
            Self::RateLimited => "model_rate_limited",
            Self::ServerError => "model_server_error",
            Self::Auth => "model_auth",
            Self::ModelNotFound => "model_not_found",
            Self::ContextLength => "context_length",
            Self::BadResponse => "model_bad_response",
            Self::Timeout => "model_timeout",
            Self::NoReplayRule => "model_no_replay_rule",
            Self::Config => "model_config",
        }
    }

    /// The kind a [`code`](Self::code) names; `None` for any other code.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }
}

impl LlmError {
    /// What kind of failure this is. A primary and fallback that both failed are the
    /// primary's kind: that is the model the configuration meant to use.
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            LlmError::Unreachable { .. } => ModelErrorKind::Unreachable,
            LlmError::Http { status: 429, .. } => ModelErrorKind::RateLimited,
            LlmError::Http { .. } => ModelErrorKind::ServerError,
            LlmError::Auth { .. } => ModelErrorKind::Auth,
            LlmError::ModelNotFound { .. } => ModelErrorKind::ModelNotFound,
            LlmError::ContextLength { .. } => ModelErrorKind::ContextLength,
            LlmError::BadResponse(_) => ModelErrorKind::BadResponse,
            LlmError::Timeout(_) => ModelErrorKind::Timeout,
            LlmError::NoReplayRule(_) => ModelErrorKind::NoReplayRule,
            LlmError::Config(_) => ModelErrorKind::Config,
            LlmError::BothFailed { primary, .. } => primary.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_code_and_codes_are_distinct() {
        let codes: std::collections::HashSet<_> =
            ModelErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), ModelErrorKind::ALL.len());
        for kind in ModelErrorKind::ALL {
            assert_eq!(ModelErrorKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(ModelErrorKind::from_code("plan_failed"), None);
    }

    #[test]
    fn rate_limit_is_its_own_kind_and_both_failed_is_the_primarys() {
        let http = |status| LlmError::Http {
            status,
            attempts: 3,
            body: String::new(),
        };
        assert_eq!(http(429).kind(), ModelErrorKind::RateLimited);
        assert_eq!(http(500).kind(), ModelErrorKind::ServerError);
        let both = LlmError::BothFailed {
            primary: Box::new(LlmError::Auth {
                status: 401,
                url: "u".into(),
                hint: "h".into(),
                body: String::new(),
            }),
            fallback: Box::new(http(503)),
        };
        assert_eq!(both.kind(), ModelErrorKind::Auth);
    }
}
