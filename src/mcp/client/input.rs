//! The answers of an [`Elicitor`] in rmcp's terms: an `elicitation/create` request of a
//! 2025-11-25 session, and the `inputRequests` of a 2026-07-28 `input_required` result
//! (SEP-2322), whose `inputResponses` go back with the `requestState` echoed unchanged — and
//! the same questions handed to a caller that asks its user later ([`to_ask`], [`answered`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest};
use rmcp::model::{InputRequiredResult, InputResponses};
use serde_json::{json, Value};

use crate::mcp::elicit::{Answer, Elicitor, Question};
use crate::mcp::{McpAnswer, McpInputAnswers, McpInputRequired, McpQuestion};

/// A 2026-07-28 call asks at most this many rounds of questions before Hermes gives up.
pub(super) const MAX_ROUNDS: usize = 10;

/// Our [`Question`] for an rmcp elicitation request.
pub(super) fn question(request: &ElicitRequestParams) -> Question {
    match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => Question::Form {
            message: message.clone(),
            schema: serde_json::to_value(requested_schema).unwrap_or_else(|_| json!({})),
        },
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => Question::Url {
            message: message.clone(),
            url: url.clone(),
        },
        // A mode newer than this client: nobody could answer it, so it is declined.
        _ => Question::Url {
            message: "a question of a kind Hermes does not know".to_owned(),
            url: String::new(),
        },
    }
}

/// rmcp's result for our [`Answer`].
pub(super) fn result(answer: Answer) -> ElicitResult {
    let (action, content) = match answer {
        Answer::Accept(content) => (ElicitationAction::Accept, Some(content)),
        Answer::Decline => (ElicitationAction::Decline, None),
        Answer::Cancel => (ElicitationAction::Cancel, None),
    };
    let mut result = ElicitResult::new(action);
    result.content = content;
    result
}

/// The `inputResponses` and `requestState` of the retry of a call answered `input_required`;
/// `Err` names a question Hermes cannot answer (sampling: Hermes lends no model to servers).
pub(super) async fn retry(
    elicitor: &Arc<dyn Elicitor>,
    asked: InputRequiredResult,
) -> Result<(Option<InputResponses>, Option<String>), InputError> {
    let mut answers = BTreeMap::new();
    for (key, question) in questions(&asked)? {
        answers.insert(key, elicitor.answer(question).await);
    }
    responses(asked, answers)
}

/// The questions of an `input_required` result for someone to answer later (the turn asks
/// its user): the server's result goes with them, to come back with the answers.
pub(super) fn to_ask(asked: &InputRequiredResult) -> Result<McpInputRequired, InputError> {
    let questions = questions(asked)?
        .into_iter()
        .map(|(key, question)| match question {
            Question::Form { message, schema } => McpQuestion {
                key,
                message,
                schema: Some(schema),
                url: None,
            },
            Question::Url { message, url } => McpQuestion {
                key,
                message,
                schema: None,
                url: Some(url),
            },
        })
        .collect();
    let asked = serde_json::to_value(asked).map_err(InputError::Encode)?;
    Ok(McpInputRequired { questions, asked })
}

/// [`to_ask`] for the questions of an `input_required` task: `asked` also names the task, so
/// the answers go back with `tasks/update` ([`task_of`]).
pub(super) fn to_ask_in_task(
    task_id: &str,
    asked: &InputRequiredResult,
) -> Result<McpInputRequired, InputError> {
    let mut questions = to_ask(asked)?;
    if let Some(object) = questions.asked.as_object_mut() {
        object.insert(TASK_KEY.to_owned(), Value::String(task_id.to_owned()));
    }
    Ok(questions)
}

/// Where [`to_ask_in_task`] keeps the task id in `asked`.
const TASK_KEY: &str = "taskId";

/// The task whose questions `input` answers, if they were a task's.
pub(super) fn task_of(input: &McpInputAnswers) -> Option<String> {
    input.asked.get(TASK_KEY)?.as_str().map(str::to_owned)
}

/// The `inputResponses` and `requestState` for answers given to [`to_ask`]'s questions.
pub(super) fn answered(
    mut input: McpInputAnswers,
) -> Result<(Option<InputResponses>, Option<String>), InputError> {
    if let Some(object) = input.asked.as_object_mut() {
        object.remove(TASK_KEY);
    }
    let asked: InputRequiredResult =
        serde_json::from_value(input.asked).map_err(InputError::Unreadable)?;
    let answers = input
        .answers
        .into_iter()
        .map(|(key, answer)| {
            let answer = match answer {
                McpAnswer::Accept { content } => Answer::Accept(content),
                McpAnswer::Decline => Answer::Decline,
                McpAnswer::Cancel => Answer::Cancel,
            };
            (key, answer)
        })
        .collect();
    responses(asked, answers)
}

/// The elicitations among an `input_required` result's requests, by key; `Err` for a request
/// Hermes cannot answer.
fn questions(asked: &InputRequiredResult) -> Result<Vec<(String, Question)>, InputError> {
    let mut out = Vec::new();
    for (key, request) in asked.input_requests.iter().flatten() {
        match request {
            InputRequest::Elicitation(request) => {
                out.push((key.clone(), question(&request.params)))
            }
            InputRequest::ListRoots(_) => {}
            InputRequest::CreateMessage(_) => return Err(InputError::Sampling),
            _ => return Err(InputError::UnknownRequest),
        }
    }
    let nothing_asked = asked.input_requests.as_ref().is_none_or(|r| r.is_empty());
    if nothing_asked && asked.request_state.is_none() {
        return Err(InputError::Empty);
    }
    Ok(out)
}

/// Why a server's `input_required` cannot be answered or asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum InputError {
    #[error(
        "the server asked Hermes to sample its model (`sampling/createMessage`), which Hermes \
         does not offer to servers"
    )]
    Sampling,
    #[error("the server asked for a kind of input Hermes does not know")]
    UnknownRequest,
    #[error("the server answered `input_required` with neither questions nor state")]
    Empty,
    #[error("the server's earlier questions could not be read back ({0}); call the tool again")]
    Unreadable(serde_json::Error),
    #[error("the answers could not be encoded: {0}")]
    Encode(serde_json::Error),
}

/// One response per request of `asked`: an elicitation's answer (none given: cancelled), and
/// no roots for `roots/list`.
fn responses(
    asked: InputRequiredResult,
    mut answers: BTreeMap<String, Answer>,
) -> Result<(Option<InputResponses>, Option<String>), InputError> {
    let mut responses = InputResponses::new();
    for (key, request) in asked.input_requests.unwrap_or_default() {
        let response: Value = match request {
            InputRequest::Elicitation(_) => {
                let answer = answers.remove(&key).unwrap_or(Answer::Cancel);
                serde_json::to_value(result(answer)).map_err(InputError::Encode)?
            }
            InputRequest::ListRoots(_) => json!({"roots": []}),
            InputRequest::CreateMessage(_) => return Err(InputError::Sampling),
            _ => return Err(InputError::UnknownRequest),
        };
        responses.insert(key, response);
    }
    Ok((
        (!responses.is_empty()).then_some(responses),
        asked.request_state,
    ))
}
