//! A call to an agent as a task of the tasks extension (`io.modelcontextprotocol/tasks`,
//! SEP-2663), for a client that negotiated it: the call answers at once with the task, whose
//! id names the turn (`<agent>.<session>.<turn>`), and then
//!
//! - `tasks/get` reads the turn back (A2A's mapping of phases to states, [`tasks::turn`]):
//!   `working`; `input_required` with one form elicitation per high-risk call the turn waits
//!   to have confirmed (`{approve: boolean}`), or the mounted server's own forms for a call
//!   whose server asked the user; `completed` with the answer as a `tools/call` result;
//!   `failed`; `cancelled`;
//! - `notifications/tasks` announce each new state while the turn runs (to a client of the
//!   2025-11-25 handshake: a 2026-07-28 client has no stream for them and polls `tasks/get`);
//! - `tasks/update` carries the user's decisions (an accepted elicitation with `approve`, a
//!   server's form filled in, or a declined one) back to the turn, call by call;
//! - `tasks/cancel` cancels the turn and the turns it delegated.
//!
//! Tasks live as long as their session: nothing is kept here, so any Hermes process on the
//! bus answers for any task, and a restart loses none.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CreateTaskResult, DetailedTask, InputRequest, InputRequests, InputResponses, JsonObject,
    Notification, ServerNotification, Task, TaskPayload, TaskStatus, TaskStatusNotificationParams,
};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::agents::{self, call_result, parse_task_id, settled_turn, task_id, Started};
use super::auth::{Denied, Principal};
use super::ServerDeps;
use crate::a2a::server::follow::{ends_stream, Follow};
use crate::a2a::sessions::Decision;
use crate::a2a::sessions::SessionsError;
use crate::a2a::tasks::{self, TurnTask};
use crate::a2a::wire::{StreamResponse, TaskState};
use crate::protocol::McpQuestion;

/// How often a client should ask `tasks/get` (it also hears `notifications/tasks`).
pub const POLL_MS: u64 = 1000;
/// How long one turn's state changes are announced at most.
const ANNOUNCE_FOR: Duration = Duration::from_secs(24 * 3600);

/// Why a task request was refused.
#[derive(Debug, thiserror::Error)]
pub enum TaskOpError {
    #[error(transparent)]
    Denied(#[from] Denied),
    #[error("no task `{0}` of yours; use the taskId a call to an agent tool returned")]
    NotFound(String),
    #[error("task `{task}` has no outstanding input request `{key}`; answer the keys of its inputRequests (tasks/get)")]
    UnknownInput { task: String, key: String },
    #[error("task `{0}` does not wait for input now; tasks/get shows what it waits for")]
    NotWaiting(String),
    #[error("the session service could not be reached for task `{task}`: {source}")]
    Sessions {
        task: String,
        #[source]
        source: SessionsError,
    },
}

/// The task a call to an agent answers with at once.
pub(super) fn created(started: &Started) -> CreateTaskResult {
    let now = chrono::Utc::now().to_rfc3339();
    let task = Task::new(started.task_id(), TaskStatus::Working, now.clone(), now)
        .with_poll_interval_ms(POLL_MS)
        .with_status_message(format!("agent `{}` is working on it", started.agent));
    CreateTaskResult::new(task)
}

/// A turn of `agent` as an MCP task.
pub(super) fn detailed(agent: &str, task: &TurnTask) -> DetailedTask {
    let at = task.updated_at.to_rfc3339();
    let mut base = Task::new(
        task_id(agent, &task.session, &task.turn_id),
        TaskStatus::Working,
        at.clone(),
        at,
    )
    .with_poll_interval_ms(POLL_MS);
    if let Some(text) = &task.status_text {
        base = base.with_status_message(text.clone());
    }
    let payload = match task.state {
        TaskState::Completed => TaskPayload::Completed {
            result: object(serde_json::to_value(call_result(agent, task)).unwrap_or_default()),
        },
        TaskState::InputRequired => TaskPayload::InputRequired {
            input_requests: confirmations(task),
        },
        TaskState::Canceled => TaskPayload::Cancelled,
        TaskState::Failed | TaskState::Rejected => TaskPayload::Failed {
            error: object(json!({
                "code": -32603,
                "message": format!(
                    "agent `{agent}` failed: {}",
                    task.status_text.as_deref().unwrap_or("the turn ended without an answer")
                ),
            })),
        },
        _ => TaskPayload::Working,
    };
    DetailedTask::new(base, payload)
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

/// One form elicitation per call the turn waits to have confirmed, keyed by the call id; for
/// a call whose MCP server asked the user something, that server's own forms instead (keyed
/// `<call id>/<question>` when it asked several).
fn confirmations(task: &TurnTask) -> InputRequests {
    let mut requests = InputRequests::new();
    for (call_id, tool) in &task.pending {
        let asked: Vec<&McpQuestion> = task
            .questions
            .iter()
            .filter(|(call, _)| call == call_id)
            .map(|(_, q)| q)
            .collect();
        for question in &asked {
            let key = question_key(call_id, question, asked.len());
            let message = match &question.url {
                Some(url) => format!(
                    "`{tool}` asks: {} (visit {url}, then accept)",
                    question.message
                ),
                None => format!("`{tool}` asks: {}", question.message),
            };
            let schema = question
                .schema
                .clone()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            let request = json!({
                "method": "elicitation/create",
                "params": {"mode": "form", "message": message, "requestedSchema": schema}
            });
            match serde_json::from_value::<InputRequest>(request) {
                Ok(request) => {
                    requests.insert(key, request);
                }
                Err(error) => {
                    tracing::warn!(%error, call_id, "a server's question could not be put as an elicitation");
                }
            }
        }
        if !asked.is_empty() {
            continue;
        }
        let question = tasks::confirmation_question(&[(call_id.clone(), tool.clone())]);
        let request = json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": question,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "approve": {
                            "type": "boolean",
                            "title": format!("Run `{tool}`?"),
                            "description": "true runs the call, false declines it"
                        }
                    },
                    "required": ["approve"]
                }
            }
        });
        match serde_json::from_value::<InputRequest>(request) {
            Ok(request) => {
                requests.insert(call_id.clone(), request);
            }
            Err(error) => {
                tracing::warn!(%error, call_id, "a confirmation could not be put as an elicitation");
            }
        }
    }
    requests
}

/// The turn a task id names, when `who` may see it: an exposed agent `who` may call, a
/// session of `who`'s.
async fn locate(
    deps: &ServerDeps,
    who: &Principal,
    id: &str,
) -> Result<(String, TurnTask), TaskOpError> {
    let not_found = || TaskOpError::NotFound(id.to_owned());
    let (agent, session, turn) = parse_task_id(id).ok_or_else(not_found)?;
    if !agents::offered(deps, agent) {
        return Err(not_found());
    }
    who.check_tool(agent)?;
    let snapshot = agents::owned(deps, who, agent, session)
        .await
        .map_err(|source| TaskOpError::Sessions {
            task: id.to_owned(),
            source,
        })?
        .ok_or_else(not_found)?;
    // A turn the session has not stored yet is one that was just accepted.
    let task = tasks::turn(&snapshot, turn)
        .unwrap_or_else(|| TurnTask::starting(session, turn, TaskState::Working));
    Ok((agent.to_owned(), task))
}

/// `tasks/get`.
pub(super) async fn get(
    deps: &ServerDeps,
    who: &Principal,
    id: &str,
) -> Result<DetailedTask, TaskOpError> {
    let (agent, task) = locate(deps, who, id).await?;
    Ok(detailed(&agent, &task))
}

/// `tasks/cancel`: cancel the turn (and what it delegated) unless it already ended.
pub(super) async fn cancel(
    deps: &ServerDeps,
    who: &Principal,
    id: &str,
) -> Result<(), TaskOpError> {
    let (agent, task) = locate(deps, who, id).await?;
    if task.state.is_terminal() {
        return Ok(());
    }
    deps.sessions
        .cancel_because(
            &agent,
            &task.session,
            &who.user,
            "cancelled by the MCP client (tasks/cancel)",
        )
        .await
        .map(|_| ())
        .map_err(|source| TaskOpError::Sessions {
            task: id.to_owned(),
            source,
        })
}

/// `tasks/update`: the user's decision on the confirmation the turn waits for. Returns the
/// session's events (subscribed before the decision went) to announce what follows.
pub(super) async fn update(
    deps: &ServerDeps,
    who: &Principal,
    id: &str,
    responses: &InputResponses,
) -> Result<Started, TaskOpError> {
    let (agent, task) = locate(deps, who, id).await?;
    if task.state != TaskState::InputRequired {
        return Err(TaskOpError::NotWaiting(id.to_owned()));
    }
    let sessions_error = |source| TaskOpError::Sessions {
        task: id.to_owned(),
        source,
    };
    let decisions = decisions(&task, responses).map_err(|key| TaskOpError::UnknownInput {
        task: id.to_owned(),
        key,
    })?;
    let events = deps
        .sessions
        .events(&agent, &task.session)
        .await
        .map_err(sessions_error)?;
    for decision in decisions {
        let envelope = uuid::Uuid::now_v7().to_string();
        deps.sessions
            .confirm(&agent, &task.session, &who.user, &envelope, decision)
            .await
            .map_err(sessions_error)?;
    }
    Ok(Started {
        agent,
        session: task.session,
        turn_id: task.turn_id,
        events,
    })
}

/// The key of a server's question among a task's input requests.
fn question_key(call_id: &str, question: &McpQuestion, asked: usize) -> String {
    if asked == 1 {
        call_id.to_owned()
    } else {
        format!("{call_id}/{}", question.key)
    }
}

/// One decision per answered call: approved when every response for it accepts; for a call
/// whose server asked, the forms' content (an object keyed by question when it asked several).
/// `Err` names a response key that belongs to no pending call.
fn decisions(task: &TurnTask, responses: &InputResponses) -> Result<Vec<Decision>, String> {
    let mut out: Vec<Decision> = Vec::new();
    for (key, response) in responses {
        let call_id = key.split('/').next().unwrap_or(key);
        if !task.pending.iter().any(|(call, _)| call == call_id) {
            return Err(key.clone());
        }
        let at = match out
            .iter()
            .position(|d| d.call_id.as_deref() == Some(call_id))
        {
            Some(at) => at,
            None => {
                out.push(Decision {
                    approve: true,
                    call_id: Some(call_id.to_owned()),
                    content: None,
                });
                out.len() - 1
            }
        };
        let decision = &mut out[at];
        decision.approve &= approves(response);
        let asked = task.questions.iter().filter(|(call, _)| call == call_id);
        let content = response.get("content").cloned().unwrap_or(json!({}));
        match asked.count() {
            0 => {}
            1 => decision.content = Some(content),
            _ => {
                let question = key.strip_prefix(&format!("{call_id}/")).unwrap_or(key);
                let all = decision.content.get_or_insert_with(|| json!({}));
                if let Some(all) = all.as_object_mut() {
                    all.insert(question.to_owned(), content);
                }
            }
        }
    }
    Ok(out)
}

/// Whether an elicitation result approves: accepted, and `approve` not false.
fn approves(response: &Value) -> bool {
    let accepted = response.get("action").and_then(Value::as_str) == Some("accept");
    let approve = response
        .get("content")
        .and_then(|c| c.get("approve"))
        .and_then(Value::as_bool);
    accepted && approve != Some(false)
}

/// Announce the turn's new states to the client (`notifications/tasks`) until it ends or
/// waits for input, reading each one back as `tasks/get` would answer.
pub(super) fn announce(
    deps: Arc<ServerDeps>,
    who: Principal,
    peer: Peer<RoleServer>,
    started: Started,
) {
    tokio::spawn(async move {
        let Started {
            agent,
            session,
            turn_id,
            events,
        } = started;
        let (tx, mut rx) = mpsc::channel(16);
        let follow = Follow {
            sessions: &deps.sessions,
            agent: &agent,
            session: &session,
            turn_id: &turn_id,
            events,
        };
        let deadline = tokio::time::Instant::now() + ANNOUNCE_FOR;
        let following = async move {
            let tx = tx;
            follow.run(Some(&tx), deadline).await;
        };
        let announcing = async {
            let mut last: Option<TaskState> = None;
            while let Some(update) = rx.recv().await {
                let StreamResponse::StatusUpdate(status) = update else {
                    continue;
                };
                let state = status.status.state;
                if last.as_ref() == Some(&state) {
                    continue;
                }
                let task = if ends_stream(&state) {
                    // What the client then reads (answer, question) is the stored turn.
                    let turn = (agent.as_str(), session.as_str(), turn_id.as_str());
                    match settled_turn(&deps, &who, turn, Some(&state)).await {
                        Ok(task) => task,
                        Err(error) => {
                            tracing::debug!(%error, "a task's new state could not be read back");
                            continue;
                        }
                    }
                } else {
                    let mut task = TurnTask::starting(&session, &turn_id, state);
                    task.status_text =
                        status.status.message.as_ref().and_then(|m| {
                            m.parts.iter().find_map(|p| p.as_text().map(str::to_owned))
                        });
                    task
                };
                let params = TaskStatusNotificationParams::new(detailed(&agent, &task));
                let notification =
                    ServerNotification::TaskStatusNotification(Notification::new(params));
                if let Err(error) = peer.send_notification(notification).await {
                    tracing::debug!(%error, "the MCP client went away; its task is no longer announced");
                    return;
                }
                last = Some(task.state);
            }
        };
        tokio::join!(following, announcing);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(state: TaskState) -> TurnTask {
        let mut task = TurnTask::starting("s-1", "t-1", state);
        task.answer = Some(("m-2".into(), "It is 4.".into()));
        task
    }

    #[test]
    fn a_completed_turn_is_a_completed_task_with_the_answer_as_a_tool_result() {
        let task = detailed("triage", &turn(TaskState::Completed));
        let wire = serde_json::to_value(&task).unwrap();
        assert_eq!(wire["taskId"], json!("triage.s-1.t-1"));
        assert_eq!(wire["status"], json!("completed"));
        assert_eq!(wire["result"]["content"][0]["text"], json!("It is 4."));
        assert_eq!(wire["result"]["structuredContent"]["session"], json!("s-1"));
    }

    #[test]
    fn a_turn_waiting_for_confirmation_asks_one_elicitation_per_call() {
        let mut task = turn(TaskState::InputRequired);
        task.pending = vec![("call-1".into(), "refund".into())];
        let wire = serde_json::to_value(detailed("triage", &task)).unwrap();
        assert_eq!(wire["status"], json!("input_required"));
        let request = &wire["inputRequests"]["call-1"];
        assert_eq!(request["method"], json!("elicitation/create"));
        assert!(request["params"]["message"]
            .as_str()
            .unwrap()
            .contains("refund"));
        assert_eq!(
            request["params"]["requestedSchema"]["required"],
            json!(["approve"])
        );
    }

    #[test]
    fn a_mounted_servers_question_is_asked_with_its_own_form_and_its_answer_goes_to_that_call() {
        let mut task = turn(TaskState::InputRequired);
        task.pending = vec![
            ("call-1".into(), "ask__greet".into()),
            ("call-2".into(), "refund".into()),
        ];
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
        task.questions = vec![(
            "call-1".into(),
            McpQuestion {
                key: "who".into(),
                message: "Who is asking?".into(),
                schema: Some(schema.clone()),
                url: None,
            },
        )];
        let wire = serde_json::to_value(detailed("triage", &task)).unwrap();
        let asked = &wire["inputRequests"]["call-1"]["params"];
        assert_eq!(asked["requestedSchema"], schema, "the server's own form");
        assert!(asked["message"]
            .as_str()
            .unwrap()
            .contains("Who is asking?"));
        assert_eq!(
            wire["inputRequests"]["call-2"]["params"]["requestedSchema"]["required"],
            json!(["approve"]),
            "a plain confirmation beside it"
        );

        let responses: InputResponses = [
            (
                "call-1".to_owned(),
                json!({"action": "accept", "content": {"name": "Ada"}}),
            ),
            ("call-2".to_owned(), json!({"action": "decline"})),
        ]
        .into_iter()
        .collect();
        let decided = decisions(&task, &responses).unwrap();
        assert_eq!(decided.len(), 2);
        let greet = decided
            .iter()
            .find(|d| d.call_id.as_deref() == Some("call-1"))
            .unwrap();
        assert!(greet.approve);
        assert_eq!(greet.content, Some(json!({"name": "Ada"})));
        let refund = decided
            .iter()
            .find(|d| d.call_id.as_deref() == Some("call-2"))
            .unwrap();
        assert!(!refund.approve);
        assert_eq!(refund.content, None);
        let stray: InputResponses = [("call-9".to_owned(), json!({"action": "accept"}))]
            .into_iter()
            .collect();
        assert_eq!(decisions(&task, &stray).unwrap_err(), "call-9");
    }

    #[test]
    fn cancelled_and_failed_turns_keep_their_states() {
        let wire = serde_json::to_value(detailed("a", &turn(TaskState::Canceled))).unwrap();
        assert_eq!(wire["status"], json!("cancelled"));
        let mut failed = turn(TaskState::Failed);
        failed.status_text = Some("model down".into());
        let wire = serde_json::to_value(detailed("a", &failed)).unwrap();
        assert_eq!(wire["status"], json!("failed"));
        assert!(wire["error"]["message"]
            .as_str()
            .unwrap()
            .contains("model down"));
        let wire = serde_json::to_value(detailed("a", &turn(TaskState::Working))).unwrap();
        assert_eq!(wire["status"], json!("working"));
    }

    #[test]
    fn only_an_accepted_elicitation_that_does_not_say_no_approves() {
        assert!(approves(
            &json!({"action": "accept", "content": {"approve": true}})
        ));
        assert!(!approves(
            &json!({"action": "accept", "content": {"approve": false}})
        ));
        assert!(!approves(&json!({"action": "decline"})));
        assert!(!approves(&json!({"action": "cancel"})));
    }
}
