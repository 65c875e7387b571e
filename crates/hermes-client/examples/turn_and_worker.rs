//! A program outside the engine that talks to a running Hermes over NATS with
//! `hermes-client`: it serves two tools as a worker, runs a turn that calls one (its events
//! followed as a typed stream), confirms a high-risk call the next turn waits on, publishes
//! a trigger's event and waits for the answer, and writes, lists and forgets a memory.
//!
//! Against the deployment of `clients/python/tests/hermes.toml.in` (its scripted model and
//! `[[tools.define]]`): `cargo run -p hermes-client --example turn_and_worker -- nats://…`.
//! Prints one line per step; tests/suite/rust_client.rs runs it.

use std::time::Duration;

use futures::StreamExt;
use hermes_client::protocol::{MemoryKind, ToolError, ToolErrorCode, TurnEvent};
use hermes_client::{ConnectOptions, Hermes};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "nats://127.0.0.1:4222".into());
    let run = std::process::id();
    let hermes = Hermes::connect(&url, &ConnectOptions::default()).await?;

    // The worker: `word_count` answers, `archive_note` refuses a note it does not know.
    let _words = hermes
        .serve_tool("word_count", |call| async move {
            let text = call.arguments["text"].as_str().unwrap_or_default();
            Ok(json!({"words": text.split_whitespace().count()}))
        })
        .await?;
    let _archive = hermes
        .serve_tool("archive_note", |call| async move {
            match call.arguments["note"].as_str() {
                Some(note) if note.starts_with("n-") => Ok(json!({"archived": note})),
                _ => Err(ToolError::new(
                    ToolErrorCode::InvalidArguments,
                    "no such note",
                )),
            }
        })
        .await?;

    // A turn, its events as they arrive.
    let mut chat = hermes
        .session("assistant", &format!("rust-{run}"), "u-1")
        .await?;
    let accepted = chat.send("count these words", T).await?;
    {
        let events = chat.follow(&accepted, None, T);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event? {
                TurnEvent::ToolResult { result, .. } => {
                    println!("tool.result {} {}", result.name, result.output)
                }
                TurnEvent::Answer { text, .. } => println!("answer: {text}"),
                other => println!("{}", other.type_name()),
            }
        }
    }

    // A high-risk call waits for a yes.
    let paused = chat.turn("archive the note", T, |_| {}).await?;
    let pending = paused
        .needs_confirmation
        .ok_or_else(|| anyhow::anyhow!("the archive turn did not wait for a confirmation"))?;
    println!("confirmation.required {}", pending.name);
    let done = chat
        .confirm_and_follow(true, Some(&pending.call_id), T, |_| {})
        .await?;
    println!("confirmed: {}", done.answer.unwrap_or_default());

    // An event for a trigger, and the agent's answer on the trigger's reply subject.
    let ticket = format!("T{run}");
    let event =
        json!({"event_id": format!("evt-{run}"), "customer": "u-7", "summary": "printer on fire"});
    let reply = hermes
        .publish_and_wait(
            &format!("crm.tickets.{ticket}.opened"),
            &event,
            &format!("crm.tickets.{ticket}.reply"),
            None,
            T,
        )
        .await?;
    println!("trigger reply: {}", reply.text);

    // A memory written, listed and forgotten.
    let memory = hermes.memory(&format!("rust-{run}"), "default")?;
    let written = memory
        .write(
            MemoryKind::Preference,
            "editor",
            "The user writes code in Helix.",
            "example",
        )
        .await?;
    let listed = memory.list().await?;
    let forgotten = memory.forget("editor").await?;
    println!(
        "memory: {} written, {} listed, {} forgotten, {} left",
        written.len(),
        listed.len(),
        forgotten.len(),
        memory.list().await?.len()
    );
    Ok(())
}
