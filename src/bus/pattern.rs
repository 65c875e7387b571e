//! NATS subject matching (`*` one token, `>` the remaining tokens) and the subject, queue-group
//! and payload checks both bus backends apply before they touch the wire.

use super::BusError;

/// Does `pattern` have a wildcard token (`*` or `>`)?
pub fn has_wildcard(pattern: &str) -> bool {
    pattern.split('.').any(|t| t == "*" || t == ">")
}

/// Does `subject` match `pattern`?
pub fn matches(pattern: &str, subject: &str) -> bool {
    // Byte tokens: this runs for every wildcard listener on every publish.
    let mut pats = tokens(pattern);
    let mut subs = tokens(subject);
    loop {
        match (pats.next(), subs.next()) {
            (Some(b">"), Some(_)) => return true,
            (Some(b"*"), Some(_)) => {}
            (Some(p), Some(s)) if p == s => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// The dot-separated tokens of a subject, as bytes (`.` is ASCII, so this splits UTF-8 text
/// where `str::split` would).
fn tokens(subject: &str) -> impl Iterator<Item = &[u8]> {
    subject.as_bytes().split(|b| *b == b'.')
}

/// What is wrong with a subject or pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubjectError {
    #[error("subject is empty")]
    Empty,
    #[error("subject contains whitespace")]
    Whitespace,
    #[error("subject has an empty token (`..` or a leading/trailing dot)")]
    EmptyToken,
    #[error("wildcards are not allowed when publishing")]
    WildcardInPublish,
    #[error("`>` must be the last token")]
    TailNotLast,
    #[error("a wildcard must be a whole token")]
    PartialWildcard,
}

/// Check a pattern for subscribing (wildcards allowed) or a subject for publishing (not).
pub fn validate(subject: &str, wildcards_allowed: bool) -> Result<(), SubjectError> {
    if subject.is_empty() {
        return Err(SubjectError::Empty);
    }
    let spaced = if subject.is_ascii() {
        // ASCII whitespace is ASCII control or ' ' (vertical tab included).
        subject.bytes().any(|b| b == b' ' || b.is_ascii_control())
    } else {
        subject.chars().any(|c| c.is_whitespace() || c.is_control())
    };
    if spaced {
        return Err(SubjectError::Whitespace);
    }
    let mut tokens = tokens(subject).peekable();
    while let Some(t) = tokens.next() {
        if t.is_empty() {
            return Err(SubjectError::EmptyToken);
        }
        let wild = t == b"*" || t == b">";
        if wild && !wildcards_allowed {
            return Err(SubjectError::WildcardInPublish);
        }
        if t == b">" && tokens.peek().is_some() {
            return Err(SubjectError::TailNotLast);
        }
        if !wild && t.iter().any(|b| *b == b'*' || *b == b'>') {
            return Err(SubjectError::PartialWildcard);
        }
    }
    Ok(())
}

/// [`validate`] as a [`BusError::InvalidSubject`].
pub fn check_subject(subject: &str, wildcards_allowed: bool) -> Result<(), BusError> {
    validate(subject, wildcards_allowed).map_err(|reason| BusError::InvalidSubject {
        subject: subject.to_string(),
        reason: format!("{reason}; use dot-separated tokens like `hermes.tool.search`"),
    })
}

/// A queue group name must be a non-empty word without whitespace or wildcards.
pub fn check_group(group: &str) -> Result<(), BusError> {
    let bad = group.is_empty()
        || group
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '*' || c == '>');
    if bad {
        return Err(BusError::InvalidSubject {
            subject: group.to_string(),
            reason: "a queue group name must be non-empty, without whitespace or wildcards".into(),
        });
    }
    Ok(())
}

/// Reject a payload over `max` bytes.
pub fn check_payload(size: usize, max: usize) -> Result<(), BusError> {
    if size > max {
        return Err(BusError::PayloadTooLarge { size, max });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_like_nats() {
        assert!(matches("a.*.c", "a.b.c"));
        assert!(!matches("a.*.c", "a.b.d"));
        assert!(matches("a.>", "a.b.c"));
        assert!(!matches("a.>", "a"));
        assert!(matches("a.b", "a.b"));
        assert!(!matches("a.b", "a.b.c"));
        assert!(!matches("a.*", "a.b.c"));
    }

    #[test]
    fn invalid_subjects_are_rejected() {
        assert!(validate("a..b", true).is_err());
        assert!(validate("a.>.b", true).is_err());
        assert!(validate("a.*", false).is_err());
        assert!(validate("a b", true).is_err());
        assert!(validate("a.b*", true).is_err());
        assert!(validate("a.*.>", true).is_ok());
    }

    #[test]
    fn checks_map_to_bus_errors() {
        assert!(matches!(
            check_subject("a.*", false),
            Err(BusError::InvalidSubject { .. })
        ));
        assert!(check_group("workers").is_ok());
        assert!(check_group("").is_err());
        assert!(check_group("a b").is_err());
        assert!(matches!(
            check_payload(11, 10),
            Err(BusError::PayloadTooLarge { size: 11, max: 10 })
        ));
        assert!(check_payload(10, 10).is_ok());
    }
}
