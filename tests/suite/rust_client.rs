//! The Rust client (`crates/hermes-client`) from a program outside the engine: its example
//! `turn_and_worker`, built here and run against a live `hermes serve` on a real nats-server
//! (the Python client's deployment: its scripted model, tools and trigger). It serves the
//! tools the turns call, so every step passes through the client's worker as well.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::hermes_proc::{output_text, Serve};
use crate::common::nats_server::NatsServer;

/// The client's examples `turn_and_worker` and `readme` (the README's block), built as a user
/// of the crate would: `cargo build -p hermes-client --examples`, in a target directory of
/// their own (a build for one package resolves other features than the workspace's test
/// build, and must not undo it). Returns the directory that holds them.
fn examples() -> PathBuf {
    let hermes = Path::new(env!("CARGO_BIN_EXE_hermes"));
    let target_dir = hermes
        .parent()
        .and_then(Path::parent)
        .expect("the hermes binary is in <target>/<profile>/")
        .join("client-examples");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "-p", "hermes-client", "--examples"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building the client's examples failed:\n{}",
        output_text(&out)
    );
    target_dir.join("debug/examples")
}

#[test]
fn a_program_outside_the_engine_runs_turns_serves_tools_and_writes_memories_with_the_rust_client() {
    let examples = examples();
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python/tests");
    let config = std::fs::read_to_string(fixtures.join("hermes.toml.in"))
        .unwrap()
        .replace(
            "@SCENARIO@",
            fixtures.join("scenario.toml").to_str().unwrap(),
        )
        .replace("@DATA@", dir.path().join("data").to_str().unwrap());
    let config_path = dir.path().join("hermes.toml");
    std::fs::write(&config_path, config).unwrap();
    let _serve = Serve::start(&config_path, &nats.url(), "all");

    let out = Command::new(examples.join("turn_and_worker"))
        .arg(nats.url())
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    // The turn's events, as the typed stream gave them: the worker's result, then the answer.
    let lines: Vec<&str> = text.lines().collect();
    let result = lines
        .iter()
        .position(|l| *l == r#"tool.result word_count {"words":3}"#);
    let answer = lines
        .iter()
        .position(|l| *l == "answer: The worker counted the words.");
    assert!(
        matches!((result, answer), (Some(r), Some(a)) if r < a),
        "{text}"
    );
    assert!(lines.contains(&"turn.started"), "{text}");
    assert!(
        lines.contains(&"confirmation.required archive_note"),
        "{text}"
    );
    assert!(
        lines.contains(&"confirmed: The note is archived."),
        "{text}"
    );
    assert!(
        lines.contains(&"trigger reply: Ticket received: we are on it."),
        "{text}"
    );
    assert!(
        lines.contains(&"memory: 1 written, 1 listed, 1 forgotten, 0 left"),
        "{text}"
    );

    // The README's block, run as it is: a worker of its own, a turn that calls it.
    let out = Command::new(examples.join("readme"))
        .arg(nats.url())
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"tool.result"), "{text}");
    assert!(lines.contains(&"The worker counted the words."), "{text}");
}

/// The Rust block of "Rust: `hermes-client`" (docs/clients.md) is
/// `crates/hermes-client/examples/readme.rs`, word for word: compiled with every build, run by
/// the test above. Its fence may carry a harness directive (`rust no-run — …`).
#[test]
fn the_readmes_rust_block_is_the_example_the_tests_build_and_run() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example =
        std::fs::read_to_string(repo.join("crates/hermes-client/examples/readme.rs")).unwrap();
    let body = format!("\n{example}```\n");
    let mut documents = vec![repo.join("README.md")];
    if let Ok(docs) = std::fs::read_dir(repo.join("docs")) {
        documents.extend(docs.filter_map(Result::ok).map(|e| e.path()));
    }
    let is_rust_fence = |text: &str, at: usize| {
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        text[line_start..at].starts_with("```rust")
    };
    let found = documents.iter().any(|path| {
        path.extension().is_some_and(|e| e == "md")
            && std::fs::read_to_string(path).is_ok_and(|text| {
                text.match_indices(&body)
                    .any(|(at, _)| is_rust_fence(&text, at))
            })
    });
    assert!(
        found,
        "no ```rust block of README.md or docs/*.md is crates/hermes-client/examples/readme.rs \
         as it is: copy the file into the block (or the block into the file)"
    );
}
