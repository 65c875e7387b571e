//! The documents validate real envelopes, and `schema/` matches the types.

use super::*;

fn document(kind: &str) -> Value {
    let text = &files()[&file_name(kind)];
    serde_json::from_str(text).unwrap()
}

fn validates(kind: &str, instance: &Value) -> Result<(), String> {
    let schema = document(kind);
    let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
    validator.validate(instance).map_err(|e| e.to_string())
}

#[test]
fn every_kind_of_the_index_has_its_document() {
    let all = files();
    for entry in subjects() {
        for kind in entry.sends.iter().chain(&entry.replies) {
            assert!(all.contains_key(&file_name(kind)), "{kind} has no document");
        }
    }
    assert!(all.contains_key("index.json"));
}

#[test]
fn a_real_user_message_envelope_validates_and_a_wrong_one_does_not() {
    let envelope = crate::envelope::Envelope::request(UserMessage::text("hi")).for_session(
        "assistant",
        "s1",
        Some("u-1"),
    );
    let value = serde_json::to_value(&envelope).unwrap();
    validates(kinds::USER_MESSAGE, &value).unwrap();
    let mut wrong = value.clone();
    wrong["body"]["text"] = json!(42);
    assert!(validates(kinds::USER_MESSAGE, &wrong).is_err());
    let mut other_kind = value;
    other_kind["kind"] = json!("user.cancel");
    assert!(validates(kinds::USER_MESSAGE, &other_kind).is_err());
}

#[test]
fn turn_events_of_every_type_validate() {
    let events = [
        TurnEvent::Answer {
            turn_id: "t".into(),
            text: "done".into(),
        },
        TurnEvent::Delta {
            turn_id: "t".into(),
            text: "do".into(),
        },
        TurnEvent::TurnStarted {
            turn_id: "t".into(),
            message_id: "m".into(),
        },
    ];
    for event in events {
        let envelope = crate::envelope::Envelope::event(event);
        let value = serde_json::to_value(&envelope).unwrap();
        validates(kinds::TURN_EVENT, &value).unwrap();
    }
}

/// `schema/` holds exactly what the types generate; `HERMES_UPDATE_SCHEMA=1` rewrites it.
#[test]
fn the_committed_schema_matches_the_protocol_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    let generated = files();
    if std::env::var_os("HERMES_UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                std::fs::remove_file(path).unwrap();
            }
        }
        for (name, text) in &generated {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    let mut committed = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("schema/ exists (HERMES_UPDATE_SCHEMA=1)") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            committed.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&committed),
        names(&generated),
        "schema/ lists other files than the types generate; run \
         HERMES_UPDATE_SCHEMA=1 cargo test --lib protocol::schema"
    );
    for (name, text) in &generated {
        assert!(
            committed[name] == *text,
            "schema/{name} is out of date with the protocol types; run \
             HERMES_UPDATE_SCHEMA=1 cargo test --lib protocol::schema and commit schema/"
        );
    }
}
