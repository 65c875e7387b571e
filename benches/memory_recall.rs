//! Recall latency of the memory service at 10k and 100k records (1k per user), and 1M with
//! `HERMES_BENCH_1M=1` (slow to fill). Recall reads only the asking user's records, so latency
//! should depend on records per user, not on the total.
//!
//! Recall goes through [`MemoryService::recall`] as a turn's does: with the default static
//! embedder when it is installed (`scripts/fetch-embedder.sh`; records are embedded once when
//! written, the query at every recall — included in the timings), BM25 alone otherwise (the
//! bench says which). Besides criterion's estimate, each size prints p50/p99 over 500 recalls
//! of random users: `cargo bench --bench memory_recall`. Under `cargo test` (no `--bench`) it
//! only smoke-tests 2k records.

#![allow(clippy::expect_used)]

use std::time::Instant;

use chrono::{Duration, Utc};
use criterion::{criterion_group, criterion_main, Criterion};
use hermes::config::{Config, EmbedderConfig};
use hermes::memory::{MemoryKind, MemoryRecord, MemoryService, RecallFilter, RecallQuery, Source};

const PER_USER: usize = 1000;

const SUBJECTS: &[&str] = &[
    "headphones",
    "budget",
    "flight",
    "hotel",
    "cat",
    "allergy",
    "coffee",
    "laptop",
    "running",
    "piano",
    "耳机",
    "预算",
    "航班",
    "酒店",
    "咖啡",
    "电脑",
    "跑步",
    "钢琴",
];
const DETAILS: &[&str] = &[
    "prefers Sony",
    "about 5000 yuan",
    "to Tokyo in May",
    "near the station",
    "named Pixel",
    "no peanuts",
    "oat milk only",
    "ThinkPad X1",
    "every morning",
    "lessons on Sunday",
    "喜欢索尼",
    "五千元左右",
    "五月去东京",
    "靠近车站",
    "不要花生",
    "燕麦奶",
];

/// Tiny deterministic generator (no extra dependency).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next() % items.len()]
    }
}

fn record(user: usize, i: usize, rng: &mut Lcg) -> MemoryRecord {
    let now = Utc::now() - Duration::days((rng.next() % 400) as i64);
    let subject = rng.pick(SUBJECTS);
    MemoryRecord {
        id: format!("{i:08}"),
        user: format!("user{user:05}"),
        namespace: "default".into(),
        kind: MemoryKind::Fact,
        key: format!("{subject}_{i}"),
        content: format!("{subject}: {} and {}", rng.pick(DETAILS), rng.pick(DETAILS)),
        importance: 0.5,
        confidence: 0.6,
        topics: vec![subject.to_string()],
        created_at: now,
        updated_at: now,
        expires_at: None,
        source: Source {
            session: "bench".into(),
            message_id: format!("m{i}"),
            source_time: now,
        },
        version: 1,
        history: Vec::new(),
        event_time: None,
        demoted_at: None,
    }
}

fn fill(rt: &tokio::runtime::Runtime, total: usize) -> (tempfile::TempDir, MemoryService) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = hermes::store::durability::Durable::from(
        hermes::store::open(dir.path()).expect("sled opens"),
    );
    let config = Config::embedded().expect("default config");
    let embedder_config = match &config.memory.embedder {
        EmbedderConfig::None => EmbedderConfig::Static { model_dir: None },
        other => other.clone(),
    };
    let embedder = hermes::memory::embed::from_config(&embedder_config).expect("embedder");
    let service = MemoryService::open(&db, &config.memory, embedder).expect("service opens");
    let mut rng = Lcg(7);
    let started = Instant::now();
    let mut batch = Vec::with_capacity(PER_USER);
    for i in 0..total {
        batch.push(record(i / PER_USER, i, &mut rng));
        if batch.len() == PER_USER || i + 1 == total {
            rt.block_on(service.import(&batch)).expect("import");
            batch.clear();
        }
    }
    db.flush().expect("flush");
    eprintln!(
        "filled {total} records in {:.1} s, recall with {}",
        started.elapsed().as_secs_f64(),
        service.embedder_id().map_or(
            "BM25 alone (run scripts/fetch-embedder.sh for the static embedder)".to_string(),
            |id| format!("BM25 + vectors by {id}")
        )
    );
    (dir, service)
}

fn query(user: String, text: &str) -> RecallQuery {
    RecallQuery {
        user,
        text: text.to_string(),
        filter: RecallFilter::default(),
        limit: 5,
        min_score: 0.1,
        weights: None,
        now: Utc::now(),
    }
}

const QUERIES: &[&str] = &[
    "what is my headphones budget",
    "我的耳机预算是多少",
    "when is my flight to Tokyo",
    "does my cat have an allergy",
    "咖啡要加什么奶",
];

fn percentiles(rt: &tokio::runtime::Runtime, service: &MemoryService, users: usize) -> (f64, f64) {
    let mut rng = Lcg(11);
    let mut ms: Vec<f64> = (0..500)
        .map(|_| {
            let user = format!("user{:05}", rng.next() % users);
            let q = query(user, rng.pick(QUERIES));
            let t = Instant::now();
            let hits = rt.block_on(service.recall(q)).expect("recall");
            std::hint::black_box(hits);
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], ms[(ms.len() * 99) / 100])
}

fn bench_recall(c: &mut Criterion) {
    // `cargo test --all-targets` runs benches once without `--bench`: keep that a quick smoke.
    let measuring = std::env::args().any(|a| a == "--bench");
    let mut sizes = if measuring {
        vec![10_000, 100_000]
    } else {
        vec![2_000]
    };
    if measuring && std::env::var("HERMES_BENCH_1M").is_ok_and(|v| v == "1") {
        sizes.push(1_000_000);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("memory_recall");
    group.sample_size(30);
    for total in sizes {
        let (_dir, service) = fill(&rt, total);
        let users = total / PER_USER;
        let (p50, p99) = percentiles(&rt, &service, users);
        eprintln!("recall at {total} records ({users} users × {PER_USER}): p50 {p50:.2} ms, p99 {p99:.2} ms");
        let mut rng = Lcg(3);
        group.bench_function(format!("{total}_records"), |b| {
            b.iter(|| {
                let user = format!("user{:05}", rng.next() % users);
                rt.block_on(service.recall(query(user, rng.pick(QUERIES))))
                    .expect("recall")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_recall);
criterion_main!(benches);
