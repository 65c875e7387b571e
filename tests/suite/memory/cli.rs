//! `hermes memory …` on a data directory, and `hermes eval memory` on the sample dataset.

use std::path::{Path, PathBuf};

use chrono::{Duration, Utc};
use hermes::memory::{MemoryStore, Source};

use super::update;

use crate::common::hermes_proc::hermes;

/// A data directory where alice has a long-term memory, a short-term one, and one that
/// expired a day ago.
fn prepared_data_dir(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let db = hermes::store::durability::Durable::from(hermes::store::open(&data).unwrap());
    let store = MemoryStore::open(&db).unwrap();
    let old = Utc::now() - Duration::days(3);
    let source = Source {
        session: "s".into(),
        message_id: "m".into(),
        source_time: old,
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        store
            .apply(
                "alice",
                "default",
                &[update("home_city", "lives in Hangzhou", None)],
                &source,
            )
            .await
            .unwrap();
        store
            .apply(
                "alice",
                "default",
                &[update("parcel", "parcel arrives in two days", Some(1))],
                &source,
            )
            .await
            .unwrap();
        let mut trip = store
            .apply(
                "alice",
                "default",
                &[update("trip", "flies to Tokyo", Some(1))],
                &source,
            )
            .await
            .unwrap()
            .remove(0)
            .record
            .unwrap();
        trip.expires_at = Some(Utc::now() - Duration::days(1));
        store.insert_record(&trip).unwrap();
        store.flush().await.unwrap();
    });
    data
}

fn run(data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = hermes()
        .arg("memory")
        .args(args)
        .args(["--data-dir", data.to_str().unwrap()])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn memory_commands_list_search_sweep_and_forget() {
    let dir = tempfile::tempdir().unwrap();
    let data = prepared_data_dir(dir.path());
    let (ok, out, err) = run(&data, &["ls", "--user", "alice"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("home_city") && out.contains("lives in Hangzhou"),
        "{out}"
    );
    assert!(
        out.contains("KEY") && out.contains("2 memories"),
        "expired trip hidden: {out}"
    );
    let (_, out, _) = run(&data, &["ls", "--user", "alice", "--all"]);
    assert!(
        out.contains("3 memories") && out.contains("expired"),
        "{out}"
    );

    let (ok, out, err) = run(
        &data,
        &["search", "--user", "alice", "where does she live? Hangzhou"],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("home_city") && !out.contains("parcel"),
        "{out}"
    );
    let (_, out, _) = run(&data, &["search", "--user", "bob", "Hangzhou"]);
    assert!(out.contains("nothing recalled"), "{out}");

    let (ok, out, err) = run(&data, &["sweep"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("swept 3 records: 1 demoted, 0 removed"),
        "{out}"
    );
    let (_, out, _) = run(&data, &["sweep"]);
    assert!(
        out.contains("swept 3 records: 0 demoted, 1 removed"),
        "{out}"
    );

    let (ok, out, err) = run(&data, &["forget", "--user", "alice", "--key", "parcel"]);
    assert!(ok, "{err}");
    assert!(out.contains("forgot") && out.contains("parcel"), "{out}");
    let (_, out, _) = run(&data, &["ls", "--user", "alice"]);
    assert!(
        out.contains("1 memories") && !out.contains("parcel"),
        "{out}"
    );
}

#[test]
fn memory_command_on_a_directory_in_use_says_to_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = prepared_data_dir(dir.path());
    let _held = hermes::store::open(&data).unwrap();
    let (ok, _, err) = run(&data, &["ls", "--user", "alice"]);
    assert!(!ok);
    assert!(
        err.contains("locked") && err.contains("hermes serve"),
        "{err}"
    );
}

fn sample() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/memory-eval-sample.json"
    )
    .to_string()
}

fn eval(retriever: &str) -> serde_json::Value {
    let out = hermes()
        .args([
            "eval",
            "memory",
            "--dataset",
            &sample(),
            "--retriever",
            retriever,
        ])
        .args(["--k", "1,5,10", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn any_at(report: &serde_json::Value, i: usize) -> f64 {
    report["overall"][i]["any"].as_f64().unwrap()
}

#[test]
fn eval_memory_bm25_on_the_sample_gives_sane_recall() {
    let r = eval("bm25");
    assert_eq!(r["questions"], 20);
    assert_eq!(r["samples"], 2);
    assert!(r["records"].as_u64().unwrap() > 20);
    let (at1, at5, at10) = (any_at(&r, 0), any_at(&r, 1), any_at(&r, 2));
    assert!(at1 <= at5 && at5 <= at10, "{r}");
    assert!(
        at5 >= 0.5,
        "BM25 finds most evidence turns in the top 5: {r}"
    );
    for row in r["overall"].as_array().unwrap() {
        let (any, all, frac) = (
            row["any"].as_f64().unwrap(),
            row["all"].as_f64().unwrap(),
            row["fraction"].as_f64().unwrap(),
        );
        assert!(all <= frac && frac <= any, "all ≤ fraction ≤ any: {row}");
    }
    assert!(r["per_category"]["4"].is_array(), "{r}");
    assert!(r["latency_ms_p99"].as_f64().unwrap() >= r["latency_ms_p50"].as_f64().unwrap());
}

#[cfg(feature = "local-embedder")]
#[test]
fn eval_memory_hybrid_with_the_local_model_runs_on_the_sample() {
    let model = std::env::var_os("HERMES_EMBEDDER_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/models/all-MiniLM-L6-v2")
        });
    assert!(
        model.join("model.safetensors").exists(),
        "all-MiniLM-L6-v2 missing at {}: run scripts/setup-test-deps.sh",
        model.display()
    );
    let out = hermes()
        .env("HERMES_EMBEDDER_MODEL_DIR", &model)
        .args([
            "eval",
            "memory",
            "--dataset",
            &sample(),
            "--retriever",
            "hybrid",
            "--k",
            "5",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["embedder"], "local:all-MiniLM-L6-v2");
    assert!(any_at(&r, 0) >= 0.5, "{r}");
}
