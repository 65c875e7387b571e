//! Context assembly for one planning step of a 500-turn session (issue 3): the per-step work
//! that must not grow with history.
//!
//! - `assemble/500_turns_summarised`: turns 1–490 folded into a history summary, the last 10
//!   turns verbatim, under the default 128k window — the steady state of a long session;
//! - `assemble/500_turns_unsummarised_8k`: all 2,000 messages offered to an 8k window, so
//!   older turns are dropped and tool results shrunk — the worst case before compaction runs.
//!
//! Token counts are stored with each message (computed once, as the engine does), so this
//! measures the budget walk, not tokenisation. Besides criterion's estimate, each case prints
//! p50/p99 over 2,000 runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

use hermes::context::budget::{self, ContextParts, Counted};
use hermes::context::compaction::ToolResultShrinker;
use hermes::context::tokens::TokenCounter;
use hermes::llm::{ChatMessage, ToolCall};
use hermes::store::sessions::StoredMessage;

const TURNS: u64 = 500;
const RECENT: u64 = 10;

fn stored(tokens: &TokenCounter, seq: u64, turn: u64, message: ChatMessage) -> StoredMessage {
    StoredMessage {
        seq,
        id: format!("m{seq}"),
        turn_id: format!("turn-{turn}"),
        ts: Utc::now(),
        tokens: tokens.count_message(&message),
        usage: None,
        tool_status: None,
        message: message.into(),
    }
}

/// A W1-shaped session: user → tool call → tool result → answer, per turn.
fn session(tokens: &TokenCounter) -> Vec<StoredMessage> {
    let mut log = Vec::new();
    for t in 1..=TURNS {
        let seq = log.len() as u64;
        let call = ToolCall {
            id: format!("call_{t}_{}", 1000 + t),
            name: "add".into(),
            arguments: json!({"a": t, "b": 1000 + t}),
        };
        let result = json!({
            "tool_use_id": call.id, "tool_name": "add", "status": "ok",
            "summary": format!("add → {}", 2 * t + 1000),
            "detail": format!("{{\"result\":{}, \"note\":\"{}\"}}", 2 * t + 1000, "x".repeat(200)),
            "raw_reference": format!("raw-{t}"),
        });
        let messages = [
            ChatMessage::user(format!("turn {t}: add {t} and {}", 1000 + t)),
            ChatMessage::assistant_calls(String::new(), vec![call.clone()]),
            ChatMessage::tool(call.id.clone(), "add", result.to_string()),
            ChatMessage::assistant(format!("The answer is {}.", 2 * t + 1000)),
        ];
        for (i, m) in messages.into_iter().enumerate() {
            log.push(stored(tokens, seq + i as u64, t, m));
        }
    }
    log
}

struct Case {
    system: Arc<ChatMessage>,
    goal: Arc<ChatMessage>,
    summary: Arc<ChatMessage>,
    log: Vec<StoredMessage>,
    tokens: TokenCounter,
}

impl Case {
    fn new() -> Self {
        let tokens = TokenCounter::for_model("gpt-4o-mini").unwrap();
        let summary_text = "The user asked for sums of t and 1000+t for turns 1 to 490; \
                            each was computed with `add` and answered. "
            .repeat(20);
        Self {
            system: Arc::new(ChatMessage::system(
                "You are a careful assistant. Use tools when needed.",
            )),
            goal: Arc::new(ChatMessage::system(
                "Task goal (pinned; keep working towards it): add numbers",
            )),
            summary: Arc::new(ChatMessage::system(format!(
                "Summary of the earlier conversation: {summary_text}"
            ))),
            log: session(&tokens),
            tokens,
        }
    }

    /// One step's assembly: history from `from` up to the current (last) turn.
    fn assemble(&self, from: usize, with_summary: bool, budget: usize) -> usize {
        let current_start = self.log.len() - 4;
        let parts = ContextParts {
            system: Counted {
                message: &self.system,
                tokens: 20,
            },
            tools_tokens: 400,
            goal: Some(Counted {
                message: &self.goal,
                tokens: 15,
            }),
            memory: None,
            key_facts: None,
            summary: with_summary.then_some(Counted {
                message: &self.summary,
                tokens: 300,
            }),
            history: &self.log[from..current_start],
            current: &self.log[current_start..current_start + 1],
        };
        let shrinker = ToolResultShrinker {
            tokens: &self.tokens,
        };
        budget::assemble(&parts, budget, &shrinker)
            .expect("fits")
            .messages
            .len()
    }
}

fn percentiles(mut f: impl FnMut() -> usize) -> (f64, f64) {
    let mut samples: Vec<f64> = (0..2000)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[999], samples[1979])
}

fn bench(c: &mut Criterion) {
    let case = Case::new();
    let summarised_from = ((TURNS - RECENT) * 4) as usize;
    let big = budget::budget(128_000, 4096);
    let small = budget::budget(8_000, 1024);
    let mut group = c.benchmark_group("assemble");
    group.bench_function("500_turns_summarised", |b| {
        b.iter(|| case.assemble(summarised_from, true, big))
    });
    group.bench_function("500_turns_unsummarised_8k", |b| {
        b.iter(|| case.assemble(0, false, small))
    });
    group.finish();
    let (p50, p99) = percentiles(|| case.assemble(summarised_from, true, big));
    println!("assemble/500_turns_summarised: p50 {p50:.1}µs  p99 {p99:.1}µs");
    let (p50, p99) = percentiles(|| case.assemble(0, false, small));
    println!("assemble/500_turns_unsummarised_8k: p50 {p50:.1}µs  p99 {p99:.1}µs");
}

criterion_group!(benches, bench);
criterion_main!(benches);
