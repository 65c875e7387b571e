//! What a failed HTTP exchange with a model endpoint means: which failures are worth another
//! attempt (429, 5xx including Anthropic's 529 `overloaded_error`, a dropped connection) and
//! how long to wait first (`Retry-After` / `retry-after-ms`, else the rate-limit reset headers
//! of a 429, else exponential backoff with jitter), and the [`LlmError`] each final failure
//! becomes: the key (401/403), the model name (404), the context window (a 400 that says the
//! prompt is too long, with the token counts when the server gives them), or plain HTTP.

use std::sync::OnceLock;
use std::time::Duration;

use regex::Regex;

use super::text::{quote, QUOTE_CHARS};
use crate::llm::LlmError;

/// First backoff step; each retry doubles it, up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(500);
/// Longest wait between two attempts, whatever the server asks for.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One failed attempt.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The server answered with a non-2xx status.
    Status {
        status: u16,
        body: String,
        retry_after: Option<Duration>,
    },
    /// Anything else, already classified.
    Other(LlmError),
}

impl Failure {
    /// Whether another attempt may succeed.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Self::Status { status, .. } => *status == 429 || *status >= 500,
            Self::Other(LlmError::Unreachable { .. }) => true,
            Self::Other(_) => false,
        }
    }

    /// How long to wait before attempt number `retry` (1 for the first retry).
    pub(crate) fn delay(&self, retry: u32, jitter: f64) -> Duration {
        if let Self::Status {
            retry_after: Some(wait),
            ..
        } = self
        {
            return (*wait).min(MAX_BACKOFF);
        }
        backoff(retry, jitter)
    }
}

/// `BASE · 2^(retry-1)`, capped, scaled by `jitter` in `0.5..=1.0` (spreads clients that failed
/// together).
pub(crate) fn backoff(retry: u32, jitter: f64) -> Duration {
    let exp = BASE_BACKOFF.saturating_mul(1u32 << retry.saturating_sub(1).min(16));
    exp.min(MAX_BACKOFF).mul_f64(jitter.clamp(0.5, 1.0))
}

/// A jitter factor in `0.5..=1.0` from the process's random hasher keys.
pub(crate) fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u8(0);
    0.5 + (hasher.finish() % 1000) as f64 / 2000.0
}

/// How long a failed reply asks the client to wait: `retry-after-ms`, `Retry-After`, else
/// the latest reset time of an exhausted Anthropic rate limit (`anthropic-ratelimit-*-reset`
/// where `…-remaining` is 0).
pub(crate) fn retry_wait(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    if let Some(wait) = header("retry-after").and_then(parse_retry_after) {
        return Some(wait);
    }
    ["requests", "tokens", "input-tokens", "output-tokens"]
        .iter()
        .filter(|limit| header(&format!("anthropic-ratelimit-{limit}-remaining")) == Some("0"))
        .filter_map(|limit| header(&format!("anthropic-ratelimit-{limit}-reset")))
        .filter_map(|reset| chrono::DateTime::parse_from_rfc3339(reset.trim()).ok())
        .map(|when| {
            (when.with_timezone(&chrono::Utc) - chrono::Utc::now())
                .to_std()
                .unwrap_or(Duration::ZERO)
        })
        .max()
}

/// `Retry-After` as seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// Who is calling, for the final error's wording.
pub(crate) struct Caller<'a> {
    pub url: &'a str,
    pub model: &'a str,
    /// The environment variable the key came from, if any.
    pub key_variable: Option<&'a str>,
    /// The provider's usual key variable, named when no key was sent.
    pub default_key_variable: &'a str,
    /// Attempts made.
    pub attempts: u32,
}

/// The error a final failure becomes.
pub(crate) fn into_error(failure: Failure, caller: &Caller<'_>) -> LlmError {
    let (status, body) = match failure {
        Failure::Other(error) => return error,
        Failure::Status { status, body, .. } => (status, body),
    };
    let quoted = quote(body.trim(), QUOTE_CHARS);
    match status {
        401 | 403 => LlmError::Auth {
            status,
            url: caller.url.to_string(),
            hint: match caller.key_variable {
                Some(var) => format!("check the key in ${var}"),
                None => format!(
                    "no key was sent: export {}=<your key> or set `api_key_env` in \
                     [models.<role>] for {}",
                    caller.default_key_variable, caller.url
                ),
            },
            body: quoted,
        },
        404 => LlmError::ModelNotFound {
            model: caller.model.to_string(),
            url: caller.url.to_string(),
            body: quoted,
        },
        400 | 413 if is_context_length(&body) => {
            let (limit, requested) = context_counts(&body);
            LlmError::ContextLength {
                limit,
                requested,
                body: quoted,
            }
        }
        _ => LlmError::Http {
            status,
            attempts: caller.attempts,
            body: quoted,
        },
    }
}

/// A context-window error from a server's `message` (counts read from it when given), quoting
/// `body`.
pub(crate) fn context_error(message: &str, body: &str) -> LlmError {
    let (limit, requested) = context_counts(message);
    LlmError::ContextLength {
        limit,
        requested,
        body: quote(body, QUOTE_CHARS),
    }
}

fn is_context_length(body: &str) -> bool {
    let lower = body.to_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "exceeds the available context size",
        "too many tokens",
        "prompt is too long",
        "exceeds the context window",
        "input exceeds the context",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// `(limit, requested)` token counts when the server's message gives them.
fn context_counts(body: &str) -> (Option<u64>, Option<u64>) {
    static LIMIT: OnceLock<Option<Regex>> = OnceLock::new();
    static REQUESTED: OnceLock<Option<Regex>> = OnceLock::new();
    let limit = LIMIT.get_or_init(|| {
        Regex::new(
            r"(?i)(?:maximum context length is|context size \(|context window of|limit of) ?(\d+)",
        )
        .ok()
    });
    let requested = REQUESTED.get_or_init(|| {
        Regex::new(r"(?i)(?:resulted in|requested|you requested|prompt has|request \() ?(\d+)").ok()
    });
    // Anthropic: "prompt is too long: 208000 tokens > 200000 maximum".
    static ANTHROPIC: OnceLock<Option<Regex>> = OnceLock::new();
    let anthropic = ANTHROPIC.get_or_init(|| Regex::new(r"(\d+) tokens > (\d+) maximum").ok());
    if let Some(c) = anthropic.as_ref().and_then(|re| re.captures(body)) {
        let n = |i| c.get(i).and_then(|m| m.as_str().parse().ok());
        return (n(2), n(1));
    }
    let number = |re: &Option<Regex>| {
        re.as_ref()
            .and_then(|re| re.captures(body))
            .and_then(|c| c.get(1))
            .and_then(|m| m.as_str().parse().ok())
    };
    (number(limit), number(requested))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller() -> Caller<'static> {
        Caller {
            url: "http://h/v1/chat/completions",
            model: "m",
            key_variable: Some("OPENAI_API_KEY"),
            default_key_variable: "OPENAI_API_KEY",
            attempts: 4,
        }
    }

    fn status(status: u16, body: &str) -> Failure {
        Failure::Status {
            status,
            body: body.into(),
            retry_after: None,
        }
    }

    #[test]
    fn rate_limits_and_server_errors_are_transient_client_errors_are_not() {
        assert!(status(429, "").is_transient());
        assert!(status(503, "").is_transient());
        assert!(!status(400, "").is_transient());
        assert!(!status(401, "").is_transient());
        assert!(status(529, "overloaded_error").is_transient());
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        assert_eq!(backoff(1, 1.0), Duration::from_millis(500));
        assert_eq!(backoff(3, 1.0), Duration::from_millis(2000));
        assert_eq!(backoff(3, 0.5), Duration::from_millis(1000));
        assert_eq!(backoff(30, 1.0), MAX_BACKOFF);
        let j = jitter();
        assert!((0.5..=1.0).contains(&j), "{j}");
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.25"), Some(Duration::from_millis(250)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
        let f = Failure::Status {
            status: 429,
            body: String::new(),
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(f.delay(1, 0.5), Duration::from_secs(3));
    }

    #[test]
    fn rate_limit_headers_say_how_long_to_wait() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let mut headers = HeaderMap::new();
        assert_eq!(retry_wait(&headers), None);
        let reset = (chrono::Utc::now() + chrono::Duration::seconds(30)).to_rfc3339();
        headers.insert(
            "anthropic-ratelimit-tokens-remaining",
            HeaderValue::from_static("0"),
        );
        headers.insert(
            "anthropic-ratelimit-tokens-reset",
            HeaderValue::from_str(&reset).unwrap(),
        );
        let wait = retry_wait(&headers).unwrap();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_wait(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_wait(&headers), Some(Duration::from_millis(250)));
    }

    #[test]
    fn each_status_gets_its_own_error() {
        let e = into_error(status(401, "bad key"), &caller()).to_string();
        assert!(
            e.contains("API key") && e.contains("$OPENAI_API_KEY"),
            "{e}"
        );
        let e = into_error(status(404, "no such model"), &caller()).to_string();
        assert!(
            e.contains("model `m`") && e.contains("hermes doctor"),
            "{e}"
        );
        let body = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","code":"context_length_exceeded"}}"#;
        let e = into_error(status(400, body), &caller());
        assert!(
            matches!(
                e,
                LlmError::ContextLength {
                    limit: Some(8192),
                    requested: Some(9000),
                    ..
                }
            ),
            "{e:?}"
        );
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208000 tokens > 200000 maximum"}}"#;
        let e = into_error(status(400, body), &caller());
        assert!(
            matches!(
                e,
                LlmError::ContextLength {
                    limit: Some(200000),
                    requested: Some(208000),
                    ..
                }
            ),
            "{e:?}"
        );
        let e = into_error(status(500, "boom"), &caller()).to_string();
        assert!(e.contains("500") && e.contains("4 attempts"), "{e}");
    }
}
