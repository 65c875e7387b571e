//! A user's own agent, not the demo's: the neutral defaults seen from the model's side,
//! agent tables that need only what matters (`tools = []`, no window), and `hermes init`
//! writing a file that answers a turn — through the `hermes` binary against the local
//! OpenAI-compatible fake, on the embedded bus and on a real nats-server.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::fake_openai::FakeOpenAi;
use crate::common::hermes_proc::{hermes, Serve};
use crate::common::nats_server::NatsServer;

const DEMO_TOOLS: [&str; 4] = ["order_lookup", "generate_report", "track_parcel", "add"];

use crate::common::hermes_proc::output_text as text;

fn with_model<'a>(cmd: &'a mut Command, fake: &FakeOpenAi) -> &'a mut Command {
    cmd.env("OPENAI_BASE_URL", fake.base_url())
        .env("OPENAI_API_KEY", "sk-test")
}

/// The tool names a chat-completions request offered (none when it has no `tools`).
fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Planning requests: not the extractor's (which asks for a JSON object).
fn plans(fake: &FakeOpenAi) -> Vec<Value> {
    fake.requests()
        .into_iter()
        .filter(|r| r.get("response_format").is_none())
        .collect()
}

const TWO_AGENTS: &str = r#"
[agents.writer]
description = "Rewrites text"
system_prompt = "You rewrite text. You have no tools."
tools = []

[agents.calc]
tools = ["current_time"]
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn only_the_openai_environment_sends_the_neutral_assistant_without_demo_tools() {
    let (_rt, fake) = FakeOpenAi::start_auto("current_time", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let out = with_model(&mut hermes(), &fake)
        .args(["send", "--session", "n1", "--text", "What time is it?"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("[tool.call] current_time"), "{all}");
    let plans = plans(&fake);
    assert!(!plans.is_empty());
    for request in &plans {
        assert_eq!(
            request["messages"][0]["content"],
            hermes::config::agents::NEUTRAL_SYSTEM_PROMPT
        );
        let tools = offered(request);
        for demo in DEMO_TOOLS {
            assert!(
                !tools.iter().any(|t| t == demo),
                "{demo} offered: {tools:?}"
            );
        }
        assert!(
            !tools.iter().any(|t| t.contains("__")),
            "an MCP server's tool was offered: {tools:?}"
        );
    }
    // Nothing of the demo's shop in what the planner heard.
    let heard = serde_json::to_string(&plans).unwrap();
    for word in ["shop", "catalog", "order_", "product"] {
        assert!(!heard.contains(word), "`{word}` reached the model");
    }
}

#[test]
fn an_agent_with_no_tools_sends_none_to_its_model_on_the_embedded_bus() {
    let (_rt, fake) = FakeOpenAi::start_auto("current_time", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "two.toml", TWO_AGENTS);
    let out = with_model(&mut hermes(), &fake)
        .arg("--config")
        .arg(&config)
        .args(["send", "--agent", "writer", "--session", "w1"])
        .args(["--text", "Make this shorter: the meeting is moved."])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let plans = plans(&fake);
    assert!(!plans.is_empty(), "{all}");
    for request in &plans {
        assert!(request.get("tools").is_none(), "tools were sent: {request}");
    }
    assert!(!all.contains("[tool.call]"), "{all}");
}

#[test]
fn an_agent_with_no_tools_sends_none_to_its_model_on_nats() {
    let (_rt, fake) = FakeOpenAi::start_auto("current_time", json!({}));
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "two.toml", TWO_AGENTS);
    let env = [
        ("OPENAI_BASE_URL", fake.base_url()),
        ("OPENAI_API_KEY", "sk-test".to_string()),
    ];
    let data = dir.path().join("data");
    let _serve = Serve::start_with_env(
        &config,
        &nats.url(),
        "all",
        &["--data-dir", data.to_str().unwrap()],
        &env,
    );
    for (agent, session) in [("writer", "w2"), ("calc", "c2")] {
        let out = hermes()
            .arg("--config")
            .arg(&config)
            .args(["send", "--bus", &nats.url(), "--agent", agent])
            .args(["--session", session, "--text", "What time is it?"])
            .args(["--timeout", "60"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let plans = plans(&fake);
    let writer: Vec<&Value> = plans
        .iter()
        .filter(|r| r["messages"][0]["content"] == "You rewrite text. You have no tools.")
        .collect();
    assert!(!writer.is_empty());
    for request in writer {
        assert!(request.get("tools").is_none(), "tools were sent: {request}");
    }
    let calc = plans
        .iter()
        .find(|r| r["messages"][0]["content"] == hermes::config::agents::NEUTRAL_SYSTEM_PROMPT)
        .expect("calc planned with the neutral prompt");
    let mut tools = offered(calc);
    tools.sort();
    assert_eq!(tools, ["current_time", "session_search"]);
}

#[test]
fn an_agent_without_a_window_starts_and_agents_ls_shows_the_values_used() {
    let (_rt, fake) = FakeOpenAi::start_auto("current_time", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "agents.toml",
        &format!(
            "{TWO_AGENTS}\n[models.small]\nprovider = \"openai\"\nmodel = \"gpt-4-0613\"\n\
             base_url = \"{}\"\n[agents.old]\nmodel = \"small\"\n",
            fake.base_url()
        ),
    );
    let out = hermes()
        .arg("--config")
        .arg(&config)
        .args(["agents", "ls", "--json"])
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let agents: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |name: &str| agents.iter().find(|a| a["agent"] == name).unwrap().clone();
    assert_eq!(
        of("calc")["context_window"],
        json!({"value": 128000, "from": "engine default"})
    );
    assert_eq!(
        of("old")["context_window"],
        json!({"value": 8192, "from": "known window of gpt-4-0613"})
    );
    assert_eq!(
        of("old")["reply_reserve"],
        json!({"value": 2048, "from": "engine default"})
    );
    assert_eq!(of("writer")["tools"], json!([]));

    let out = hermes()
        .arg("--config")
        .arg(&config)
        .args(["send", "--agent", "old", "--session", "o1", "--text", "hi"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fake.requests().last().unwrap()["model"], "gpt-4-0613");
}

#[test]
fn init_writes_a_commented_file_that_doctor_accepts_and_that_answers_a_turn() {
    let (_rt, fake) = FakeOpenAi::start_auto("current_time", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hermes.toml");
    let data = dir.path().join("data");
    let out = hermes()
        .current_dir(dir.path())
        .args(["init", "--non-interactive", "--base-url", &fake.base_url()])
        .args(["--model-name", "fake-model", "--api-key-env", "none"])
        .args([
            "--agent",
            "helper",
            "--purpose",
            "answers questions about our docs",
        ])
        .args(["--trigger", "docs.questions.*"])
        .arg("--data-dir")
        .arg(&data)
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("answers at"),
        "the endpoint was probed:\n{all}"
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.lines().filter(|l| l.starts_with('#')).count() >= 20,
        "{written}"
    );

    let out = hermes()
        .arg("--config")
        .arg(&file)
        .args(["doctor", "--no-probe"])
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("helper: model planner (openai fake-model)"),
        "{all}"
    );
    assert!(all.contains("no servers mounted"), "{all}");

    let out = hermes()
        .arg("--config")
        .arg(&file)
        .args([
            "send",
            "--agent",
            "helper",
            "--session",
            "h1",
            "--text",
            "hello",
        ])
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("[answer]"), "{all}");
    let last = fake
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.get("response_format").is_none());
    let last = last.expect("the helper's turn reached the model");
    assert_eq!(last["model"], "fake-model");
    assert!(last["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("answers questions about our docs"));
    assert!(
        fake.authorizations().iter().all(Option::is_none),
        "no key was asked for"
    );

    let again = hermes()
        .args(["init", "--non-interactive", "--no-probe", "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!again.status.success(), "an existing file is kept");
    assert!(text(&again).contains("--force"));
}

#[test]
fn init_for_anthropic_probes_in_its_wire_format_and_the_file_answers_a_turn() {
    use crate::common::fake_anthropic::FakeAnthropic;
    let (_rt, fake) = FakeAnthropic::start_auto("current_time", json!({}));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude.toml");
    let out = hermes()
        .args(["init", "--non-interactive", "--provider", "anthropic"])
        .args(["--base-url", &fake.base_url(), "--api-key-env", "none"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("`claude-sonnet-4-5` answers at"),
        "probed as Anthropic with its default model:\n{all}"
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("provider = \"anthropic\""), "{written}");

    let out = hermes()
        .arg("--config")
        .arg(&file)
        .args(["send", "--session", "a1", "--text", "What time is it?"])
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("[tool.call] current_time"), "{all}");
    assert!(
        fake.requests()
            .iter()
            .any(|r| r["model"] == "claude-sonnet-4-5"),
        "the turn went to the Anthropic fake"
    );
}
