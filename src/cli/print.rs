//! Printing turn events for a person: one readable line (or a few) per event.

use std::io::Write;

use hermes::protocol::{ToolStatus, TurnEvent};

/// Prints events; deltas are streamed inline and closed by the answer.
#[derive(Default)]
pub struct Printer {
    streaming: bool,
}

fn short(value: &serde_json::Value, max: usize) -> String {
    let s = value.to_string();
    if s.chars().count() <= max {
        s
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}

impl Printer {
    pub fn event(&mut self, event: &TurnEvent) {
        if self.streaming && !matches!(event, TurnEvent::Delta { .. }) {
            println!();
            self.streaming = false;
        }
        match event {
            TurnEvent::TurnStarted { turn_id, .. } => println!("  ▶ turn {turn_id} started"),
            TurnEvent::MemoryRecalled { memories, .. } => {
                println!("  [memory.recalled] {} memories", memories.len());
                for m in memories {
                    println!("      - [{}] {} (score {:.2})", m.key, m.content, m.score);
                }
            }
            TurnEvent::Delta { text, .. } => {
                if !self.streaming {
                    print!("  [delta] ");
                    self.streaming = true;
                }
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            TurnEvent::ToolCall {
                name, arguments, ..
            } => {
                println!("  [tool.call] {name} {}", short(arguments, 160));
            }
            TurnEvent::ToolResult { result, .. } => {
                let status = match result.status {
                    ToolStatus::Ok => "ok",
                    ToolStatus::Error => "error",
                };
                let via = if result.via.is_empty() {
                    String::new()
                } else {
                    format!(" via {}", result.via)
                };
                println!(
                    "  [tool.result] {} {status}{via} ({} ms)",
                    result.name, result.duration_ms
                );
                if result.auto_corrected {
                    println!("      auto_corrected: true");
                    for c in &result.corrections {
                        println!("      - {c}");
                    }
                }
                match &result.error {
                    Some(e) => println!("      error {:?}: {}", e.code, e.message),
                    None => println!("      {}", short(&result.output, 200)),
                }
            }
            TurnEvent::ConfirmationRequired {
                call_id, message, ..
            } => {
                println!("  [confirmation.required] call {call_id}");
                println!("      {message}");
            }
            TurnEvent::JobWaiting { name, job_id, .. } => {
                println!("  [job.waiting] {name} runs as {job_id}; the turn goes on when it ends")
            }
            TurnEvent::AgentDelegated {
                agent,
                session,
                task,
                ..
            } => {
                println!("  [agent.delegated] {agent} works on it in session {session}");
                println!("      task: {task}");
            }
            TurnEvent::TurnResumed { reason, .. } => println!("  [turn.resumed] {reason}"),
            TurnEvent::Handoff {
                from, to, reason, ..
            } => {
                println!("  [agent.handoff] {from} → {to}: {reason}")
            }
            TurnEvent::Answer { text, .. } => println!("  [answer] {text}"),
            TurnEvent::MemoryWritten { changes, .. } => {
                println!("  [memory.written] {} changes", changes.len());
                for c in changes {
                    println!("      - {} [{}] {}", c.op.as_str(), c.key, c.content);
                }
            }
            TurnEvent::Error { code, message, .. } => println!("  [error] {code}: {message}"),
            other => println!("  [{}]", other.type_name()),
        }
    }
}
