//! Questions a tool's MCP server asks the user before it completes a call (a 2026-07-28
//! `input_required` result, SEP-2322): the turn pauses in `waiting_user` with the questions
//! beside its confirmations, the user's `user.confirmation` answers them (approve with the
//! form's content, or decline), and the call runs again carrying the answers and the server's
//! state — a round that survives restarts, since the questions are stored with the turn.

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{json, Value};

use crate::llm::ToolCall;
use crate::mcp::elicit::defaults_of;
use crate::protocol::{
    McpAnswer, McpInputAnswers, McpInputRequired, McpQuestion, ToolCallResult, TurnEvent,
};
use crate::store::tasks::{Decision, PendingConfirmation, PendingInput, TurnRecord};
use crate::tools::{ToolError, ToolErrorCode};

/// A call's server may ask this many rounds of questions; then the call fails.
pub(super) const MAX_ROUNDS: u32 = 10;

/// The questions of a result whose server asks the user first.
pub(super) fn asked(result: &ToolCallResult) -> Option<McpInputRequired> {
    let code = result.error.as_ref()?.code;
    (code == ToolErrorCode::InputRequired)
        .then(|| serde_json::from_value(result.output.clone()).ok())
        .flatten()
}

/// Results that are a server's questions for the user (a call's or its task's) become the
/// call's open question, and its job (if it had one) is done with; the rest stay results.
pub(super) fn take(
    record: &mut TurnRecord,
    ready: Vec<(ToolCall, ToolCallResult, bool)>,
) -> (Vec<(ToolCall, ToolCallResult, bool)>, Vec<ToolCall>) {
    let mut results = Vec::with_capacity(ready.len());
    let mut questioned = Vec::new();
    for (call, result, announce) in ready {
        let Some(asked) = asked(&result) else {
            results.push((call, result, announce));
            continue;
        };
        let task_job = record
            .jobs
            .iter()
            .find(|j| j.call_id == call.id && j.child.is_none())
            .map(|j| j.job_id.clone());
        record.jobs.retain(|j| j.call_id != call.id);
        match self::record(record, &call, asked, task_job) {
            Ok(()) => questioned.push(call),
            Err(failed) => results.push((call, *failed, true)),
        }
    }
    (results, questioned)
}

/// Record `asked` as the call's open question (replacing an answered earlier round), so the
/// turn waits for the user. `Err` is the call's failed result once the server has asked
/// [`MAX_ROUNDS`] times.
pub(super) fn record(
    record: &mut TurnRecord,
    call: &ToolCall,
    asked: McpInputRequired,
    task_job: Option<String>,
) -> Result<(), Box<ToolCallResult>> {
    let earlier = record
        .confirmations
        .iter()
        .position(|c| c.call_id == call.id);
    let (round, mut answered_by) = match earlier.map(|at| record.confirmations.remove(at)) {
        Some(PendingConfirmation {
            input: Some(input),
            decided_by,
            ..
        }) => {
            let mut by = input.answered_by;
            by.extend(decided_by);
            (input.round + 1, by)
        }
        Some(confirmed) => (1, confirmed.decided_by.into_iter().collect()),
        None => (1, Vec::new()),
    };
    if round > MAX_ROUNDS {
        let error = ToolError::new(
            ToolErrorCode::ExecutionFailed,
            format!(
                "the MCP server of `{}` still asked for input after {MAX_ROUNDS} rounds of \
                 answers; the call was given up",
                call.name
            ),
        )
        .with_hint("tell the user the tool keeps asking and could not finish");
        return Err(Box::new(super::ports::failed(
            call.id.clone(),
            call.name.clone(),
            error,
        )));
    }
    answered_by.dedup();
    record.confirmations.push(PendingConfirmation {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
        asked_at: Utc::now(),
        decision: None,
        decided_by: None,
        input: Some(PendingInput {
            asked,
            round,
            answered_by,
            task_job,
        }),
        content: None,
    });
    Ok(())
}

/// The `confirmation.required` event asking the user a call's questions.
pub(super) fn event(turn_id: &str, call: &ToolCall, input: &PendingInput) -> TurnEvent {
    let questions = &input.asked.questions;
    let how = match questions.as_slice() {
        [McpQuestion { url: Some(url), .. }] => {
            format!("visit {url}, then approve (hermes send --confirm), or --deny to decline")
        }
        _ => "answer with hermes send --confirm --answer '<JSON>' (none: the form's \
              defaults), or --deny to decline"
            .to_owned(),
    };
    TurnEvent::ConfirmationRequired {
        turn_id: turn_id.to_string(),
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        message: format!("`{}` asks: {} — {how}", call.name, input.asked.message()),
        questions: questions.clone(),
    }
}

/// The answers a decided question goes back to its server with: approved, each form's
/// content (or its defaults) and `{}` for a page visited; declined, a decline for each.
pub(super) fn answers(pending: &PendingConfirmation, input: &PendingInput) -> McpInputAnswers {
    let questions = &input.asked.questions;
    let answers: BTreeMap<String, McpAnswer> = questions
        .iter()
        .map(|q| {
            let answer = match pending.decision {
                Some(Decision::Approved) => McpAnswer::Accept {
                    content: content_for(q, questions.len(), pending.content.as_ref()),
                },
                _ => McpAnswer::Decline,
            };
            (q.key.clone(), answer)
        })
        .collect();
    McpInputAnswers {
        asked: input.asked.asked.clone(),
        answers,
    }
}

/// One question's content in the user's answer: the whole answer for a single question, its
/// key's entry for several; the form's defaults when the user gave none.
fn content_for(question: &McpQuestion, count: usize, given: Option<&Value>) -> Value {
    let given = match given {
        Some(all) if count == 1 => Some(all),
        Some(all) => all.get(&question.key),
        None => None,
    };
    match (given, &question.schema) {
        (Some(content), _) => content.clone(),
        (None, Some(schema)) => defaults_of(schema),
        (None, None) => json!({}),
    }
}

/// Whether `content` answers the questions of `input` (each form's schema); `Err` says what
/// does not fit, for the person answering.
pub(crate) fn check_answer(input: &PendingInput, content: &Value) -> Result<(), String> {
    let questions = &input.asked.questions;
    for question in questions {
        let Some(schema) = &question.schema else {
            continue;
        };
        let answer = content_for(question, questions.len(), Some(content));
        let validator = jsonschema::validator_for(schema)
            .map_err(|e| format!("the server's form for `{}` is unusable: {e}", question.key))?;
        let problems: Vec<String> = validator
            .iter_errors(&answer)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        if !problems.is_empty() {
            return Err(format!(
                "the answer to \"{}\" does not fit its form: {}",
                question.message,
                problems.join("; ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tasks::TurnRecord;

    fn form() -> McpInputRequired {
        McpInputRequired {
            questions: vec![McpQuestion {
                key: "who".into(),
                message: "Who is asking?".into(),
                schema: Some(json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "default": "Ada"}},
                    "required": ["name"]
                })),
                url: None,
            }],
            asked: json!({"resultType": "input_required", "requestState": "s1"}),
        }
    }

    fn call() -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: "srv__greet".into(),
            arguments: json!({}),
        }
    }

    #[test]
    fn an_approved_question_goes_back_with_the_content_or_the_forms_defaults() {
        let mut turn = TurnRecord::received("t".into(), "m".into(), "tr".into());
        record(&mut turn, &call(), form(), None).unwrap();
        let pending = turn.confirmations[0].clone();
        assert_eq!(pending.decision, None, "the turn waits for the user");
        let input = pending.input.clone().unwrap();
        let approved = PendingConfirmation {
            decision: Some(Decision::Approved),
            ..pending.clone()
        };
        assert_eq!(
            answers(&approved, &input).answers["who"],
            McpAnswer::Accept {
                content: json!({"name": "Ada"})
            }
        );
        let given = PendingConfirmation {
            content: Some(json!({"name": "Grace"})),
            ..approved
        };
        let sent = answers(&given, &input);
        assert_eq!(
            sent.answers["who"],
            McpAnswer::Accept {
                content: json!({"name": "Grace"})
            }
        );
        assert_eq!(
            sent.asked,
            form().asked,
            "the server's state goes back unchanged"
        );
        let declined = PendingConfirmation {
            decision: Some(Decision::Denied),
            ..pending
        };
        assert_eq!(
            answers(&declined, &input).answers["who"],
            McpAnswer::Decline
        );
    }

    #[test]
    fn a_server_that_keeps_asking_fails_the_call_after_the_last_round() {
        let mut turn = TurnRecord::received("t".into(), "m".into(), "tr".into());
        for round in 1..=MAX_ROUNDS {
            record(&mut turn, &call(), form(), None).unwrap();
            let pending = &mut turn.confirmations[0];
            assert_eq!(pending.input.as_ref().unwrap().round, round);
            pending.decision = Some(Decision::Approved);
            pending.decided_by = Some(format!("e{round}"));
        }
        assert_eq!(turn.confirmations.len(), 1, "each round replaces the last");
        let answered = &turn.confirmations[0].input.as_ref().unwrap().answered_by;
        assert_eq!(answered.len(), MAX_ROUNDS as usize - 1);
        let failed = record(&mut turn, &call(), form(), None).unwrap_err();
        assert!(failed.error.unwrap().message.contains("still asked"));
    }

    #[test]
    fn an_answer_that_does_not_fit_the_form_is_refused_with_what_is_wrong() {
        let input = PendingInput {
            asked: form(),
            round: 1,
            answered_by: Vec::new(),
            task_job: None,
        };
        assert!(check_answer(&input, &json!({"name": "Grace"})).is_ok());
        let wrong = check_answer(&input, &json!({"name": 7})).unwrap_err();
        assert!(wrong.contains("Who is asking?"), "{wrong}");
        assert!(wrong.contains("/name"), "{wrong}");
    }
}
