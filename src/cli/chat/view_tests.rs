//! The chat view's lines for each kind of event, on a plain screen.

use super::*;
use hermes::protocol::{ToolError, ToolErrorCode};
use serde_json::json;

fn result(call: &str, name: &str, output: Value, error: Option<ToolError>) -> TurnEvent {
    TurnEvent::ToolResult {
        turn_id: "t1".into(),
        result: ToolCallResult {
            call_id: call.into(),
            name: name.into(),
            status: if error.is_some() {
                ToolStatus::Error
            } else {
                ToolStatus::Ok
            },
            output,
            error,
            auto_corrected: false,
            corrections: Vec::new(),
            via: "builtin".into(),
            duration_ms: 12,
            raw_reference: None,
        },
    }
}

fn call(id: &str, name: &str, arguments: Value) -> TurnEvent {
    TurnEvent::ToolCall {
        turn_id: "t1".into(),
        call_id: id.into(),
        name: name.into(),
        arguments,
    }
}

/// What the view writes for `events` of a foreground turn, plain.
fn shown(events: &[TurnEvent]) -> String {
    let (mut screen, written) = Screen::buffer();
    let mut view = View::new(Look { styled: false });
    for e in events {
        view.event(&mut screen, e, true);
    }
    let text = written.lock().unwrap().clone();
    text
}

#[test]
fn a_tool_call_is_one_line_with_its_time_and_an_error_one_line_with_its_code() {
    let text = shown(&[
        call("c1", "order_lookup", json!({"order_date": "2025-11-11"})),
        result("c1", "order_lookup", json!({"found": 1}), None),
        call("c2", "add", json!({"a": "x"})),
        result(
            "c2",
            "add",
            Value::Null,
            Some(ToolError::new(
                ToolErrorCode::InvalidArguments,
                "`a` must be a number; send digits",
            )),
        ),
    ]);
    assert_eq!(
        text,
        "⚙ order_lookup(order_date=2025-11-11) ✓ 12 ms\n\
         ⚙ add(a=x) ✗ invalid_arguments: `a` must be a number\n"
    );
}

#[test]
fn streamed_deltas_are_the_answer_and_are_not_repeated() {
    let text = shown(&[
        TurnEvent::Delta {
            turn_id: "t1".into(),
            text: "Hel".into(),
        },
        TurnEvent::Delta {
            turn_id: "t1".into(),
            text: "lo".into(),
        },
        TurnEvent::Answer {
            turn_id: "t1".into(),
            text: "Hello".into(),
        },
    ]);
    assert_eq!(text, "Hello\n\n");
}

#[test]
fn another_turns_empty_memory_write_leaves_the_streaming_answer_alone() {
    let (mut screen, written) = Screen::buffer();
    let mut view = View::new(Look { styled: false });
    let delta = |text: &str| TurnEvent::Delta {
        turn_id: "t2".into(),
        text: text.into(),
    };
    view.event(&mut screen, &delta("You like "), true);
    let earlier = TurnEvent::MemoryWritten {
        turn_id: "t1".into(),
        changes: Vec::new(),
    };
    view.event(&mut screen, &earlier, false);
    view.event(&mut screen, &delta("short reports."), true);
    let answer = TurnEvent::Answer {
        turn_id: "t2".into(),
        text: "You like short reports.".into(),
    };
    view.event(&mut screen, &answer, true);
    assert_eq!(*written.lock().unwrap(), "You like short reports.\n\n");
}

#[test]
fn an_answer_not_streamed_is_written_whole() {
    let text = shown(&[
        TurnEvent::Delta {
            turn_id: "t1".into(),
            text: "Let me look.".into(),
        },
        call("c1", "add", json!({"a": 1, "b": 2})),
        result("c1", "add", json!(3), None),
        TurnEvent::Answer {
            turn_id: "t1".into(),
            text: "It is 3.".into(),
        },
    ]);
    assert_eq!(text, "Let me look.\n⚙ add(a=1, b=2) ✓ 12 ms\nIt is 3.\n\n");
}

#[test]
fn a_job_and_each_delegated_agent_get_one_line() {
    let text = shown(&[
        call("c1", "generate_report", json!({"topic": "phones"})),
        result(
            "c1",
            "generate_report",
            json!({"job_id": "job-7", "status": "submitted"}),
            None,
        ),
        TurnEvent::JobWaiting {
            turn_id: "t1".into(),
            call_id: "c1".into(),
            name: "generate_report".into(),
            job_id: "job-7".into(),
        },
        call("c2", "agent__researcher", json!({"task": "find phones"})),
        TurnEvent::AgentDelegated {
            turn_id: "t1".into(),
            call_id: "c2".into(),
            agent: "researcher".into(),
            session: "s-child".into(),
            task: "find phones".into(),
        },
        TurnEvent::TurnResumed {
            turn_id: "t1".into(),
            reason: "job job-7 of `generate_report` ended".into(),
        },
        result("c1", "generate_report", json!({"sections": 4}), None),
        result("c2", "agent__researcher", json!({"answer": "three"}), None),
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(
        lines[0],
        "⚙ generate_report(topic=phones) … runs as job job-7; its answer follows"
    );
    assert_eq!(lines[1], "↳ researcher: find phones … works on it");
    assert!(
        lines[2].starts_with("⚙ generate_report(topic=phones) ✓ job ended after "),
        "{text}"
    );
    assert!(
        lines[3].starts_with("↳ researcher: find phones ✓ answered "),
        "{text}"
    );
}

#[test]
fn an_extraction_failure_is_one_dim_line_and_a_cancel_says_so() {
    let text = shown(&[
        TurnEvent::Error {
            turn_id: Some("t0".into()),
            code: "memory_extraction_invalid".into(),
            message: "the extractor model gave invalid memory_updates twice".into(),
        },
        TurnEvent::Error {
            turn_id: Some("t1".into()),
            code: "cancelled".into(),
            message: "cancelled with Ctrl-C".into(),
        },
    ]);
    assert_eq!(
        text,
        "· memory not updated: the extractor model gave invalid memory_updates twice\n\
         ⨯ turn cancelled\n\n"
    );
}

#[test]
fn a_turn_that_recalls_again_after_a_job_shows_its_memories_once() {
    let recalled = TurnEvent::MemoryRecalled {
        turn_id: "t1".into(),
        memories: vec![RecalledMemory {
            key: "budget".into(),
            content: "under 200 USD".into(),
            score: 0.9,
        }],
    };
    let text = shown(&[recalled.clone(), recalled]);
    assert_eq!(text, "· recalled 1 memory — budget: under 200 USD\n");
}

#[test]
fn another_turns_answer_does_not_repeat_the_streamed_one() {
    let (mut screen, written) = Screen::buffer();
    let mut view = View::new(Look { styled: false });
    let delta = TurnEvent::Delta {
        turn_id: "t2".into(),
        text: "Side answer.".into(),
    };
    view.event(&mut screen, &delta, true);
    let behind = TurnEvent::Answer {
        turn_id: "t1".into(),
        text: "Report ready.".into(),
    };
    view.event(&mut screen, &behind, false);
    let answer = TurnEvent::Answer {
        turn_id: "t2".into(),
        text: "Side answer.".into(),
    };
    view.event(&mut screen, &answer, true);
    assert_eq!(
        *written.lock().unwrap(),
        "Side answer.\nReport ready.\n\n\n"
    );
}
