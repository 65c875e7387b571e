//! `hermes chat` as a person uses it: the built binary in a pseudo-terminal, against a local
//! OpenAI-compatible server that streams its replies. What is asserted is the screen the
//! terminal shows (a vt100 emulator reads the output), so redrawn lines and spinners count as
//! a person sees them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::fake_openai::{FakeOpenAi, Scripted};
use crate::common::hermes_proc::hermes;
use crate::common::pty::Pty;

/// The answer to "What is 2 + 3?" (Markdown; shown rendered).
const SUM_ANSWER: &str = "2 + 3 = **5**. Anything else?";

/// How the fake's extraction model behaves.
#[derive(Clone, Copy, PartialEq)]
enum Extraction {
    /// `{"memory_updates": []}` every time.
    Nothing,
    /// The first extraction stores that the user likes short reports.
    RemembersOnce,
    /// A reply that is not JSON (the memory is not updated).
    Broken,
}

/// A fake model for these tests: routes on the user's last message.
fn answer(body: &Value, extraction: Extraction, remembered: &AtomicBool) -> Scripted {
    if body["response_format"]["type"] == "json_object" {
        let text = match extraction {
            Extraction::Broken => "Sure! Nothing worth remembering here.".to_string(),
            Extraction::RemembersOnce if !remembered.swap(true, Ordering::SeqCst) => json!({
                "memory_updates": [{"op": "add", "kind": "preference", "key": "report_style",
                                    "content": "likes short reports", "importance": 0.8}]
            })
            .to_string(),
            _ => r#"{"memory_updates": []}"#.to_string(),
        };
        return Scripted::Text(text);
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        let result = last["content"].as_str().unwrap_or_default();
        return Scripted::Text(if result.contains("generate_report") {
            "Your overview of phones is ready: four short sections.".into()
        } else {
            SUM_ANSWER.into()
        });
    }
    let user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    let call = |name: &str, args: Value| Scripted::ToolCalls(vec![(name.to_string(), args)]);
    if user.contains("2 + 3") {
        call("add", json!({"a": 2, "b": 3}))
    } else if user.contains("overview") {
        let seconds = if user.contains("long") { 5 } else { 2 };
        call(
            "generate_report",
            json!({"topic": "phones", "seconds": seconds}),
        )
    } else if user.contains("slow") {
        call(
            "generate_report",
            json!({"topic": "slow things", "seconds": 4}),
        )
    } else if user.contains("reports do I like") {
        let knows = messages.iter().any(|m| {
            m["content"]
                .as_str()
                .unwrap_or("")
                .contains("likes short reports")
        });
        Scripted::Text(if knows {
            "You like **short** reports, so I keep them brief.".into()
        } else {
            "I do not know yet.".into()
        })
    } else {
        Scripted::Text(format!("You said: {user}"))
    }
}

/// A fake model, a working directory and the config `hermes chat` runs with.
struct World {
    _runtime: tokio::runtime::Runtime,
    fake: FakeOpenAi,
    dir: tempfile::TempDir,
}

impl World {
    /// `tools`: more config (e.g. `[[tools.define]]` entries).
    fn new(extraction: Extraction, tools: &str) -> World {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let fake = runtime.block_on(FakeOpenAi::start());
        let remembered = AtomicBool::new(false);
        fake.set_responder(Arc::new(move |body| answer(body, extraction, &remembered)));
        let dir = tempfile::tempdir().unwrap();
        let model = |role: &str| {
            format!(
                "[models.{role}]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\nbase_url = \"{}\"\nmax_retries = 0\n",
                fake.base_url()
            )
        };
        let config = format!(
            "{}{}{}\n[memory.embedder]\nkind = \"none\"\n\n[mcp]\nservers = []\n\n[tools]\nbuiltin = [\"add\", \"generate_report\", \"job_status\"]\n{tools}\n",
            model("planner"),
            model("extractor"),
            model("summariser"),
        );
        std::fs::write(dir.path().join("chat.toml"), config).unwrap();
        World {
            _runtime: runtime,
            fake,
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `hermes --config chat.toml chat --session SESSION --data-dir data`, in the world's
    /// directory, on a pty.
    fn chat(&self, session: &str, env: &[(&str, &str)]) -> Pty {
        let mut cmd: Command = hermes();
        cmd.current_dir(self.dir.path())
            .args(["--config", "chat.toml", "chat", "--session", session])
            .args(["--data-dir", "data"])
            .env_remove("NO_COLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Pty::spawn(cmd)
    }

    /// Every planning request's messages (extraction requests left out).
    fn planned(&self) -> Vec<Vec<Value>> {
        self.fake
            .requests()
            .into_iter()
            .filter(|r| r["response_format"]["type"] != "json_object")
            .map(|r| r["messages"].as_array().cloned().unwrap_or_default())
            .collect()
    }
}

/// The prompt, drawn once per prompt (an empty one shows as `›` on a trimmed row).
const PROMPT: &str = "›";

fn prompts(screen: &str) -> usize {
    screen.lines().filter(|l| l.starts_with(PROMPT)).count()
}

fn wait_prompts(pty: &mut Pty, n: usize) {
    pty.wait_until(
        &format!("prompt number {n}"),
        Duration::from_secs(60),
        |s| prompts(s) >= n && s.lines().last().is_some_and(|l| l.trim() == PROMPT),
    );
}

fn leave(pty: &mut Pty) {
    pty.ctrl_d();
    assert_eq!(pty.wait_exit(Duration::from_secs(30)), Some(0));
}

#[test]
fn chat_streams_the_answer_once_and_shows_a_tool_call_as_one_line() {
    let world = World::new(Extraction::Nothing, "");
    let mut pty = world.chat("s1", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("What is 2 + 3?");
    pty.wait_for("Anything else?");
    wait_prompts(&mut pty, 2);
    let screen = pty.screen();
    assert_eq!(screen.matches("Anything else?").count(), 1, "{screen}");
    assert!(
        screen.contains("2 + 3 = 5. Anything else?"),
        "the Markdown is rendered, not shown raw:\n{screen}"
    );
    let calls: Vec<&str> = screen.lines().filter(|l| l.contains("⚙")).collect();
    assert_eq!(calls.len(), 1, "{screen}");
    assert!(calls[0].starts_with("⚙ add(a=2, b=3) ✓ "), "{screen}");
    assert!(calls[0].ends_with(" ms"), "{screen}");
    for trace in [
        "[delta]",
        "[answer]",
        "turn.started",
        "[tool.call]",
        "▶ turn",
    ] {
        assert!(!screen.contains(trace), "no event trace: {trace}\n{screen}");
    }
    // At the prompt Ctrl-C does not leave at once; a second one does.
    pty.ctrl_c();
    pty.wait_for("Ctrl-C again or Ctrl-D leaves");
    pty.ctrl_c();
    assert_eq!(pty.wait_exit(Duration::from_secs(30)), Some(0));
}

#[test]
fn chat_keeps_logs_in_its_file_and_an_extraction_failure_to_one_dim_line() {
    let world = World::new(Extraction::Broken, "");
    let mut pty = world.chat("s1", &[("HERMES_LOG", "debug")]);
    wait_prompts(&mut pty, 1);
    pty.line("What is 2 + 3?");
    pty.wait_for("memory not updated");
    pty.line("/help");
    pty.wait_for("/forget KEY");
    wait_prompts(&mut pty, 3);
    let screen = pty.screen();
    assert_eq!(screen.matches("memory not updated").count(), 1, "{screen}");
    assert_eq!(screen.matches("Anything else?").count(), 1, "{screen}");
    for log in ["WARN", "DEBUG", "INFO", "hermes::", "TRACE"] {
        assert!(
            !screen.contains(log),
            "a log line in the chat: {log}\n{screen}"
        );
    }
    let log_path = Path::new("data").join("chat.log");
    assert_eq!(
        screen
            .matches(&format!("logs: {}", log_path.display()))
            .count(),
        2,
        "the log file is named at the start and in /help:\n{screen}"
    );
    leave(&mut pty);
    let logs = std::fs::read_to_string(world.path("data/chat.log")).unwrap();
    assert!(logs.contains("extractor reply was not valid"), "{logs}");
    assert!(
        logs.contains("DEBUG"),
        "the --log filter applies to the file"
    );
}

#[test]
fn ctrl_c_during_a_slow_tool_call_cancels_the_turn_and_the_next_prompt_answers() {
    // generate_report run synchronously: a tool call that takes its `seconds`.
    let world = World::new(
        Extraction::Nothing,
        "[[tools.define]]\nname = \"generate_report\"\nmode = \"sync\"\n",
    );
    let mut pty = world.chat("s1", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("Run the slow check");
    pty.wait_for("⚙ generate_report(seconds=4, topic=slow things)");
    pty.ctrl_c();
    pty.wait_for("cancelling the turn");
    pty.wait_for("⨯ turn cancelled");
    wait_prompts(&mut pty, 2);
    pty.line("What is 2 + 3?");
    pty.wait_for("Anything else?");
    wait_prompts(&mut pty, 3);
    let screen = pty.screen();
    assert!(
        !screen.contains("overview of phones") && !screen.contains("✗"),
        "the slow turn never answered and nothing failed:\n{screen}"
    );
    let planned = world.planned();
    let after_slow_call = |messages: &Vec<Value>| {
        messages.last().is_some_and(|m| {
            m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains("slow things")
        })
    };
    assert!(
        !planned.iter().any(after_slow_call),
        "the cancelled turn did not ask the model again after its slow call"
    );
    leave(&mut pty);
}

#[test]
fn slash_new_starts_a_new_session_and_sessions_lists_both() {
    let world = World::new(Extraction::Nothing, "");
    let mut pty = world.chat("first", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("hello there");
    pty.wait_for("You said: hello there");
    wait_prompts(&mut pty, 2);
    pty.line("/new");
    pty.wait_for("session chat-");
    wait_prompts(&mut pty, 3);
    pty.line("second thoughts");
    pty.wait_for("You said: second thoughts");
    wait_prompts(&mut pty, 4);
    pty.line("/sessions");
    pty.wait_until("both sessions listed", Duration::from_secs(30), |s| {
        s.lines().any(|l| l.contains(" first ")) && s.lines().any(|l| l.starts_with("● chat-"))
    });
    let planned = world.planned();
    let last = planned.last().unwrap();
    assert!(
        !last
            .iter()
            .any(|m| m["content"].as_str().unwrap_or("").contains("hello there")),
        "the new session starts without the first one's history: {last:?}"
    );
    pty.line("/switch first");
    pty.wait_for("· now agent assistant · session first");
    pty.line("and again");
    pty.wait_for("You said: and again");
    let planned = world.planned();
    let last = planned.last().unwrap();
    assert!(
        last.iter()
            .any(|m| m["content"].as_str().unwrap_or("").contains("hello there")),
        "/switch continues the first session: {last:?}"
    );
    leave(&mut pty);
}

#[test]
fn slash_confirm_approves_a_waiting_high_risk_call() {
    let world = World::new(
        Extraction::Nothing,
        "[[tools.define]]\nname = \"add\"\nrisk = \"high\"\n",
    );
    let mut pty = world.chat("s1", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("What is 2 + 3?");
    pty.wait_for("waits for your OK");
    wait_prompts(&mut pty, 2);
    assert!(
        !world
            .planned()
            .iter()
            .any(|m| m.iter().any(|m| m["role"] == "tool")),
        "nothing ran before the decision"
    );
    pty.line("hello?");
    pty.wait_for("waits for your decision on `add` first");
    pty.line("/confirm");
    pty.wait_for("Anything else?");
    wait_prompts(&mut pty, 4);
    let screen = pty.screen();
    assert!(
        screen.lines().any(|l| l.starts_with("⚙ add(a=2, b=3) ✓")),
        "{screen}"
    );
    assert_eq!(screen.matches("Anything else?").count(), 1, "{screen}");
    pty.line("What is 2 + 3 this time?");
    pty.wait_for_count("waits for your OK", 2);
    pty.line("/deny");
    pty.wait_for("⚙ add(a=2, b=3) ✗ declined_by_user: the user declined to run `add`");
    pty.wait_for_count("Anything else?", 2);
    leave(&mut pty);
}

#[test]
fn typing_while_a_job_runs_talks_meanwhile_and_the_job_answer_follows_above_the_prompt() {
    let world = World::new(Extraction::Nothing, "");
    let mut pty = world.chat("s1", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("Prepare a long overview of phones");
    pty.wait_for("runs as a job");
    // The first key brings the prompt back; the job's turn goes on behind it.
    pty.line("What is 2 + 3?");
    pty.wait_for("Anything else?");
    pty.wait_for("four short sections");
    pty.wait_until(
        "a prompt after the job's answer",
        Duration::from_secs(30),
        |s| s.lines().last().is_some_and(|l| l.trim() == PROMPT),
    );
    let screen = pty.screen();
    assert_eq!(screen.matches("four short sections").count(), 1, "{screen}");
    assert_eq!(screen.matches("Anything else?").count(), 1, "{screen}");
    assert!(
        screen.contains(
            "⚙ generate_report(seconds=5, topic=phones) … runs as a job; its answer follows here"
        ),
        "{screen}"
    );
    assert!(
        screen.contains("⚙ generate_report(seconds=5, topic=phones) ✓ job ended after"),
        "{screen}"
    );
    let side = screen.find("Anything else?").unwrap();
    let report = screen.find("four short sections").unwrap();
    assert!(
        side < report,
        "the side question was answered first:\n{screen}"
    );
    leave(&mut pty);
}

#[test]
fn memory_lists_what_the_agent_remembers_and_forget_removes_it() {
    let world = World::new(Extraction::RemembersOnce, "");
    let mut pty = world.chat("s1", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("I like short reports. What is 2 + 3?");
    pty.wait_for("· remembered — report_style: likes short reports");
    wait_prompts(&mut pty, 2);
    pty.line("/memory");
    pty.wait_for("report_style likes short reports (preference)");
    wait_prompts(&mut pty, 3);
    pty.line("/forget report_style");
    pty.wait_for("· forgot report_style");
    wait_prompts(&mut pty, 4);
    pty.line("/memory");
    pty.wait_for("no memories of u-1001 yet");
    wait_prompts(&mut pty, 5);
    pty.line("/forget report_style");
    pty.wait_for("no memory with key `report_style`; /memory lists the keys");
    leave(&mut pty);
}

#[test]
fn a_trailing_backslash_or_alt_enter_continues_the_message_on_another_line() {
    let world = World::new(Extraction::Nothing, "");
    let mut pty = world.chat("s1", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("first line \\");
    pty.type_text("second line");
    pty.type_text("\u{1b}\r"); // Alt-Enter
    pty.line("third line");
    pty.wait_for("You said: first line");
    let planned = world.planned();
    let user = planned[0]
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert_eq!(user, "first line \nsecond line\nthird line");
    leave(&mut pty);
}

#[test]
fn slash_agent_talks_to_another_agent_and_cancel_stops_a_waiting_job() {
    let world = World::new(
        Extraction::Nothing,
        "[agents.helper]\nsystem_prompt = \"You are the helper agent.\"\nmax_steps = 4\n\
         context_window = 128000\nreply_reserve = 4096\n",
    );
    let mut pty = world.chat("s1", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("/agent nobody");
    pty.wait_for("no such agent; configured agents: assistant, helper");
    pty.line("/agent helper");
    pty.wait_for("· now agent helper · session s1");
    pty.line("hello helper");
    pty.wait_for("You said: hello helper");
    let planned = world.planned();
    assert!(
        planned.last().unwrap()[0]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("You are the helper agent."),
        "the helper's prompt went to the model: {:?}",
        planned.last()
    );
    pty.line("Prepare a long overview of phones");
    pty.wait_for("runs as a job");
    pty.line("/cancel");
    pty.wait_for("⨯ turn cancelled");
    wait_prompts(&mut pty, 5);
    let screen = pty.screen();
    assert!(!screen.contains("four short sections"), "{screen}");
    leave(&mut pty);
}

/// The document whose chat capture is compared with the terminal (`readme.rs` checks that it
/// holds the only one).
pub(crate) const CAPTURE_DOC: &str = "docs/using.md";

/// The block a capture goes in: a fence with this info string.
const CAPTURE_FENCE: &str = "```text chat-capture";

/// Durations vary from run to run (a busy machine turns `3 ms` into `1.2 s`); a capture is
/// compared with them blanked.
fn without_durations(text: &str) -> String {
    let duration = regex::Regex::new(r"\b\d+(\.\d+)? (ms|s)\b").unwrap();
    duration.replace_all(text, "#").to_string()
}

fn readme_capture(readme: &str) -> Option<(usize, usize)> {
    let start = readme.find(CAPTURE_FENCE)? + CAPTURE_FENCE.len() + 1;
    let end = start + readme[start..].find("\n```")?;
    Some((start, end + 1))
}

#[test]
fn the_documented_chat_capture_is_what_the_terminal_shows() {
    let world = World::new(Extraction::RemembersOnce, "");
    let mut pty = world.chat("demo", &[]);
    wait_prompts(&mut pty, 1);
    pty.line("I like short reports. What is 2 + 3?");
    pty.wait_for("Anything else?");
    pty.wait_for("· remembered");
    wait_prompts(&mut pty, 2);
    pty.line("Prepare an overview of phones");
    pty.wait_for("four short sections");
    wait_prompts(&mut pty, 3);
    pty.line("Which reports do I like?");
    pty.wait_for("I keep them brief");
    wait_prompts(&mut pty, 4);
    let capture = format!("{}\n", pty.screen());
    if let Some(path) = std::env::var_os("HERMES_CHAT_RAW") {
        std::fs::write(path, pty.raw()).unwrap();
    }
    leave(&mut pty);
    assert!(capture.contains("⚙ add(a=2, b=3) ✓"), "{capture}");
    assert!(
        capture.contains("⚙ generate_report(seconds=2, topic=phones) ✓ job ended after"),
        "{capture}"
    );
    assert_eq!(
        capture
            .matches("· recalled 1 memory — report_style: likes short reports")
            .count(),
        1,
        "{capture}"
    );

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(CAPTURE_DOC);
    let readme = std::fs::read_to_string(&path).unwrap();
    let (start, end) = readme_capture(&readme)
        .unwrap_or_else(|| panic!("{CAPTURE_DOC} has no ```text chat-capture block"));
    if without_durations(&readme[start..end]) == without_durations(&capture) {
        return;
    }
    if std::env::var_os("HERMES_UPDATE_README").is_some() {
        let updated = format!("{}{capture}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "{CAPTURE_DOC}'s chat capture is not what `hermes chat` shows now; rerun with \
         HERMES_UPDATE_README=1 to write it. The terminal showed:\n{capture}"
    );
}

#[test]
fn durations_are_blanked_and_the_capture_block_found() {
    assert_eq!(
        without_durations("✓ 12 ms · job ended after 2.1 s · 3 sessions"),
        "✓ # · job ended after # · 3 sessions"
    );
    let readme = "text\n```text chat-capture\nline\n```\nafter";
    let (start, end) = readme_capture(readme).unwrap();
    assert_eq!(&readme[start..end], "line\n");
}
