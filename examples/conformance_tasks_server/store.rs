//! The fixture's tasks: kept in the server (not in an MCP session, so a client that comes back
//! on another session or as stateless requests finds them), by id, with what a task waiting
//! for input still asks and what it does once every question is answered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::{
    CallToolResult, DetailedTask, InputRequests, InputResponses, JsonObject, Task, TaskPayload,
    TaskStatus,
};
use rmcp::ErrorData;

/// How long a task is kept, announced as `ttlMs` (the fixture keeps every task for its life).
const TTL_MS: u64 = 10 * 60 * 1000;
/// The poll interval announced as `pollIntervalMs`.
const POLL_INTERVAL_MS: u64 = 200;

/// What a task waiting for input does with the answers, once all have come.
pub type Finish = Box<dyn FnOnce(&InputResponses) -> CallToolResult + Send>;

struct Waiting {
    pending: InputRequests,
    answers: InputResponses,
    finish: Finish,
}

struct Entry {
    task: DetailedTask,
    waiting: Option<Waiting>,
}

/// Every task of the server; clones share them.
#[derive(Clone, Default)]
pub struct Store {
    tasks: Arc<Mutex<HashMap<String, Entry>>>,
}

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("no task `{id}` on this server; use the taskId a tools/call answered with"),
        None,
    )
}

/// A tool result as the JSON object a completed task inlines.
pub fn as_object(result: CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

impl Store {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new working task, stored before it is returned (a `tasks/get` right after the
    /// `tools/call` answer finds it).
    pub fn create(&self, message: &str) -> Task {
        let id = format!("task-{}", uuid::Uuid::new_v4().simple());
        let task = Task::new(&id, TaskStatus::Working, now(), now())
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message(message);
        let entry = Entry {
            task: DetailedTask::new(task.clone(), TaskPayload::Working),
            waiting: None,
        };
        self.lock().insert(id, entry);
        task
    }

    /// Move a task to `payload` unless it already ended (a cancelled task stays cancelled).
    pub fn settle(&self, id: &str, payload: TaskPayload) {
        if let Some(entry) = self.lock().get_mut(id) {
            set(entry, payload);
        }
    }

    /// Park a working task on `requests`; `finish` completes it once every one is answered.
    pub fn ask(&self, id: &str, requests: InputRequests, finish: Finish) {
        let mut tasks = self.lock();
        let Some(entry) = tasks.get_mut(id) else {
            return;
        };
        if entry.task.status().is_terminal() {
            return;
        }
        set(
            entry,
            TaskPayload::InputRequired {
                input_requests: requests.clone(),
            },
        );
        entry.waiting = Some(Waiting {
            pending: requests,
            answers: InputResponses::new(),
            finish,
        });
    }

    pub fn get(&self, id: &str) -> Result<DetailedTask, ErrorData> {
        self.lock()
            .get(id)
            .map(|entry| entry.task.clone())
            .ok_or_else(|| unknown(id))
    }

    /// Every task's status, in no order.
    #[allow(dead_code, reason = "read by the tests that build this fixture in")]
    pub fn statuses(&self) -> Vec<TaskStatus> {
        self.lock()
            .values()
            .map(|entry| entry.task.status())
            .collect()
    }

    /// `tasks/update`: answers to questions the task asks are taken (others are ignored); the
    /// task stays `input_required` with the rest and completes when none is left.
    pub fn answer(&self, id: &str, responses: InputResponses) -> Result<(), ErrorData> {
        let mut tasks = self.lock();
        let entry = tasks.get_mut(id).ok_or_else(|| unknown(id))?;
        let Some(waiting) = entry.waiting.as_mut() else {
            return Ok(());
        };
        for (key, response) in responses {
            if waiting.pending.remove(&key).is_some() {
                waiting.answers.insert(key, response);
            }
        }
        if !waiting.pending.is_empty() {
            let input_requests = waiting.pending.clone();
            set(entry, TaskPayload::InputRequired { input_requests });
            return Ok(());
        }
        if let Some(waiting) = entry.waiting.take() {
            let result = (waiting.finish)(&waiting.answers);
            set(
                entry,
                TaskPayload::Completed {
                    result: as_object(result),
                },
            );
        }
        Ok(())
    }

    /// `tasks/cancel`: a running task ends `cancelled`; an ended one is left as it is.
    pub fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let mut tasks = self.lock();
        let entry = tasks.get_mut(id).ok_or_else(|| unknown(id))?;
        entry.waiting = None;
        set(entry, TaskPayload::Cancelled);
        Ok(())
    }
}

fn set(entry: &mut Entry, payload: TaskPayload) {
    if entry.task.status().is_terminal() {
        return;
    }
    let mut task = entry.task.task.clone();
    task.last_updated_at = now();
    entry.task = DetailedTask::new(task, payload);
}
