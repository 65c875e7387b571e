//! The chat view: turn events as a person reads them. The answer streams once; each tool
//! call is one line (a spinner while it runs); recalled and written memories one dim line
//! each; an async job or a delegated agent one line with a spinner until it ends. What
//! [`View::event`] writes depends on whether the turn is the one the person is watching
//! (`foreground`: streamed, spinners) or one that goes on behind the prompt (whole lines).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use hermes::protocol::{
    AppliedOp, MemoryChange, RecalledMemory, ToolCallResult, ToolStatus, TurnEvent,
};
use hermes_client::event_turn;
use indicatif::ProgressBar;
use serde_json::Value;

use super::render::{AnswerStream, Look, Markdown};
use super::screen::Screen;

/// Tool calls named so are delegations to another agent (`agent__<name>`).
const DELEGATION_PREFIX: &str = "agent__";

/// A call that has not ended yet.
struct Call {
    turn: String,
    /// `⚙ name(args)`, or `↳ agent: task` for a delegation.
    label: String,
    started: Instant,
    bar: Option<ProgressBar>,
    /// The job id while the call runs as an async job.
    job: Option<String>,
}

/// Renders events onto a [`Screen`].
pub struct View {
    look: Look,
    stream: AnswerStream,
    /// The turn whose answer is streaming (deltas of other turns are not shown).
    streaming: Option<String>,
    thinking: Option<ProgressBar>,
    calls: HashMap<String, Call>,
    /// Unfinished turns whose recalled memories were shown.
    recalled: HashSet<String>,
}

impl View {
    pub fn new(look: Look) -> Self {
        Self {
            look,
            stream: AnswerStream::new(look),
            streaming: None,
            thinking: None,
            calls: HashMap::new(),
            recalled: HashSet::new(),
        }
    }

    /// A message was sent: show that the agent is working until its first output.
    pub fn started(&mut self, screen: &mut Screen) {
        if self.thinking.is_none() {
            self.thinking = screen.spinner("{spinner:.dim} {msg:.dim}", "thinking…");
        }
    }

    /// Write `event`; `foreground`: its turn is the one the person is watching.
    pub fn event(&mut self, screen: &mut Screen, event: &TurnEvent, foreground: bool) {
        let delta = matches!(event, TurnEvent::Delta { .. });
        // A streaming line ends only for something that is written (another turn's empty
        // memory write arriving meanwhile leaves it alone).
        if !delta && !writes_nothing(event) {
            self.end_stream(screen);
        }
        let ours = event_turn(event).is_some() && event_turn(event) == self.streaming.as_deref();
        if ours && !delta && !matches!(event, TurnEvent::Answer { .. }) {
            // Text streamed before a tool call is not the answer.
            self.streaming = None;
        }
        if foreground && !matches!(event, TurnEvent::TurnStarted { .. }) {
            self.stop_thinking(screen);
        }
        self.show(screen, event, foreground);
        if foreground && self.model_works_next(event) {
            self.started(screen);
        }
    }

    /// After this event the model is asked again (its spinner shows meanwhile).
    fn model_works_next(&self, event: &TurnEvent) -> bool {
        match event {
            TurnEvent::TurnStarted { .. }
            | TurnEvent::MemoryRecalled { .. }
            | TurnEvent::TurnResumed { .. } => true,
            TurnEvent::ToolResult { turn_id, .. } => !self
                .calls
                .values()
                .any(|c| &c.turn == turn_id && c.bar.is_some()),
            _ => false,
        }
    }

    fn show(&mut self, screen: &mut Screen, event: &TurnEvent, foreground: bool) {
        match event {
            // A turn recalls again each time it resumes; once is enough to show.
            TurnEvent::MemoryRecalled { turn_id, memories }
                if !memories.is_empty() && self.recalled.insert(turn_id.clone()) =>
            {
                let line = recalled_line(memories, screen.cols());
                screen.line(&self.look.dim(&line));
            }
            TurnEvent::Delta { turn_id, text } if foreground => {
                self.streaming = Some(turn_id.clone());
                let out = self.stream.push(text, screen.cols());
                screen.write(&out);
            }
            TurnEvent::ToolCall {
                turn_id,
                call_id,
                name,
                arguments,
            } => self.call_started(screen, turn_id, call_id, name, arguments, foreground),
            TurnEvent::ToolResult { result, .. } => self.call_ended(screen, result),
            TurnEvent::ConfirmationRequired {
                turn_id,
                call_id,
                name,
                arguments,
                questions,
                ..
            } => {
                let label = self
                    .take(screen, call_id)
                    .map(|c| c.label)
                    .unwrap_or_else(|| call_label(name, arguments, screen.cols()));
                if questions.is_empty() {
                    let waits = "⚠ high-risk: waits for your OK — /confirm runs it, /deny declines";
                    screen.line(&format!("{label} {}", self.look.warn(waits)));
                } else {
                    screen.line(&format!(
                        "{label} {}",
                        self.look.warn("? the tool asks you:")
                    ));
                    for line in super::questions::lines(&self.look, questions) {
                        screen.line(&line);
                    }
                }
                // Its result (after the decision or answer) ends the same line.
                self.calls.insert(
                    call_id.clone(),
                    Call {
                        turn: turn_id.clone(),
                        label,
                        started: Instant::now(),
                        bar: None,
                        job: None,
                    },
                );
            }
            TurnEvent::JobWaiting {
                call_id,
                name,
                job_id,
                turn_id,
            } => self.job_waiting(screen, turn_id, call_id, name, job_id, foreground),
            TurnEvent::AgentDelegated {
                turn_id,
                call_id,
                agent,
                task,
                ..
            } => self.delegated(screen, turn_id, call_id, agent, task, foreground),
            TurnEvent::Handoff {
                from, to, reason, ..
            } => {
                screen.line(
                    &self
                        .look
                        .dim(&format!("⇢ {from} hands over to {to}: {reason}")),
                );
            }
            TurnEvent::Answer { turn_id, text } => {
                self.clear_turn(screen, turn_id);
                let streamed = self.streaming.as_deref() == Some(turn_id.as_str());
                if streamed {
                    self.streaming = None;
                } else {
                    screen.line(&Markdown::new(self.look).text(text));
                }
                screen.line("");
            }
            TurnEvent::MemoryWritten { changes, .. } if !changes.is_empty() => {
                screen.line(&self.look.dim(&written_line(changes, screen.cols())));
            }
            TurnEvent::Error {
                turn_id,
                code,
                message,
            } => {
                if let Some(turn) = turn_id {
                    self.clear_turn(screen, turn);
                }
                screen.line(&self.error_line(code, message, screen.cols()));
                if !code.starts_with("memory_extraction") {
                    // The turn ended: a blank line before the next prompt, as after an answer.
                    screen.line("");
                }
            }
            _ => {}
        }
    }

    /// The foreground turn goes on behind the prompt: its spinners become plain lines.
    pub fn park(&mut self, screen: &mut Screen, turn: &str) {
        self.stop_thinking(screen);
        for call in self.calls.values_mut().filter(|c| c.turn == turn) {
            if let Some(bar) = call.bar.take() {
                let note = match &call.job {
                    Some(_) => "… runs as a job; its answer follows here",
                    None => "… works on it; its answer follows here",
                };
                screen.finish(&bar, &format!("{} {}", call.label, self.look.dim(note)));
            }
        }
    }

    /// Stop every spinner (before leaving).
    pub fn clear(&mut self, screen: &mut Screen) {
        self.end_stream(screen);
        self.stop_thinking(screen);
        for (_, call) in self.calls.drain() {
            if let Some(bar) = call.bar {
                screen.clear(&bar);
            }
        }
    }

    /// One line for a note of the chat itself (not of a turn).
    pub fn note(&self, screen: &mut Screen, text: &str) {
        screen.line(&self.look.dim(text));
    }

    fn end_stream(&mut self, screen: &mut Screen) {
        if self.stream.is_open() {
            let out = self.stream.finish(screen.cols());
            screen.write(&out);
        }
    }

    fn stop_thinking(&mut self, screen: &mut Screen) {
        if let Some(bar) = self.thinking.take() {
            screen.clear(&bar);
        }
    }

    fn call_started(
        &mut self,
        screen: &mut Screen,
        turn: &str,
        call_id: &str,
        name: &str,
        arguments: &Value,
        foreground: bool,
    ) {
        if name.starts_with(DELEGATION_PREFIX) {
            // `agent.delegated` names the child and its task.
            return;
        }
        let label = call_label(name, arguments, screen.cols());
        let bar = if foreground {
            screen.spinner("{msg} {spinner:.dim}", &label)
        } else {
            None
        };
        self.calls.insert(
            call_id.to_string(),
            Call {
                turn: turn.to_string(),
                label,
                started: Instant::now(),
                bar,
                job: None,
            },
        );
    }

    fn call_ended(&mut self, screen: &mut Screen, result: &ToolCallResult) {
        let submitted = result.output.get("job_id").is_some()
            && result.output.get("status").and_then(Value::as_str) == Some("submitted");
        if submitted && result.status == ToolStatus::Ok {
            // `job.waiting` follows; the line ends when the job does.
            return;
        }
        let call = self.take(screen, &result.call_id);
        let delegated = result.name.starts_with(DELEGATION_PREFIX);
        let label = match &call {
            Some(c) => c.label.clone(),
            None if delegated => format!("↳ {}", &result.name[DELEGATION_PREFIX.len()..]),
            None => format!("⚙ {}(…)", result.name),
        };
        let outcome = match (&result.error, result.status) {
            (Some(e), _) => self.look.bad(&format!(
                "✗ {}: {}",
                e.code.as_str(),
                first_sentence(&e.message, 80)
            )),
            (None, ToolStatus::Error) => self.look.bad("✗ failed"),
            (None, ToolStatus::Ok) => {
                let job = call.as_ref().is_some_and(|c| c.job.is_some());
                let took = match &call {
                    Some(c) if job || delegated => since(c.started),
                    _ => millis(result.duration_ms),
                };
                let what = if delegated { "✓ answered" } else { "✓" };
                let took = if job {
                    self.look.dim(&format!("job ended after {took}"))
                } else {
                    took
                };
                let repaired = if result.auto_corrected {
                    self.look.dim(" (arguments repaired)")
                } else {
                    String::new()
                };
                format!("{} {took}{repaired}", self.look.good(what))
            }
        };
        screen.line(&format!("{label} {outcome}"));
    }

    fn job_waiting(
        &mut self,
        screen: &mut Screen,
        turn: &str,
        call_id: &str,
        name: &str,
        job_id: &str,
        foreground: bool,
    ) {
        let label = self
            .take(screen, call_id)
            .map(|c| c.label)
            .unwrap_or_else(|| format!("⚙ {name}(…)"));
        let bar = if foreground {
            let hint = "runs as a job · type to talk meanwhile, Ctrl-C cancels";
            screen.spinner(
                &format!("{{msg}} {{spinner:.dim}} {}", self.look.dim(hint)),
                &label,
            )
        } else {
            None
        };
        if bar.is_none() {
            screen.line(&format!(
                "{label} {}",
                self.look
                    .dim(&format!("… runs as job {job_id}; its answer follows"))
            ));
        }
        self.calls.insert(
            call_id.to_string(),
            Call {
                turn: turn.to_string(),
                label,
                started: Instant::now(),
                bar,
                job: Some(job_id.to_string()),
            },
        );
    }

    fn delegated(
        &mut self,
        screen: &mut Screen,
        turn: &str,
        call_id: &str,
        agent: &str,
        task: &str,
        foreground: bool,
    ) {
        let label = format!(
            "↳ {agent}: {}",
            clip(task, screen.cols().saturating_sub(30))
        );
        let bar = if foreground {
            screen.spinner("{msg} {spinner:.dim}", &label)
        } else {
            None
        };
        if bar.is_none() {
            screen.line(&format!("{label} {}", self.look.dim("… works on it")));
        }
        self.calls.insert(
            call_id.to_string(),
            Call {
                turn: turn.to_string(),
                label,
                started: Instant::now(),
                bar,
                job: None,
            },
        );
    }

    fn take(&mut self, screen: &mut Screen, call_id: &str) -> Option<Call> {
        let mut call = self.calls.remove(call_id)?;
        if let Some(bar) = call.bar.take() {
            screen.clear(&bar);
        }
        Some(call)
    }

    /// The turn ended: its calls that never reported stop spinning.
    fn clear_turn(&mut self, screen: &mut Screen, turn: &str) {
        self.recalled.remove(turn);
        let ids: Vec<String> = self
            .calls
            .iter()
            .filter(|(_, c)| c.turn == turn)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(call) = self.take(screen, &id) {
                screen.line(&format!("{} {}", call.label, self.look.dim("⨯ stopped")));
            }
        }
    }

    fn error_line(&self, code: &str, message: &str, cols: usize) -> String {
        if code.starts_with("memory_extraction") {
            return self.look.dim(&format!(
                "· memory not updated: {}",
                clip(message, cols.saturating_sub(24))
            ));
        }
        if code == "cancelled" {
            return self.look.warn("⨯ turn cancelled");
        }
        self.look.bad(&format!("✗ {code}: {message}"))
    }
}

/// Events the view shows nothing for.
fn writes_nothing(event: &TurnEvent) -> bool {
    match event {
        TurnEvent::TurnStarted { .. } | TurnEvent::TurnResumed { .. } => true,
        TurnEvent::MemoryRecalled { memories, .. } => memories.is_empty(),
        TurnEvent::MemoryWritten { changes, .. } => changes.is_empty(),
        _ => false,
    }
}

/// `⚙ name(k=v, …)`, the arguments cut to fit a line `cols` wide.
pub fn call_label(name: &str, arguments: &Value, cols: usize) -> String {
    let args = match arguments {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", short_value(v)))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let room = cols.saturating_sub(name.chars().count() + 30).max(20);
    format!("⚙ {name}({})", clip(&args, room))
}

fn short_value(v: &Value) -> String {
    match v {
        Value::String(s)
            if !s.is_empty() && !s.contains([',', '(', ')', '=', '"', '\n']) && s.len() <= 60 =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

fn recalled_line(memories: &[RecalledMemory], cols: usize) -> String {
    let items: Vec<String> = memories
        .iter()
        .map(|m| format!("{}: {}", m.key, m.content))
        .collect();
    let head = match memories.len() {
        1 => "· recalled 1 memory".to_string(),
        n => format!("· recalled {n} memories"),
    };
    clip(&format!("{head} — {}", items.join(" · ")), cols)
}

fn written_line(changes: &[MemoryChange], cols: usize) -> String {
    let items: Vec<String> = changes
        .iter()
        .map(|c| match c.op {
            AppliedOp::Deleted => format!("forgot {}", c.key),
            _ => format!("{}: {}", c.key, c.content),
        })
        .collect();
    clip(&format!("· remembered — {}", items.join(" · ")), cols)
}

/// `text` cut to `max` characters (an ellipsis marks the cut).
pub fn clip(text: &str, max: usize) -> String {
    let text = text.replace('\n', " ");
    if text.chars().count() <= max {
        return text;
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

fn first_sentence(text: &str, max: usize) -> String {
    let end = text
        .find("; ")
        .or_else(|| text.find(". "))
        .unwrap_or(text.len());
    clip(&text[..end], max)
}

fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn since(started: Instant) -> String {
    millis(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_label_lists_arguments_as_key_value_pairs() {
        assert_eq!(
            call_label("order_lookup", &json!({"order_date": "2025-11-11"}), 100),
            "⚙ order_lookup(order_date=2025-11-11)"
        );
        assert_eq!(
            call_label("add", &json!({"a": 2, "b": 3}), 100),
            "⚙ add(a=2, b=3)"
        );
        assert_eq!(
            call_label("say", &json!({"text": "a, b"}), 100),
            "⚙ say(text=\"a, b\")"
        );
    }

    #[test]
    fn long_arguments_are_cut_to_the_line() {
        let label = call_label("t", &json!({"text": "x".repeat(500)}), 80);
        assert!(label.chars().count() <= 80, "{label}");
        assert!(label.ends_with("…)"), "{label}");
    }

    #[test]
    fn a_forgotten_memory_reads_forgot_and_a_written_one_its_content() {
        let change = |op, key: &str, content: &str| MemoryChange {
            op,
            key: key.into(),
            content: content.into(),
        };
        let line = written_line(
            &[
                change(AppliedOp::Deleted, "trip", "Paris in May"),
                change(AppliedOp::Added, "brand", "Sony"),
            ],
            200,
        );
        assert_eq!(line, "· remembered — forgot trip · brand: Sony");
    }

    #[test]
    fn durations_read_in_milliseconds_then_seconds() {
        assert_eq!(millis(12), "12 ms");
        assert_eq!(millis(3400), "3.4 s");
    }

    #[test]
    fn recalled_memories_fit_one_line() {
        let m = |k: &str| RecalledMemory {
            key: k.into(),
            content: "y".repeat(50),
            score: 1.0,
        };
        let line = recalled_line(&[m("a"), m("b"), m("c")], 60);
        assert!(line.starts_with("· recalled 3 memories — a: y"), "{line}");
        assert_eq!(line.chars().count(), 60);
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod view_tests;
