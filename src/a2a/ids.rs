//! A2A ids ↔ Hermes ids.
//!
//! - A `contextId` is a Hermes session id (client-chosen ones must be valid session ids).
//! - A task is a turn: its id is `<session>.<turn>` — a dot never occurs in a Hermes id, so
//!   any process can find the session of a task from its id alone, with no index to keep.
//! - A `messageId` becomes the user message's envelope id (a UUIDv5 of it when it is not a
//!   valid Hermes id), which the session keeps: a retried `SendMessage` is acknowledged
//!   again, never run twice.

use crate::protocol::subjects::check_id;

/// The id of the task that is `turn` of `session`.
pub fn task_id(session: &str, turn: &str) -> String {
    format!("{session}.{turn}")
}

/// The session and turn a task id names; none when it is not a Hermes task id.
pub fn parse_task_id(id: &str) -> Option<(&str, &str)> {
    let (session, turn) = id.split_once('.')?;
    (check_id("session", session).is_ok() && check_id("turn", turn).is_ok())
        .then_some((session, turn))
}

/// The envelope id a message with A2A `messageId` travels under.
pub fn envelope_id(message_id: &str) -> String {
    if check_id("envelope", message_id).is_ok() {
        return message_id.to_owned();
    }
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, message_id.as_bytes()).to_string()
}

/// A new context (session) id.
pub fn new_context_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_id_names_its_session_and_turn() {
        let id = task_id("ctx-1", "0190-abc");
        assert_eq!(parse_task_id(&id), Some(("ctx-1", "0190-abc")));
        assert_eq!(parse_task_id("no-dot"), None);
        assert_eq!(parse_task_id("a.b.c"), None);
        assert_eq!(parse_task_id(".turn"), None);
    }

    #[test]
    fn a_message_id_that_is_no_hermes_id_still_maps_to_one_stable_envelope_id() {
        assert_eq!(envelope_id("m-1"), "m-1");
        let odd = "msg with spaces/and:colons";
        assert_eq!(envelope_id(odd), envelope_id(odd));
        assert!(check_id("envelope", &envelope_id(odd)).is_ok());
        assert_ne!(envelope_id(odd), envelope_id("another one"));
    }
}
