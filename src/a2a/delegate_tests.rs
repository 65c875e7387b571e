use super::*;
use crate::a2a::wire::{Artifact, TaskStatus};

fn task(state: TaskState, said: Option<&str>, answer: Option<&str>) -> Task {
    let message = said.map(|text| Message {
        message_id: "m".into(),
        context_id: None,
        task_id: None,
        role: Role::Agent,
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    });
    Task {
        id: "t-1".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state,
            message,
            timestamp: None,
        },
        artifacts: answer.map(|text| {
            vec![Artifact {
                artifact_id: "a".into(),
                name: None,
                description: None,
                parts: vec![Part::text(text)],
                metadata: None,
                extensions: None,
            }]
        }),
        history: None,
        metadata: None,
    }
}

#[test]
fn a_remote_tasks_end_becomes_the_calls_result_and_work_in_progress_none() {
    let done = outcome_of("stats", &task(TaskState::Completed, None, Some("4 words"))).unwrap();
    assert_eq!(done.status, JobStatus::Done);
    assert_eq!(done.output["answer"], "4 words");
    assert_eq!(done.output["remote_task"], "t-1");

    let asks = outcome_of(
        "stats",
        &task(TaskState::InputRequired, Some("Which?"), None),
    );
    let asks = asks.unwrap();
    assert_eq!(asks.status, JobStatus::Done);
    assert_eq!(asks.output["input_required"], true);
    assert_eq!(asks.output["question"], "Which?");

    let failed = outcome_of("stats", &task(TaskState::Failed, Some("no way"), None)).unwrap();
    assert_eq!(failed.status, JobStatus::Failed);
    assert!(failed.error.unwrap().message.contains("no way"));

    assert_eq!(
        outcome_of("stats", &task(TaskState::Working, None, None)),
        None
    );
}
