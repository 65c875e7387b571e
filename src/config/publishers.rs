//! Who may speak for which user: `[bus] bind_user` and `[bus.publishers.<name>]`.
//!
//! A message sent to `hermes.in.<agent>.<session>.<publisher>` comes from the NATS user whose
//! permissions allow that last token — a nats-server configured like config/nats/hermes.conf
//! grants each publisher only its own — so the subject names the sender and cannot be forged.
//! The router then holds the envelope's `user` to what that publisher may claim:
//!
//! - `[bus.publishers.<name>] users = [...]`: exact user ids, `prefix*`, or `*` (any user);
//!   without an entry a publisher may speak only for the user of its own name (one person,
//!   one NATS user);
//! - `internal = true` marks Hermes' own services (the session service's delegations and
//!   triggers, the operators' CLI): only they may set a message's `delegation` or `answer_to`,
//!   which make the engine write to another session's turn or publish on a subject of the
//!   sender's choice.
//!
//! Outputs are bound the same way ([`reader_of`]): a session's events go to
//! `hermes.out.<agent>.<session>.<reader>`, where `<reader>` is the publisher that speaks for
//! the session's user by name or prefix (`shop` for `cust-42`), else the user itself (a person
//! with her own NATS user). hermes.conf lets each publisher subscribe to its own token only,
//! so a person reads her own sessions and a publisher the sessions of its users.
//!
//! `bind_user = "subject"` refuses the short form `hermes.in.<agent>.<session>` (which names
//! nobody), and makes every `[[triggers]]` name the `publisher` of its subject: a trigger's
//! user comes from the event, so it is held to that publisher's users. With `"off"` (the
//! default, for a development bus without permissions) the short form is accepted as before;
//! a subject that names a publisher is checked either way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::protocol::subjects::check_id;

/// Whether every inbound message must name its publisher.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BindUser {
    /// Both subject forms are accepted (a development bus without permissions).
    #[default]
    Off,
    /// Only `hermes.in.<agent>.<session>.<publisher>`; triggers name their publisher.
    Subject,
}

/// `[bus.publishers.<name>]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PublisherConfig {
    /// The users it may send as: ids, `prefix*` or `*`. None: only the user named like it.
    pub users: Option<Vec<String>>,
    /// One of Hermes' own services: may set `delegation` and `answer_to`.
    pub internal: bool,
}

/// Why a publisher may not send a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error(
        "this deployment binds every message's user to its publisher (bus.bind_user = \
         \"subject\"), and `{subject}` names none: publish on \
         hermes.in.<agent>.<session>.<your NATS identity> (config/nats/hermes.conf grants each \
         publisher its own)"
    )]
    Unbound { subject: String },
    #[error(
        "publisher `{publisher}` may not send as user `{user}`; it may send as {allowed} \
         ([bus.publishers.{publisher}] users): use one of those users, or have the operator \
         allow this one"
    )]
    UserNotAllowed {
        publisher: String,
        user: String,
        allowed: String,
    },
    #[error(
        "publisher `{publisher}` may not set `{field}`: only Hermes' own services do \
         ([bus.publishers.{publisher}] internal = true); leave it out and read the answer on \
         hermes.out.<agent>.<session>.<your NATS identity>"
    )]
    InternalField {
        publisher: String,
        field: &'static str,
    },
}

impl BindError {
    /// The error code of the refusal.
    pub fn code(&self) -> &'static str {
        match self {
            BindError::Unbound { .. } => "unbound_user",
            BindError::UserNotAllowed { .. } => "user_not_allowed",
            BindError::InternalField { .. } => "internal_field",
        }
    }
}

/// What one publisher may do.
pub struct Publisher<'a> {
    name: &'a str,
    config: Option<&'a PublisherConfig>,
}

impl<'a> Publisher<'a> {
    /// `name` as `publishers` describe it (the default when they do not).
    pub fn of(publishers: &'a BTreeMap<String, PublisherConfig>, name: &'a str) -> Self {
        Self {
            name,
            config: publishers.get(name),
        }
    }

    fn users(&self) -> &[String] {
        self.config
            .and_then(|c| c.users.as_deref())
            .unwrap_or_default()
    }

    fn default_users(&self) -> bool {
        self.config.is_none_or(|c| c.users.is_none())
    }

    /// Whether it may send as `user`.
    pub fn may_speak_for(&self, user: &str) -> bool {
        if self.default_users() {
            return user == self.name;
        }
        self.users().iter().any(|pattern| matches(pattern, user))
    }

    /// [`Self::may_speak_for`], as the refusal when it may not.
    pub fn check_user(&self, user: &str) -> Result<(), BindError> {
        if self.may_speak_for(user) {
            return Ok(());
        }
        let allowed = if self.default_users() {
            format!("`{}` only (no users listed)", self.name)
        } else if self.users().is_empty() {
            "no user".into()
        } else {
            self.users()
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(BindError::UserNotAllowed {
            publisher: self.name.to_string(),
            user: user.chars().take(80).collect(),
            allowed,
        })
    }

    /// A message setting `field` (`delegation`, `answer_to`) is refused unless it is internal.
    pub fn check_internal(&self, field: &'static str) -> Result<(), BindError> {
        if self.config.is_some_and(|c| c.internal) {
            return Ok(());
        }
        Err(BindError::InternalField {
            publisher: self.name.to_string(),
            field,
        })
    }
}

/// Why a session service sending as `identity` would see its own messages refused: it sends
/// delegations, cancels and trigger events to sessions for any user, and delegations carry a
/// `delegation`, so its publisher entry must allow every user and be internal.
pub fn service_entry_missing(
    publishers: &BTreeMap<String, PublisherConfig>,
    identity: &str,
) -> Option<String> {
    let fits = publishers.get(identity).is_some_and(|p| {
        p.internal && p.users.as_ref().is_some_and(|u| u.iter().any(|u| u == "*"))
    });
    (!fits).then(|| {
        format!(
            "this session service sends delegations, cancels and trigger events to sessions as \
             `{identity}`, for any user: add [bus.publishers.{identity}] users = [\"*\"] and \
             internal = true, or they are refused (config/nats/hermes.toml has it)"
        )
    })
}

/// Who may read the events of `user`'s sessions: the publisher whose `users` name `user`
/// exactly, else the one with the longest matching `prefix*` (a catch-all `*` — Hermes' own
/// services, operators — reads everything anyway and never makes a reader), else `user`
/// itself (a person speaking as herself). A message that named no user:
/// [`subjects::NO_READER`](crate::protocol::subjects::NO_READER).
pub fn reader_of(publishers: &BTreeMap<String, PublisherConfig>, user: Option<&str>) -> String {
    let Some(user) = user else {
        return crate::protocol::subjects::NO_READER.to_string();
    };
    // (exact match, prefix length, name): the greatest wins; the name breaks ties stably.
    let mut best: Option<(bool, usize, &str)> = None;
    for (name, publisher) in publishers {
        for pattern in publisher.users.iter().flatten() {
            let rank = match pattern.strip_suffix('*') {
                Some("") => continue,
                Some(prefix) if user.starts_with(prefix) => (false, prefix.len(), name.as_str()),
                Some(_) => continue,
                None if pattern == user => (true, pattern.len(), name.as_str()),
                None => continue,
            };
            if best.is_none_or(|b| (rank.0, rank.1) > (b.0, b.1)) {
                best = Some(rank);
            }
        }
    }
    best.map_or_else(|| user.to_string(), |(_, _, name)| name.to_string())
}

/// `*` is any user, `prefix*` any user starting so, anything else that user exactly.
fn matches(pattern: &str, user: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => user.starts_with(prefix),
        None => pattern == user,
    }
}

/// Publisher names are subject tokens, and user patterns are ids with an optional final `*`.
pub(super) fn check(publishers: &BTreeMap<String, PublisherConfig>) -> Result<(), ConfigError> {
    for (name, publisher) in publishers {
        let invalid = |message: String| ConfigError::Invalid {
            key: format!("bus.publishers.{name}"),
            message,
        };
        check_id("publisher", name).map_err(|e| invalid(e.to_string()))?;
        for pattern in publisher.users.iter().flatten() {
            let id = pattern.strip_suffix('*').unwrap_or(pattern);
            if id.is_empty() {
                continue;
            }
            check_id("user", id).map_err(|e| {
                invalid(format!(
                    "users: `{pattern}`: {e}; a user pattern is an id, `prefix*` or `*`"
                ))
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publishers() -> BTreeMap<String, PublisherConfig> {
        let mut map = BTreeMap::new();
        map.insert(
            "shop".to_string(),
            PublisherConfig {
                users: Some(vec!["cust-*".into(), "ops".into()]),
                internal: false,
            },
        );
        map.insert(
            "hermes-session".to_string(),
            PublisherConfig {
                users: Some(vec!["*".into()]),
                internal: true,
            },
        );
        map.insert("mute".to_string(), PublisherConfig::default());
        map
    }

    #[test]
    fn a_sessions_events_are_read_by_the_publisher_of_its_user_or_the_user_alone() {
        let mut map = publishers();
        map.insert(
            "vip-desk".to_string(),
            PublisherConfig {
                users: Some(vec!["cust-vip-*".into()]),
                internal: false,
            },
        );
        assert_eq!(reader_of(&map, Some("cust-42")), "shop");
        assert_eq!(
            reader_of(&map, Some("cust-vip-1")),
            "vip-desk",
            "longest prefix"
        );
        assert_eq!(reader_of(&map, Some("ops")), "shop", "an exact user");
        // Only catch-alls speak for her: she reads her own.
        assert_eq!(reader_of(&map, Some("alice")), "alice");
        assert_eq!(reader_of(&BTreeMap::new(), Some("u-1")), "u-1");
        assert_eq!(reader_of(&map, None), "_");
    }

    #[test]
    fn a_publisher_speaks_for_its_listed_users_or_else_for_itself() {
        let map = publishers();
        let shop = Publisher::of(&map, "shop");
        assert!(shop.may_speak_for("cust-42"));
        assert!(shop.may_speak_for("ops"));
        assert!(!shop.may_speak_for("opsx"));
        let err = shop.check_user("u-1001").unwrap_err();
        assert_eq!(err.code(), "user_not_allowed");
        let text = err.to_string();
        assert!(
            text.contains("`u-1001`") && text.contains("`cust-*`"),
            "{text}"
        );
        assert!(text.contains("[bus.publishers.shop]"), "{text}");
        assert!(Publisher::of(&map, "hermes-session").may_speak_for("anyone"));
        // No entry, or an entry without users: the user of the publisher's own name only.
        let alice = Publisher::of(&map, "alice");
        assert!(alice.may_speak_for("alice"));
        assert!(!alice.may_speak_for("bob"));
        assert!(alice
            .check_user("bob")
            .unwrap_err()
            .to_string()
            .contains("`alice` only"));
        assert!(Publisher::of(&map, "mute").may_speak_for("mute"));
    }

    #[test]
    fn only_internal_publishers_set_delegation_or_answer_to() {
        let map = publishers();
        assert!(Publisher::of(&map, "hermes-session")
            .check_internal("answer_to")
            .is_ok());
        let err = Publisher::of(&map, "shop")
            .check_internal("delegation")
            .unwrap_err();
        assert_eq!(err.code(), "internal_field");
        assert!(err.to_string().contains("`delegation`"));
        assert!(Publisher::of(&map, "alice")
            .check_internal("answer_to")
            .is_err());
    }

    #[test]
    fn a_session_service_needs_an_internal_entry_for_every_user() {
        let map = publishers();
        assert_eq!(service_entry_missing(&map, "hermes-session"), None);
        let text = service_entry_missing(&map, "shop").unwrap();
        assert!(text.contains("[bus.publishers.shop]"), "{text}");
        assert!(service_entry_missing(&map, "nobody").is_some());
    }

    #[test]
    fn names_and_patterns_are_checked_at_load() {
        let mut map = publishers();
        assert!(check(&map).is_ok());
        map.insert(
            "bad.name".into(),
            PublisherConfig {
                users: None,
                internal: false,
            },
        );
        assert!(check(&map).is_err());
        let mut map = publishers();
        map.insert(
            "p".into(),
            PublisherConfig {
                users: Some(vec!["a b*".into()]),
                internal: false,
            },
        );
        let err = check(&map).unwrap_err().to_string();
        assert!(err.contains("bus.publishers.p"), "{err}");
    }
}
