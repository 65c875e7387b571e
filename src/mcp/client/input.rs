//! The answers of an [`Elicitor`] in rmcp's terms: an `elicitation/create` request of a
//! 2025-11-25 session, and the `inputRequests` of a 2026-07-28 `input_required` result
//! (SEP-2322), whose `inputResponses` go back with the `requestState` echoed unchanged.

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest};
use rmcp::model::{InputRequiredResult, InputResponses};
use serde_json::{json, Value};

use crate::mcp::elicit::{Answer, Elicitor, Question};

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
) -> Result<(Option<InputResponses>, Option<String>), String> {
    let mut responses = InputResponses::new();
    for (key, request) in asked.input_requests.unwrap_or_default() {
        let response: Value = match request {
            InputRequest::Elicitation(request) => {
                let answer = elicitor.answer(question(&request.params)).await;
                serde_json::to_value(result(answer)).map_err(|e| e.to_string())?
            }
            InputRequest::ListRoots(_) => json!({"roots": []}),
            InputRequest::CreateMessage(_) => {
                return Err(
                    "the server asked Hermes to sample its model (`sampling/createMessage`), \
                            which Hermes does not offer to servers"
                        .to_owned(),
                )
            }
            _ => return Err("the server asked for a kind of input Hermes does not know".to_owned()),
        };
        responses.insert(key, response);
    }
    if responses.is_empty() && asked.request_state.is_none() {
        return Err("the server answered `input_required` with neither questions nor state".into());
    }
    Ok((
        (!responses.is_empty()).then_some(responses),
        asked.request_state,
    ))
}
