//! A real model in the first minute: the OpenAI conventions of the environment, `--model`,
//! `hermes doctor`, and the scripted model's polite answer to what it does not know — all
//! through the `hermes` binary against a local OpenAI-compatible server.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::json;

use crate::common::fake_openai::FakeOpenAi;
use crate::common::hermes_proc::hermes;

fn fake_model() -> (tokio::runtime::Runtime, FakeOpenAi) {
    FakeOpenAi::start_auto("add", json!({"a": 2, "b": 3}))
}

fn text(out: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn with_openai_env(cmd: &mut Command, fake: &FakeOpenAi) {
    cmd.env("OPENAI_BASE_URL", fake.base_url())
        .env("OPENAI_API_KEY", "sk-from-env");
}

#[test]
fn send_with_only_openai_env_runs_a_turn_with_a_tool_call() {
    let (_rt, fake) = fake_model();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = hermes();
    with_openai_env(&mut cmd, &fake);
    let out = cmd
        .args(["send", "--session", "s1", "--text", "What is 2 + 3?"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("[tool.call] add"), "{all}");
    assert!(all.contains("[answer] Done:"), "{all}");
    let requests = fake.requests();
    assert_eq!(requests[0]["model"], "gpt-4o-mini", "the default model");
    assert!(
        requests.iter().any(|r| r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool")),
        "the tool result went back to the model"
    );
    assert!(fake
        .authorizations()
        .iter()
        .all(|a| a.as_deref() == Some("Bearer sk-from-env")));
}

#[test]
fn model_flag_and_hermes_model_name_the_model() {
    let (_rt, fake) = fake_model();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = hermes();
    with_openai_env(&mut cmd, &fake);
    let out = cmd
        .env("HERMES_MODEL", "qwen2.5:7b")
        .args(["send", "--session", "s1", "--text", "hi"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fake.requests()[0]["model"], "qwen2.5:7b");

    let mut cmd = hermes();
    with_openai_env(&mut cmd, &fake);
    let out = cmd
        .env("HERMES_MODEL", "qwen2.5:7b")
        .args([
            "--model",
            "fake-model",
            "send",
            "--session",
            "s2",
            "--text",
            "hi",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fake.requests().last().unwrap()["model"], "fake-model");
}

#[test]
fn doctor_shows_where_each_model_came_from_and_probes_the_endpoint() {
    let (_rt, fake) = fake_model();
    let mut cmd = hermes();
    with_openai_env(&mut cmd, &fake);
    let out = cmd.arg("doctor").output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("environment (OPENAI_API_KEY, OPENAI_BASE_URL)"),
        "{all}"
    );
    assert!(all.contains(&fake.base_url()), "{all}");
    assert!(all.contains("$OPENAI_API_KEY (set)"), "{all}");
    assert!(all.contains("ok: GET /models"), "{all}");

    let mut cmd = hermes();
    with_openai_env(&mut cmd, &fake);
    let out = cmd
        .args(["--model", "no-such-model", "doctor"])
        .output()
        .unwrap();
    let all = text(&out);
    assert!(
        !out.status.success(),
        "an unserved model fails the probe:\n{all}"
    );
    assert!(all.contains("`no-such-model` is not among them"), "{all}");
    assert!(all.contains("--model"), "{all}");
}

#[test]
fn doctor_without_any_model_says_how_to_connect_one() {
    let out = hermes().args(["doctor"]).output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("embedded defaults"), "{all}");
    assert!(all.contains("OPENAI_API_KEY"), "{all}");
}

#[test]
fn demo_keeps_its_script_when_only_the_environment_names_a_model() {
    let (_rt, fake) = fake_model();
    let mut cmd = hermes();
    with_openai_env(&mut cmd, &fake);
    let out = cmd.arg("demo").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        fake.requests().is_empty(),
        "the demo must not call the endpoint"
    );
}

#[test]
fn chat_with_the_demo_script_answers_an_unknown_message_without_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = hermes()
        .args(["chat", "--session", "c1"])
        .arg("--data-dir")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What's the weather like in Paris?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("scripted demo model") && stderr.contains("OPENAI_API_KEY"),
        "the start notice:\n{all}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("› What's the weather like in Paris?"),
        "piped input reads as a transcript:\n{all}"
    );
    assert!(stdout.contains("only know the demo story"), "{all}");
    assert!(!stdout.contains("✗") && !stderr.contains("error:"), "{all}");
}

#[test]
fn chat_trace_prints_every_event_as_send_does() {
    let (_rt, fake) = fake_model();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = hermes();
    with_openai_env(&mut cmd, &fake);
    let mut child = cmd
        .args(["chat", "--trace", "--session", "c1"])
        .arg("--data-dir")
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is 2 + 3?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for event in [
        "▶ turn",
        "[tool.call] add",
        "[tool.result] add ok",
        "[delta]",
        "[answer] Done:",
    ] {
        assert!(stdout.contains(event), "{event} in the trace:\n{all}");
    }
    assert!(
        !dir.path().join("chat.log").exists(),
        "with --trace logs stay on stderr"
    );
}
