//! The versioned JSON envelope every bus payload travels in, and its checks.
//!
//! `{v, id, kind, ts, trace_id, agent, session, user, body}`. Decoding checks the size, the
//! version and every id before anything else looks at the payload, so a malformed or hostile
//! message becomes an [`EnvelopeError`] (answered with an error reply), never a crashed actor.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::subjects::{check_id, IdError};

/// The envelope version this build writes and reads.
pub const ENVELOPE_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Envelope<B = Value> {
    pub v: u32,
    pub id: String,
    pub kind: String,
    #[serde(with = "crate::timestamp")]
    #[schemars(with = "chrono::DateTime<chrono::Utc>")]
    pub ts: DateTime<Utc>,
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub body: B,
}

/// Why a payload was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    #[error("envelope of {size} bytes is over the limit of {max} bytes: send less, or a reference to the data")]
    TooLarge { size: usize, max: usize },
    #[error("payload is not a valid envelope: {0}; expected JSON {{v, id, kind, ts, trace_id, agent?, session?, user?, body}}")]
    Malformed(String),
    #[error("envelope version {found} is not supported (this build speaks v{ENVELOPE_VERSION}); upgrade the older side")]
    Version { found: u32 },
    #[error(transparent)]
    Id(#[from] IdError),
    #[error("envelope kind `{found}` was not expected here (expected `{expected}`)")]
    Kind { found: String, expected: String },
    #[error("envelope body is not a valid `{kind}`: {reason}")]
    Body { kind: String, reason: String },
    /// The service answered with an `error` envelope instead of a `kind`.
    #[error("envelope body is not a valid `{kind}`: the service answered with an error: {code}: {message}")]
    Answered {
        kind: String,
        code: String,
        message: String,
    },
    #[error("cannot encode envelope: {0}")]
    Encode(String),
}

/// The body of an `error` envelope: a stable code and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

pub const ERROR_KIND: &str = "error";

impl<B> Envelope<B> {
    /// A new envelope with a fresh id and trace id.
    pub fn new(kind: impl Into<String>, body: B) -> Self {
        let id = uuid::Uuid::now_v7().to_string();
        Self {
            v: ENVELOPE_VERSION,
            trace_id: id.clone(),
            id,
            kind: kind.into(),
            ts: Utc::now(),
            agent: None,
            session: None,
            user: None,
            body,
        }
    }

    /// Address it to a session.
    pub fn for_session(mut self, agent: &str, session: &str, user: Option<&str>) -> Self {
        self.agent = Some(agent.to_string());
        self.session = Some(session.to_string());
        self.user = user.map(str::to_string);
        self
    }

    /// Continue an existing trace.
    pub fn in_trace(mut self, trace_id: &str) -> Self {
        self.trace_id = trace_id.to_string();
        self
    }
}

impl<B: Serialize> Envelope<B> {
    pub fn encode(&self) -> Result<Bytes, EnvelopeError> {
        serde_json::to_vec(self)
            .map(Bytes::from)
            .map_err(|e| EnvelopeError::Encode(e.to_string()))
    }
}

impl Envelope<Value> {
    /// Parse and check a payload: size, JSON shape, version, ids.
    pub fn decode(payload: &[u8], max_bytes: usize) -> Result<Self, EnvelopeError> {
        if payload.len() > max_bytes {
            return Err(EnvelopeError::TooLarge {
                size: payload.len(),
                max: max_bytes,
            });
        }
        let env: Envelope<Value> =
            serde_json::from_slice(payload).map_err(|e| EnvelopeError::Malformed(e.to_string()))?;
        env.check()?;
        Ok(env)
    }

    /// Turn an `error` envelope into `Err`, anything else into its typed body.
    pub fn into_typed<B: DeserializeOwned>(self, kind: &str) -> Result<Envelope<B>, EnvelopeError> {
        if self.kind == ERROR_KIND && kind != ERROR_KIND {
            return Err(
                match serde_json::from_value::<ErrorBody>(self.body.clone()) {
                    Ok(e) => EnvelopeError::Answered {
                        kind: kind.to_string(),
                        code: e.code,
                        message: e.message,
                    },
                    Err(_) => EnvelopeError::Body {
                        kind: kind.to_string(),
                        reason: format!("the service answered with an error: {}", self.body),
                    },
                },
            );
        }
        if self.kind != kind {
            return Err(EnvelopeError::Kind {
                found: self.kind,
                expected: kind.to_string(),
            });
        }
        let body = serde_json::from_value(self.body).map_err(|e| EnvelopeError::Body {
            kind: kind.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Envelope {
            v: self.v,
            id: self.id,
            kind: self.kind,
            ts: self.ts,
            trace_id: self.trace_id,
            agent: self.agent,
            session: self.session,
            user: self.user,
            body,
        })
    }
}

impl<B> Envelope<B> {
    /// The version and every id are acceptable.
    fn check(&self) -> Result<(), EnvelopeError> {
        if self.v != ENVELOPE_VERSION {
            return Err(EnvelopeError::Version { found: self.v });
        }
        check_id("envelope", &self.id)?;
        check_id("trace", &self.trace_id)?;
        if let Some(a) = &self.agent {
            check_id("agent", a)?;
        }
        if let Some(s) = &self.session {
            check_id("session", s)?;
        }
        if let Some(u) = &self.user {
            check_id("user", u)?;
        }
        Ok(())
    }
}

impl<B: DeserializeOwned> Envelope<B> {
    /// Decode a payload of `kind` straight into its typed body (one pass over the bytes); an
    /// `error` envelope, another kind or a bad body are reported as by [`Envelope::into_typed`].
    pub(crate) fn decode_typed(
        payload: &[u8],
        max_bytes: usize,
        kind: &str,
    ) -> Result<Self, EnvelopeError> {
        if payload.len() > max_bytes {
            return Err(EnvelopeError::TooLarge {
                size: payload.len(),
                max: max_bytes,
            });
        }
        match serde_json::from_slice::<Envelope<B>>(payload) {
            Ok(env) if env.kind == kind => {
                env.check()?;
                Ok(env)
            }
            _ => Envelope::<Value>::decode(payload, max_bytes)?.into_typed(kind),
        }
    }
}

/// An `error` envelope answering a bad request.
pub fn error_envelope(code: &str, message: impl Into<String>) -> Envelope<ErrorBody> {
    Envelope::new(
        ERROR_KIND,
        ErrorBody {
            code: code.to_string(),
            message: message.into(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips() {
        let e = Envelope::new("user.message", serde_json::json!({"text": "hi"})).for_session(
            "a",
            "s",
            Some("u"),
        );
        let bytes = e.encode().unwrap();
        let back = Envelope::decode(&bytes, 1024).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn malformed_oversized_and_bad_ids_are_refused() {
        assert!(matches!(
            Envelope::decode(b"{not json", 1024),
            Err(EnvelopeError::Malformed(_))
        ));
        assert!(matches!(
            Envelope::decode(&[b' '; 2000], 1024),
            Err(EnvelopeError::TooLarge { .. })
        ));
        let mut e = Envelope::new("k", Value::Null);
        e.session = Some("a.b".into());
        let bytes = e.encode().unwrap();
        assert!(matches!(
            Envelope::decode(&bytes, 1024),
            Err(EnvelopeError::Id(_))
        ));
        let mut e = Envelope::new("k", Value::Null);
        e.v = 9;
        assert!(matches!(
            Envelope::decode(&e.encode().unwrap(), 1024),
            Err(EnvelopeError::Version { found: 9 })
        ));
    }

    #[test]
    fn error_envelope_becomes_err_when_typed() {
        let bytes = error_envelope("bad", "nope").encode().unwrap();
        let r = Envelope::<Value>::decode_typed(&bytes, 1024, "x");
        assert!(r.unwrap_err().to_string().contains("bad: nope"));
    }
}
