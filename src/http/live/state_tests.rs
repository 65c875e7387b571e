//! The live view's folding, without a bus.

use std::collections::BTreeMap;

use chrono::{Duration, Utc};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::state::LiveState;
use crate::protocol::envelope::Envelope;
use crate::protocol::{
    AppliedOp, MemoryChange, ProcessStatus, RecalledMemory, ToolCallResult, ToolStatus, TurnEvent,
    TurnPhase,
};

fn event(session: &str, body: TurnEvent) -> Envelope<TurnEvent> {
    Envelope::event(body).for_session("assistant", session, Some("u1"))
}

fn states(state: &LiveState) -> Vec<(String, String, String)> {
    state
        .snapshot(Utc::now())
        .sessions
        .into_iter()
        .map(|s| (s.session, s.state.as_str().to_owned(), s.detail))
        .collect()
}

fn started(session: &str, turn: &str) -> Envelope<TurnEvent> {
    event(
        session,
        TurnEvent::TurnStarted {
            turn_id: turn.into(),
            message_id: "m".into(),
        },
    )
}

#[test]
fn a_session_moves_through_its_turn_states_and_ends_answered() {
    let mut state = LiveState::default();
    state.apply(&started("s1", "t1"));
    assert_eq!(
        states(&state),
        vec![("s1".into(), "planning".into(), "".into())]
    );
    state.apply(&event(
        "s1",
        TurnEvent::JobWaiting {
            turn_id: "t1".into(),
            call_id: "c1".into(),
            name: "generate_report".into(),
            job_id: "j1".into(),
        },
    ));
    assert_eq!(
        states(&state),
        vec![(
            "s1".into(),
            "waiting_job".into(),
            "generate_report (job j1)".into()
        )]
    );
    state.apply(&event(
        "s1",
        TurnEvent::Answer {
            turn_id: "t1".into(),
            text: "done".into(),
        },
    ));
    let snapshot = state.snapshot(Utc::now());
    assert_eq!(snapshot.sessions[0].state, TurnPhase::Answered);
    // On the wire the page reads the turn's own phase names.
    let wire = serde_json::to_value(&snapshot.sessions[0]).unwrap();
    assert_eq!(wire["state"], "answered");
    assert_eq!(snapshot.sessions[0].turns, 1);
    assert_eq!(snapshot.sessions[0].user.as_deref(), Some("u1"));
}

#[test]
fn waiting_for_the_user_and_for_two_agents_is_shown_with_what_it_waits_for() {
    let mut state = LiveState::default();
    state.apply(&started("s1", "t1"));
    state.apply(&event(
        "s1",
        TurnEvent::ConfirmationRequired {
            turn_id: "t1".into(),
            call_id: "c".into(),
            name: "refund".into(),
            arguments: json!({}),
            message: "refund 30".into(),
            questions: Vec::new(),
        },
    ));
    assert_eq!(states(&state)[0].1, "waiting_user");
    state.apply(&started("s2", "t2"));
    for agent in ["logistics", "care"] {
        state.apply(&event(
            "s2",
            TurnEvent::AgentDelegated {
                turn_id: "t2".into(),
                call_id: agent.into(),
                agent: agent.into(),
                session: format!("dlg-{agent}"),
                task: "look".into(),
            },
        ));
    }
    let s2 = states(&state).into_iter().find(|s| s.0 == "s2").unwrap();
    assert_eq!(
        s2,
        (
            "s2".into(),
            "waiting_agents".into(),
            "logistics, care".into()
        )
    );
}

#[test]
fn tool_results_and_memory_are_listed_newest_first() {
    let mut state = LiveState::default();
    for (i, status) in [ToolStatus::Ok, ToolStatus::Error].into_iter().enumerate() {
        state.apply(&event(
            "s1",
            TurnEvent::ToolResult {
                turn_id: "t1".into(),
                result: ToolCallResult {
                    call_id: format!("c{i}"),
                    name: format!("tool{i}"),
                    status,
                    output: json!(null),
                    error: None,
                    auto_corrected: false,
                    corrections: Vec::new(),
                    via: "builtin".into(),
                    duration_ms: 7,
                    raw_reference: None,
                },
            },
        ));
    }
    state.apply(&event(
        "s1",
        TurnEvent::MemoryRecalled {
            turn_id: "t1".into(),
            memories: vec![RecalledMemory {
                key: "budget".into(),
                content: "under 5000".into(),
                score: 0.9,
            }],
        },
    ));
    state.apply(&event(
        "s1",
        TurnEvent::MemoryWritten {
            turn_id: "t1".into(),
            changes: vec![MemoryChange {
                op: AppliedOp::Added,
                key: "brand".into(),
                content: "Sony".into(),
            }],
        },
    ));
    let snapshot = state.snapshot(Utc::now());
    let tools: Vec<_> = snapshot
        .tool_calls
        .iter()
        .map(|t| (t.tool.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(tools, vec![("tool1", "error"), ("tool0", "ok")]);
    let memory: Vec<_> = snapshot
        .memory
        .iter()
        .map(|m| (m.op.as_str(), m.what.as_str()))
        .collect();
    assert_eq!(
        memory,
        vec![("added", "brand: Sony"), ("recall", "budget: under 5000")]
    );
}

#[test]
fn charts_take_rates_ratios_and_means_from_the_processes_series() {
    let process = |turns: f64| ProcessStatus {
        id: "p".into(),
        pid: 1,
        host: "h".into(),
        actors: vec!["session".into()],
        started_at: Utc::now(),
        sessions_live: Some(3),
        series: BTreeMap::from([
            (
                "hermes_turns_total{agent=\"a\",outcome=\"answered\"}".to_owned(),
                turns,
            ),
            (
                "hermes_tool_calls_total{tool=\"x\",status=\"ok\"}".into(),
                3.0,
            ),
            (
                "hermes_tool_calls_total{tool=\"x\",status=\"error\"}".into(),
                1.0,
            ),
            (
                "hermes_mcp_call_duration_seconds_sum{server=\"m\",status=\"ok\"}".into(),
                0.5,
            ),
            (
                "hermes_mcp_call_duration_seconds_count{server=\"m\",status=\"ok\"}".into(),
                10.0,
            ),
            ("hermes_turn_tokens_sum{kind=\"prompt\"}".into(), 4000.0),
            ("hermes_turn_tokens_count{kind=\"prompt\"}".into(), 2.0),
            ("hermes_turn_tokens_sum{kind=\"completion\"}".into(), 400.0),
            ("hermes_turn_tokens_count{kind=\"completion\"}".into(), 2.0),
            ("hermes_turn_tokens_sum{kind=\"cached\"}".into(), 3000.0),
            ("hermes_turn_tokens_count{kind=\"cached\"}".into(), 2.0),
            ("hermes_turn_tokens_sum{kind=\"reasoning\"}".into(), 100.0),
            ("hermes_turn_tokens_count{kind=\"reasoning\"}".into(), 2.0),
        ]),
    };
    let mut state = LiveState::default();
    let t0 = Utc::now();
    state.set_processes(&[process(10.0)], t0);
    state.set_processes(&[process(30.0)], t0 + Duration::seconds(2));
    let snapshot = state.snapshot(Utc::now());
    let last = |title: &str| {
        let chart = snapshot.charts.iter().find(|c| c.title == title).unwrap();
        chart.points.back().map(|p| p.1)
    };
    assert_eq!(last("turns / s"), Some(10.0));
    assert_eq!(last("tool success"), Some(75.0));
    assert_eq!(last("MCP call latency"), Some(50.0));
    assert_eq!(last("sessions live"), Some(3.0));
    // Cached and reasoning tokens are parts of prompt and completion, not added again.
    assert_eq!(last("tokens / turn"), Some(2200.0));
    assert_eq!(last("prompt cache hits"), Some(75.0));
    assert_eq!(last("reasoning tokens / turn"), Some(50.0));
    assert_eq!(last("memory recall hits"), None, "no recall yet: no point");
    assert!(snapshot.processes[0].records_metrics);
}
