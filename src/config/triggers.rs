//! `[[triggers]]`: NATS subjects whose events start agent turns. Each names a subject pattern
//! (any subject outside `hermes.*`), the agent, and templates that build the session id, the
//! user and the prompt from the event's subject tokens and JSON payload fields:
//!
//! - `{subject}` the whole subject, `{subject.N}` its N-th token (0 is the first);
//! - `{payload}` the whole payload, `{payload.a.b}` a field (objects by key, arrays by index);
//! - `{{` and `}}` are literal braces.
//!
//! Templates are parsed when the configuration loads, so a typo is refused at start; an event
//! that lacks a field is refused (and audited) when it arrives.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Config, ConfigError};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerConfig {
    /// Names the trigger in logs, audit records and deduplication ids.
    pub name: String,
    /// The NATS subject pattern (`*` one token, `>` the rest).
    pub subject: String,
    /// The agent whose session handles the event.
    pub agent: String,
    /// Template of the session id (after rendering: letters, digits, `_`, `-`).
    pub session: String,
    /// Template of the user the turn works for.
    pub user: String,
    /// Template of the message the agent receives.
    pub prompt: String,
    /// Template of a payload field that identifies the event (e.g. `{payload.event_id}`): an
    /// event whose id was handled before is skipped. None: the `Nats-Msg-Id` header, when
    /// the publisher sets one.
    #[serde(default)]
    pub dedupe: Option<String>,
    /// Template of a subject on which the turn's answer is published.
    #[serde(default)]
    pub reply_subject: Option<String>,
    /// The publisher (NATS identity) that may publish on `subject`: the user an event names
    /// must be one it may speak for (`[bus.publishers]`). Required with `bus.bind_user =
    /// "subject"`.
    #[serde(default)]
    pub publisher: Option<String>,
}

/// A parsed template: literal text and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    /// `{subject}` (None) or `{subject.N}`.
    Subject(Option<usize>),
    /// `{payload}` (empty path) or `{payload.a.b}`.
    Payload(Vec<String>),
}

/// Why an event does not fit a template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("the subject has no token {0} (tokens count from 0)")]
    NoToken(usize),
    #[error("the payload is not JSON, but the template reads `{{payload…}}`")]
    NotJson,
    #[error("the payload has no field `{0}`")]
    NoField(String),
}

/// Why a template does not parse; each says what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    #[error("a lone `}}` (write `}}}}` for a brace)")]
    LoneBrace,
    #[error("`{{{0}` is not closed with `}}`")]
    Unclosed(String),
    #[error("`{{{0}}}`: a subject token is a number from 0")]
    TokenNotNumber(String),
    #[error("`{{{0}}}`: write {{subject.N}}")]
    TokenPath(String),
    #[error("`{{{0}}}` has an empty field name")]
    EmptyField(String),
    #[error("unknown placeholder `{{{0}}}`; use {{subject}}, {{subject.N}}, {{payload}} or {{payload.field}}")]
    Unknown(String),
}

impl Template {
    /// Parse `text`; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => return Err(TemplateError::LoneBrace),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err(TemplateError::Unclosed(name)),
                        }
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(placeholder(name.trim())?);
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Self { parts })
    }

    /// Does the template read the payload?
    pub fn reads_payload(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Payload(_)))
    }

    /// Fill the template from an event: its subject and its payload (`None` when not JSON).
    pub fn render(&self, subject: &str, payload: Option<&Value>) -> Result<String, RenderError> {
        let tokens: Vec<&str> = subject.split('.').collect();
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Subject(None) => out.push_str(subject),
                Part::Subject(Some(i)) => {
                    out.push_str(tokens.get(*i).ok_or(RenderError::NoToken(*i))?)
                }
                Part::Payload(path) => {
                    let mut value = payload.ok_or(RenderError::NotJson)?;
                    for key in path {
                        let next = match value {
                            Value::Object(map) => map.get(key),
                            Value::Array(items) => {
                                key.parse::<usize>().ok().and_then(|i| items.get(i))
                            }
                            _ => None,
                        };
                        value = next.ok_or_else(|| RenderError::NoField(path.join(".")))?;
                    }
                    match value {
                        Value::String(s) => out.push_str(s),
                        Value::Null => return Err(RenderError::NoField(path.join("."))),
                        other => out.push_str(&other.to_string()),
                    }
                }
            }
        }
        Ok(out)
    }
}

fn placeholder(name: &str) -> Result<Part, TemplateError> {
    let mut segments = name.split('.');
    match segments.next() {
        Some("subject") => match segments.next() {
            None => Ok(Part::Subject(None)),
            Some(n) => {
                let index = n
                    .parse::<usize>()
                    .map_err(|_| TemplateError::TokenNotNumber(name.to_string()))?;
                if segments.next().is_some() {
                    return Err(TemplateError::TokenPath(name.to_string()));
                }
                Ok(Part::Subject(Some(index)))
            }
        },
        Some("payload") => {
            let path: Vec<String> = segments.map(str::to_string).collect();
            if path.iter().any(String::is_empty) {
                return Err(TemplateError::EmptyField(name.to_string()));
            }
            Ok(Part::Payload(path))
        }
        _ => Err(TemplateError::Unknown(name.to_string())),
    }
}

/// Every trigger is well formed and names a configured agent.
pub(super) fn check(config: &Config) -> Result<(), ConfigError> {
    let mut names = std::collections::HashSet::new();
    for (i, trigger) in config.triggers.iter().enumerate() {
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            key: format!("triggers[{i}].{field}"),
            message,
        };
        crate::protocol::subjects::check_id("trigger", &trigger.name)
            .map_err(|e| invalid("name", e.to_string()))?;
        if !names.insert(trigger.name.as_str()) {
            return Err(invalid("name", format!("`{}` is used twice", trigger.name)));
        }
        crate::bus::pattern::validate(&trigger.subject, true)
            .map_err(|e| invalid("subject", e.to_string()))?;
        if trigger.subject == ">" || trigger.subject.split('.').next() == Some("hermes") {
            return Err(invalid(
                "subject",
                "trigger subjects live outside hermes.* (those are Hermes' own); a user \
                 message goes to hermes.in.<agent>.<session> directly"
                    .into(),
            ));
        }
        match &trigger.publisher {
            Some(publisher) => crate::protocol::subjects::check_id("publisher", publisher)
                .map_err(|e| invalid("publisher", e.to_string()))?,
            None if config.bus.bind_user == super::publishers::BindUser::Subject => {
                return Err(invalid(
                    "publisher",
                    "bus.bind_user = \"subject\" binds users to publishers, and a trigger's \
                     user comes from its event: name the NATS identity that publishes its \
                     subject (publisher = \"…\"), whose [bus.publishers] users the event's \
                     user must be one of"
                        .into(),
                ));
            }
            None => {}
        }
        if !config.agents.contains_key(&trigger.agent) {
            return Err(invalid(
                "agent",
                format!(
                    "no agent `{}`; agents: {}",
                    trigger.agent,
                    config.agents.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let templates = [
            ("session", Some(&trigger.session)),
            ("user", Some(&trigger.user)),
            ("prompt", Some(&trigger.prompt)),
            ("dedupe", trigger.dedupe.as_ref()),
            ("reply_subject", trigger.reply_subject.as_ref()),
        ];
        for (field, text) in templates {
            if let Some(text) = text {
                Template::parse(text).map_err(|e| invalid(field, e.to_string()))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_fill_from_subject_tokens_and_payload_fields() {
        let t = Template::parse(
            "order-{subject.2} for {payload.customer.id} ({payload.items.0}) {{ok}}",
        )
        .unwrap();
        let payload = json!({"customer": {"id": "u-1"}, "items": ["headphones"]});
        let out = t.render("shop.orders.A1.delayed", Some(&payload)).unwrap();
        assert_eq!(out, "order-A1 for u-1 (headphones) {ok}");
        assert!(t.reads_payload());
    }

    #[test]
    fn an_event_without_a_field_says_which() {
        let t = Template::parse("{payload.user}").unwrap();
        assert_eq!(
            t.render("a.b", Some(&json!({"usr": "x"}))),
            Err(RenderError::NoField("user".into()))
        );
        assert_eq!(t.render("a.b", None), Err(RenderError::NotJson));
        let t = Template::parse("{subject.5}").unwrap();
        assert_eq!(t.render("a.b", None), Err(RenderError::NoToken(5)));
    }

    #[test]
    fn malformed_templates_are_refused_at_load() {
        assert_eq!(
            Template::parse("{payload.user"),
            Err(TemplateError::Unclosed("payload.user".into()))
        );
        assert_eq!(
            Template::parse("{who}"),
            Err(TemplateError::Unknown("who".into()))
        );
        assert_eq!(Template::parse("a } b"), Err(TemplateError::LoneBrace));
        assert_eq!(
            Template::parse("{subject.x}"),
            Err(TemplateError::TokenNotNumber("subject.x".into()))
        );
        assert!(TemplateError::Unclosed("payload.user".into())
            .to_string()
            .contains("not closed"));
    }

    #[test]
    fn a_trigger_on_hermes_subjects_or_an_unknown_agent_is_refused() {
        let base = super::super::DEFAULT_CONFIG;
        let with = |t: &str| Config::parse(&format!("{base}\n{t}"), "test");
        let ok = "[[triggers]]\nname = \"d\"\nsubject = \"shop.orders.*.delayed\"\nagent = \"assistant\"\nsession = \"o-{subject.2}\"\nuser = \"{payload.user}\"\nprompt = \"late: {payload}\"\n";
        assert!(with(ok).is_ok());
        let err = with(&ok.replace("shop.orders", "hermes.in")).unwrap_err();
        assert!(err.to_string().contains("outside hermes"), "{err}");
        let err = with(&ok.replace("\"assistant\"", "\"nobody\"")).unwrap_err();
        assert!(err.to_string().contains("triggers[0].agent"), "{err}");
    }
}
