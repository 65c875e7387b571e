//! Real token counts of the texts a turn stores (each new message is counted once, when it is
//! stored): a short user message, a tool call's JSON arguments, a tool result, Chinese text,
//! and a 10 KB document. Counts are o200k_base, exact (`TokenCounter::for_model("gpt-4o")`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};

use hermes::context::tokens::TokenCounter;

fn texts() -> Vec<(&'static str, String)> {
    let document = "Hermes keeps every session's history in sled and sends the model a window \
                    of it, counted in real tokens. "
        .repeat(90);
    vec![
        ("user_message", "turn 12: add 17 and 1012, then tell me the sum".to_string()),
        ("tool_arguments", r#"{"a":17,"b":1012}"#.to_string()),
        (
            "tool_result",
            r#"{"status":"shipped","carrier":"DHL","eta":"2026-12-06","items":[{"sku":"A1","qty":2}]}"#
                .to_string(),
        ),
        ("chinese", "帮我查一下我去年双十一买的耳机订单到哪了，谢谢！".to_string()),
        ("document_10kb", document),
    ]
}

fn count(c: &mut Criterion) {
    let counter = TokenCounter::for_model("gpt-4o").expect("o200k_base");
    let mut group = c.benchmark_group("count_text");
    for (name, text) in texts() {
        group.bench_function(name, |b| {
            b.iter(|| counter.count_text(std::hint::black_box(&text)))
        });
    }
    group.finish();
}

criterion_group!(benches, count);
criterion_main!(benches);
