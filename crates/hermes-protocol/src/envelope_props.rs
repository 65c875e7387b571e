//! Property tests of the envelope (fuzzing by proptest): any payload — bytes, JSON of any
//! shape, a valid envelope with one field broken — is decoded or refused with an error, never
//! a panic; a valid envelope comes back as it went.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::envelope::Envelope;
use super::session::UserMessage;

const MAX: usize = 4096;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "\\PC{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid user-message envelope with one field replaced by `value`.
fn broken(field: &str, value: Value) -> Vec<u8> {
    let envelope = Envelope::request(UserMessage::text("hello")).for_session("a", "s", Some("u"));
    let mut raw = serde_json::to_value(&envelope).unwrap_or(Value::Null);
    raw[field] = value;
    serde_json::to_vec(&raw).unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_are_decoded_or_refused(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = Envelope::decode(&bytes, MAX);
    }

    #[test]
    fn arbitrary_json_is_decoded_or_refused(value in json_value()) {
        let bytes = serde_json::to_vec(&value).unwrap_or_default();
        if let Ok(raw) = Envelope::decode(&bytes, MAX) {
            let _ = raw.into_typed::<UserMessage>(super::kinds::USER_MESSAGE);
        }
    }

    #[test]
    fn one_broken_field_is_refused_or_typed_never_a_panic(
        field in prop::sample::select(vec!["v", "id", "kind", "ts", "trace_id", "agent", "session", "user", "body"]),
        value in json_value(),
    ) {
        let bytes = broken(field, value);
        if let Ok(raw) = Envelope::decode(&bytes, MAX) {
            let _ = raw.into_typed::<UserMessage>(super::kinds::USER_MESSAGE);
        }
    }

    #[test]
    fn a_valid_envelope_round_trips(text in "\\PC{1,200}", session in "[a-zA-Z0-9_-]{1,40}") {
        let envelope = Envelope::request(UserMessage::text(text.clone()))
            .for_session("assistant", &session, Some("u-1"));
        let bytes = envelope.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = Envelope::decode(&bytes, 1 << 20)
            .and_then(|raw| raw.into_typed::<UserMessage>(super::kinds::USER_MESSAGE))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back.body.text, text);
        prop_assert_eq!(back.session.as_deref(), Some(session.as_str()));
        prop_assert_eq!(back.id, envelope.id);
    }

    #[test]
    fn an_oversized_payload_is_refused_before_parsing(extra in 1usize..2000) {
        let bytes = vec![b' '; MAX + extra];
        prop_assert!(Envelope::decode(&bytes, MAX).is_err());
    }
}
