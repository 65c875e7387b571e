//! A real model in the first minute: the OpenAI conventions of the environment, `--model`,
//! `hermes doctor`, and the scripted models' polite answers (the defaults' placeholder, the
//! demo's script) — all through the `hermes` binary against a local OpenAI-compatible server.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::fake_openai::FakeOpenAi;
use crate::common::hermes_proc::hermes;

fn fake_model() -> (tokio::runtime::Runtime, FakeOpenAi) {
    FakeOpenAi::start_auto("current_time", json!({}))
}

use crate::common::hermes_proc::output_text as text;

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
        .args(["send", "--session", "s1", "--text", "What time is it?"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("[tool.call] current_time"), "{all}");
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

/// `hermes chat` with `extra` arguments, one message on stdin: (stdout, stderr, success).
fn chat_once(extra: &[&str], message: &str) -> (String, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = hermes()
        .args(extra)
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
        .write_all(format!("{message}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

#[test]
fn chat_without_a_model_answers_with_how_to_connect_one() {
    let (stdout, stderr, ok) = chat_once(&[], "What's the weather like in Paris?");
    let all = format!("{stdout}\n--- stderr ---\n{stderr}");
    assert!(ok, "{all}");
    assert!(
        stderr.contains("No model is configured") && stderr.contains("hermes init"),
        "the start notice:\n{all}"
    );
    assert!(stdout.contains("No model is connected yet"), "{all}");
    assert!(!stdout.contains("✗") && !stderr.contains("error:"), "{all}");
}

#[test]
fn chat_with_the_demo_profile_answers_an_unknown_message_without_an_error() {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml");
    let (stdout, stderr, ok) = chat_once(&["--config", demo], "What's the weather like in Paris?");
    let all = format!("{stdout}\n--- stderr ---\n{stderr}");
    assert!(ok, "{all}");
    assert!(
        stderr.contains("scripted demo model") && stderr.contains("OPENAI_API_KEY"),
        "the start notice:\n{all}"
    );
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
        .write_all(b"What time is it?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for event in [
        "▶ turn",
        "[tool.call] current_time",
        "[tool.result] current_time ok",
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

#[test]
fn doctor_probes_responses_and_anthropic_endpoints_in_their_own_wire_formats() {
    use crate::common::fake_anthropic::FakeAnthropic;
    use crate::common::fake_responses::FakeResponses;
    let (_rt1, responses) = FakeResponses::start_auto("add", json!({}));
    let (_rt2, anthropic) = FakeAnthropic::start_auto("add", json!({}));
    anthropic.require_key("sk-ant-right");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reasoning.toml");
    let write = |anthropic_model: &str| {
        std::fs::write(
            &config,
            format!(
                "[models.planner]\nprovider = \"openai-responses\"\nbase_url = \"{}\"\n\
                 model = \"gpt-5-mini\"\n\
                 fallback = {{ provider = \"anthropic\", base_url = \"{}\", model = \"{anthropic_model}\" }}\n",
                responses.base_url(),
                anthropic.base_url()
            ),
        )
        .unwrap();
    };
    write("claude-sonnet-4-5");
    let doctor = |key: &str| {
        hermes()
            .arg("--config")
            .arg(&config)
            .arg("doctor")
            .env("ANTHROPIC_API_KEY", key)
            .output()
            .unwrap()
    };
    let out = doctor("sk-ant-right");
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("(responses) for `gpt-5-mini`"), "{all}");
    assert!(
        all.contains("(anthropic messages) for `claude-sonnet-4-5`"),
        "{all}"
    );
    assert!(all.contains("ok: GET /v1/models"), "{all}");
    // The Anthropic probe spoke Anthropic: its key and version headers.
    assert_eq!(
        anthropic.received("x-api-key"),
        vec![(
            "GET /v1/models".to_string(),
            Some("sk-ant-right".to_string())
        )]
    );
    assert_eq!(
        anthropic.received("anthropic-version")[0].1.as_deref(),
        Some("2023-06-01")
    );

    let out = doctor("sk-ant-wrong");
    let all = text(&out);
    assert!(
        !out.status.success(),
        "a refused key fails the probe:\n{all}"
    );
    assert!(all.contains("check ANTHROPIC_API_KEY"), "{all}");
    write("claude-9");
    let out = doctor("sk-ant-right");
    let all = text(&out);
    assert!(all.contains("`claude-9` is not among them"), "{all}");
}
