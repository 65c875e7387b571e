//! The tools the conformance suite's `tasks-*` scenarios call, each doing what the scenario
//! files (src/scenarios/server/tasks/*.ts of @modelcontextprotocol/conformance) ask of it:
//!
//! - `greet`: answers at once, `Hello, {name}!`; never a task.
//! - `slow_compute`: a task (for a client that takes tasks) that completes after `seconds`;
//!   for other clients the same work as a plain, long call.
//! - `failing_job`: a task whose tool reports an error after ~1 s (`completed`, `isError`).
//! - `protocol_error_job`: a task that fails with a JSON-RPC error (`failed`, `error`).
//! - `confirm_delete`: a task that asks one elicitation and completes when it is answered.
//! - `multi_input`: a task that asks two elicitations at once.
//! - `test_tool_with_task`: asks for a name with an `input_required` result (MRTR), then
//!   runs as a task whose result greets that name.
//!
//! Every tool but `greet` and `slow_compute` needs the tasks extension: a client that did
//! not declare it gets `-32021` naming it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    CreateTaskResult, InputRequest, InputRequests, InputRequiredResult, InputResponses, JsonObject,
    TaskPayload, Tool,
};
use rmcp::ErrorData;
use serde_json::{json, Value};

use super::store::{as_object, Store};

/// The longest `slow_compute` sleeps, whatever it is asked.
const MAX_SECONDS: f64 = 120.0;

fn schema(properties: Value) -> Arc<JsonObject> {
    let schema = json!({"type": "object", "properties": properties});
    Arc::new(match schema {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    })
}

pub fn list() -> Vec<Tool> {
    vec![
        Tool::new(
            "greet",
            "Greets a name at once (never a task)",
            schema(json!({"name": {"type": "string"}})),
        ),
        Tool::new(
            "slow_compute",
            "Sleeps `seconds`, then answers; runs as a task for a client that takes tasks",
            schema(json!({"seconds": {"type": "number"}, "label": {"type": "string"}})),
        ),
        Tool::new(
            "failing_job",
            "A task whose tool reports an error after about a second",
            schema(json!({})),
        ),
        Tool::new(
            "protocol_error_job",
            "A task that fails with a JSON-RPC error",
            schema(json!({})),
        ),
        Tool::new(
            "confirm_delete",
            "A task that asks to confirm deleting `filename`",
            schema(json!({"filename": {"type": "string"}})),
        ),
        Tool::new(
            "multi_input",
            "A task that asks two questions at once",
            schema(json!({})),
        ),
        Tool::new(
            "test_tool_with_task",
            "Asks for a name (input_required), then runs as a task that greets it",
            schema(json!({})),
        ),
    ]
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn argument<'a>(request: &'a CallToolRequestParams, name: &str) -> Option<&'a Value> {
    request.arguments.as_ref().and_then(|a| a.get(name))
}

fn string_argument(request: &CallToolRequestParams, name: &str, default: &str) -> String {
    argument(request, name)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_owned()
}

fn needs_tasks() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

/// A form elicitation asking for the properties of `schema`.
fn elicitation(message: &str, properties: Value) -> Result<InputRequest, ErrorData> {
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties}
        }
    });
    serde_json::from_value(request).map_err(|e| {
        ErrorData::internal_error(format!("the fixture built a bad elicitation: {e}"), None)
    })
}

/// The accepted content of the answer `key`, if any.
fn accepted<'a>(answers: &'a InputResponses, key: &str) -> Option<&'a Value> {
    answers
        .get(key)
        .filter(|answer| answer.get("action").and_then(Value::as_str) == Some("accept"))
        .and_then(|answer| answer.get("content"))
}

/// Answer a tools/call; `takes_tasks` says whether the client declared the tasks extension.
pub async fn call(
    store: &Store,
    request: CallToolRequestParams,
    takes_tasks: bool,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.to_string();
    if name == "greet" {
        let who = string_argument(&request, "name", "World");
        return Ok(text(format!("Hello, {who}!")).into());
    }
    if name == "slow_compute" {
        return Ok(slow_compute(store, &request, takes_tasks).await);
    }
    if !list().iter().any(|tool| tool.name == name) {
        return Err(ErrorData::invalid_params(
            format!("unknown tool `{name}`; call tools/list"),
            None,
        ));
    }
    if !takes_tasks {
        return Err(needs_tasks());
    }
    match name.as_str() {
        "failing_job" => Ok(failing_job(store)),
        "protocol_error_job" => Ok(protocol_error_job(store)),
        "confirm_delete" => confirm_delete(store, &request),
        "multi_input" => multi_input(store),
        _ => test_tool_with_task(store, &request),
    }
}

async fn slow_compute(
    store: &Store,
    request: &CallToolRequestParams,
    takes_tasks: bool,
) -> CallToolResponse {
    let seconds = argument(request, "seconds")
        .and_then(Value::as_f64)
        .unwrap_or(1.0)
        .clamp(0.0, MAX_SECONDS);
    let label = string_argument(request, "label", "slow_compute");
    let answer = format!("computed `{label}` in {seconds} s");
    let sleep = Duration::from_secs_f64(seconds);
    if !takes_tasks {
        tokio::time::sleep(sleep).await;
        return text(answer).into();
    }
    let task = store.create("computing");
    let (store, id) = (store.clone(), task.task_id.clone());
    tokio::spawn(async move {
        tokio::time::sleep(sleep).await;
        let result = as_object(text(answer));
        store.settle(&id, TaskPayload::Completed { result });
    });
    CreateTaskResult::new(task).into()
}

fn failing_job(store: &Store) -> CallToolResponse {
    let task = store.create("working, and about to fail");
    let (store, id) = (store.clone(), task.task_id.clone());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let failed = CallToolResult::error(vec![ContentBlock::text("the job failed")]);
        let result = as_object(failed);
        store.settle(&id, TaskPayload::Completed { result });
    });
    CreateTaskResult::new(task).into()
}

fn protocol_error_job(store: &Store) -> CallToolResponse {
    let task = store.create("working, and about to break");
    let (store, id) = (store.clone(), task.task_id.clone());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let error = json!({"code": -32603, "message": "the job broke inside the server"});
        let error = match error {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        };
        store.settle(&id, TaskPayload::Failed { error });
    });
    CreateTaskResult::new(task).into()
}

fn confirm_delete(
    store: &Store,
    request: &CallToolRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    let filename = string_argument(request, "filename", "the file");
    let mut requests = InputRequests::new();
    requests.insert(
        "confirm".to_owned(),
        elicitation(
            &format!("Delete {filename}?"),
            json!({"confirm": {"type": "boolean", "title": "Delete it?"}}),
        )?,
    );
    let task = store.create("asking to confirm");
    store.ask(
        &task.task_id,
        requests,
        Box::new(move |answers| {
            let confirmed = accepted(answers, "confirm")
                .and_then(|content| content.get("confirm"))
                .and_then(Value::as_bool)
                == Some(true);
            if confirmed {
                text(format!("deleted {filename}"))
            } else {
                text(format!("kept {filename}"))
            }
        }),
    );
    Ok(CreateTaskResult::new(task).into())
}

fn multi_input(store: &Store) -> Result<CallToolResponse, ErrorData> {
    let mut requests = InputRequests::new();
    for key in ["first", "second"] {
        let question = elicitation(
            &format!("The {key} question: your name?"),
            json!({"name": {"type": "string"}, "confirm": {"type": "boolean"}}),
        )?;
        requests.insert(key.to_owned(), question);
    }
    let task = store.create("asking two questions");
    store.ask(
        &task.task_id,
        requests,
        Box::new(|answers| {
            let names: Vec<&str> = ["first", "second"]
                .iter()
                .filter_map(|key| accepted(answers, key))
                .filter_map(|content| content.get("name").and_then(Value::as_str))
                .collect();
            text(format!("answered by {}", names.join(" and ")))
        }),
    );
    Ok(CreateTaskResult::new(task).into())
}

fn test_tool_with_task(
    store: &Store,
    request: &CallToolRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    let name = request
        .input_responses
        .as_ref()
        .and_then(|answers| accepted(answers, "user_name"))
        .and_then(|content| content.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let Some(name) = name else {
        let mut requests = InputRequests::new();
        requests.insert(
            "user_name".to_owned(),
            elicitation("Your name?", json!({"name": {"type": "string"}}))?,
        );
        return Ok(InputRequiredResult::from_input_requests(requests).into());
    };
    let task = store.create("greeting");
    let (store, id) = (store.clone(), task.task_id.clone());
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let result = as_object(text(format!("Hello, {name}!")));
        store.settle(&id, TaskPayload::Completed { result });
    });
    Ok(CreateTaskResult::new(task).into())
}
