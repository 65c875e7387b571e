//! `hermes backup` / `hermes restore` round trips, on the embedded bus and on NATS: a
//! deployment with sessions, memories, an async job and MCP audit records is backed up while
//! it serves, restored into a fresh deployment (a new data directory; on NATS a new
//! nats-server too), and there every session continues with its history, the memories are
//! listed, the job's record and the audit records are there. A restore into a target that
//! holds data is refused unless --force. On NATS, the extraction jobs the session log carries
//! and no memory-extractor had done yet are done after the restore.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::hermes_proc::{hermes, Serve};
use crate::common::nats_server::NatsServer;
use crate::common::scenario::*;

fn script() -> Scenario {
    Scenario::new("backup")
        .rule(on_user(&["sum"]).calls("add", json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(
            on_user(&["report"]).calls("generate_report", json!({"topic": "phones", "seconds": 1})),
        )
        .rule(after_tool("generate_report").says("Your report is ready."))
        .rule(on_user(&["headphones"]).calls(
            "catalog__search_products",
            json!({"brand": "Sony", "category": "headphones", "max_price_yuan": 5000}),
        ))
        .rule(after_tool("catalog__search_products").says("Found some."))
        .rule(on_user(&[]).says("Noted."))
        .rule(on_user(&["sum"]).role("extractor").says(
            r#"{"memory_updates": [{"op": "add", "kind": "preference", "key": "favourite_number", "content": "likes the number 42", "importance": 0.8}]}"#,
        ))
        .rule(
            on_user(&[])
                .role("extractor")
                .says(r#"{"memory_updates": []}"#),
        )
}

/// `hermes --config CONFIG ARGS…`: (success, stdout, stderr).
fn cli(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out = hermes()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("hermes runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(config: &Path, args: &[&str]) -> String {
    let (success, out, err) = cli(config, args);
    assert!(success, "hermes {args:?} failed:\n{out}\n{err}");
    out
}

fn eventually(config: &Path, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out, err) = cli(config, args);
        if done(&out) {
            return out;
        }
        assert!(
            Instant::now() < until,
            "hermes {args:?} never got there:\n{out}\n{err}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Send `text` to `session` as u1 over `bus` (`embedded`: the serve's data directory is
/// reached by the serve itself, so `hermes send` needs NATS; on the embedded bus the turn
/// runs in `hermes send`'s own engine before the serve starts).
fn send(config: &Path, bus: &[&str], session: &str, text: &str, expect: &str) {
    let mut args = vec!["send", "--session", session, "--user", "u1", "--text", text];
    args.extend_from_slice(&["--timeout", "60"]);
    args.extend_from_slice(bus);
    let out = ok(config, &args);
    assert!(out.contains(expect), "{text}: {out}");
}

/// The id of the job the `report` session started.
fn job_id(config: &Path, reach: &[&str]) -> String {
    let mut args = vec!["sessions", "show", "s2", "--json"];
    args.extend_from_slice(reach);
    let shown = ok(config, &args);
    let at = shown
        .find("job-")
        .expect("the report's job id is in its session");
    shown[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// What the fresh deployment must show after the restore, while it serves.
fn continues(config: &Path, bus: &[&str], reach: &[&str]) {
    send(config, bus, "s1", "the sum again", "The sum is 42.");
    let mut show = vec!["sessions", "show", "s1"];
    show.extend_from_slice(reach);
    let shown = ok(config, &show);
    assert!(
        shown.contains("what is the sum?") && shown.contains("the sum again"),
        "the session continued with its history: {shown}"
    );
    let mut memories = vec!["memory", "ls", "--user", "u1"];
    memories.extend_from_slice(reach);
    eventually(config, &memories, |out| out.contains("favourite_number"));
    let mut audit = vec!["mcp", "audit", "--limit", "50"];
    audit.extend_from_slice(reach);
    let audit = ok(config, &audit);
    assert!(audit.contains("search_products"), "{audit}");
}

#[test]
fn an_embedded_deployment_backed_up_while_serving_continues_in_a_fresh_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let source = write_serve_config(dir.path(), "source", &script());
    // The turns run in `hermes send`'s engine on the directory; then a serve holds it.
    send(&source, &[], "s1", "what is the sum?", "The sum is 42.");
    send(
        &source,
        &[],
        "s2",
        "a report please",
        "Your report is ready.",
    );
    send(&source, &[], "s3", "headphones?", "Found some.");
    let serve = Serve::start(&source, "embedded", "all");
    eventually(&source, &["memory", "ls", "--user", "u1"], |out| {
        out.contains("favourite_number")
    });
    let job = job_id(&source, &[]);
    let file = dir.path().join("embedded.hermes-backup");
    let written = ok(&source, &["backup", "--out", file.to_str().unwrap()]);
    assert!(
        written.contains("backed up") && written.contains("sessions"),
        "{written}"
    );
    serve.stop();

    let target = write_serve_config(dir.path(), "target", &script());
    let restored = ok(&target, &["restore", file.to_str().unwrap()]);
    assert!(restored.contains("restored"), "{restored}");
    let (success, _, err) = cli(&target, &["restore", file.to_str().unwrap()]);
    assert!(!success && err.contains("--force"), "{err}");
    ok(&target, &["restore", file.to_str().unwrap(), "--force"]);

    // The job's record came back (the tool-executor's `jobs` tree).
    {
        let data = dir.path().join("target-data");
        let db = hermes::store::open_durable(&data, hermes::store::durability::Mode::Sync).unwrap();
        let jobs = hermes::tools::jobs::JobStore::open(&db).unwrap();
        let record = jobs.get(&job).unwrap();
        assert!(record.is_some(), "job {job} restored");
    }
    let serve = Serve::start(&target, "embedded", "all");
    // `hermes send` cannot share the held directory: the serve answers the CLI through its
    // socket; the session goes on in a turn of its own after it stops.
    let shown = ok(&target, &["sessions", "show", "s2"]);
    assert!(shown.contains("Your report is ready."), "{shown}");
    let audit = ok(&target, &["mcp", "audit", "--limit", "50"]);
    assert!(audit.contains("search_products"), "{audit}");
    serve.stop();
    continues(&target, &[], &[]);
}

#[test]
fn a_nats_deployment_backed_up_while_serving_continues_on_a_fresh_nats_server() {
    let dir = tempfile::tempdir().unwrap();
    let first = NatsServer::start();
    let url = first.url();
    let source = write_serve_config(dir.path(), "source", &script());
    let serve = Serve::start(&source, &url, "all");
    let bus = ["--bus", url.as_str()];
    send(&source, &bus, "s1", "what is the sum?", "The sum is 42.");
    send(
        &source,
        &bus,
        "s2",
        "a report please",
        "Your report is ready.",
    );
    send(&source, &bus, "s3", "headphones?", "Found some.");
    eventually(
        &source,
        &["memory", "ls", "--user", "u1", "--bus", &url],
        |out| out.contains("favourite_number"),
    );
    let job = job_id(&source, &bus);
    let file = dir.path().join("nats.hermes-backup");
    let written = ok(
        &source,
        &["backup", "--out", file.to_str().unwrap(), "--bus", &url],
    );
    for stream in [
        "HERMES_SESSION_LOG",
        "HERMES_MEMORY_LOG",
        "HERMES_AUDIT",
        "KV_hermes_jobs",
    ] {
        assert!(written.contains(stream), "{stream} backed up: {written}");
    }
    serve.stop();
    drop(first);

    let second = NatsServer::start();
    let url = second.url();
    let bus = ["--bus", url.as_str()];
    let target = write_serve_config(dir.path(), "target", &script());
    ok(&target, &["restore", file.to_str().unwrap(), "--bus", &url]);
    let (success, _, err) = cli(&target, &["restore", file.to_str().unwrap(), "--bus", &url]);
    assert!(!success && err.contains("--force"), "{err}");
    let force = [
        file.to_str().unwrap(),
        "--bus",
        &url,
        "--force",
        "--replicas",
        "1",
    ];
    let replaced = ok(&target, &[&["restore"][..], &force].concat());
    assert!(replaced.contains("HERMES_SESSION_LOG"), "{replaced}");

    let _serve = Serve::start(&target, &url, "all");
    continues(&target, &bus, &bus);
    let shown = ok(&target, &["sessions", "show", "s2", "--bus", &url]);
    assert!(shown.contains("Your report is ready."), "{shown}");
    // The job's record is in the restored bucket.
    let rt = crate::common::runtime::multi_thread(1);
    rt.block_on(async {
        let client = async_nats::connect(&url).await.unwrap();
        let kv = async_nats::jetstream::new(client)
            .get_key_value(hermes::tools::jobs::BUCKET)
            .await
            .unwrap();
        let record = kv.get(&job).await.unwrap();
        assert!(record.is_some(), "job {job} restored");
    });
}

#[test]
fn a_nats_backup_keeps_the_extraction_jobs_no_memory_extractor_had_done_for_the_restore() {
    let dir = tempfile::tempdir().unwrap();
    let first = NatsServer::start();
    let url = first.url();
    let source = write_serve_config(dir.path(), "source", &script());
    // No memory-extractor: the answer's append carries its job, and nobody takes it.
    let serve = Serve::start(&source, &url, "session,planner,tool-executor");
    let bus = ["--bus", url.as_str()];
    send(&source, &bus, "s1", "what is the sum?", "The sum is 42.");
    let file = dir.path().join("nats.hermes-backup");
    let written = ok(
        &source,
        &[
            "backup",
            "--out",
            file.to_str().unwrap(),
            "--bus",
            &url,
            "--json",
        ],
    );
    let manifest: serde_json::Value = serde_json::from_str(&written).expect("a JSON manifest");
    assert_eq!(
        manifest["streams"]["HERMES_MEMORY_EXTRACT"], 1,
        "the turn's job is queued in the backup: {written}"
    );
    serve.stop();
    drop(first);

    let second = NatsServer::start();
    let url = second.url();
    let target = write_serve_config(dir.path(), "target", &script());
    ok(&target, &["restore", file.to_str().unwrap(), "--bus", &url]);
    let _serve = Serve::start(&target, &url, "all");
    eventually(
        &target,
        &["memory", "ls", "--user", "u1", "--bus", &url],
        |out| out.contains("favourite_number"),
    );
}
