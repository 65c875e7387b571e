//! README.md, executed: every `sh`/`bash` block runs and every `toml` block loads as a config
//! file, in README order, in one working directory — the way a reader follows it. A block
//! whose info string says `no-run` is skipped (each such block says why in the README).
//!
//! How a block runs: `bash -euo pipefail` in a temporary directory that links the checkout's
//! `config/`, `examples/`, `scripts/` and `tests/`; `hermes` is the binary under test (first on
//! `PATH`, with `.tools/venv/bin` for `nats-server` and the Python examples);
//! `cargo run [--release] -- ARGS` runs `hermes ARGS`; background jobs (`&`) are stopped when
//! the block ends. Addresses stand for servers the harness provides: `127.0.0.1:11434`
//! (an OpenAI-compatible server, as Ollama's port) becomes the local fake OpenAI server, which
//! answers like a small obliging model and streams tool-call arguments in fragments;
//! `127.0.0.1:1234` (LM Studio's port) the fake Responses server and `127.0.0.1:8080` (a
//! llama.cpp server's) the fake Anthropic Messages server, which answer the same way in their
//! wire formats; and `4222` becomes a free port for the `nats-server` the block starts itself.
//!
//! A toml block whose first line is `# NAME.toml …` is also written to `NAME.toml` for the
//! blocks after it. Info-string words after the language are harness directives:
//! `no-run`, and `expect-tool-call` (the fake model must have received a tool result during
//! the block, i.e. a turn completed a tool call).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::fake_anthropic::FakeAnthropic;
use crate::common::fake_openai::FakeOpenAi;
use crate::common::fake_responses::FakeResponses;

/// Longest a block may run.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(240);

#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    lang: String,
    directives: Vec<String>,
    text: String,
}

impl Block {
    fn has(&self, directive: &str) -> bool {
        self.directives.iter().any(|d| d == directive)
    }
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let mut words = info.split_whitespace().map(str::to_string);
                    open = Some(Block {
                        line: i + 1,
                        lang: words.next().unwrap_or_default(),
                        directives: words.collect(),
                        text: String::new(),
                    });
                }
            }
            Some(block) => {
                if trimmed.starts_with("```") {
                    out.extend(open.take());
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                }
            }
        }
    }
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A port P with P..P+2, P+2000..P+2002 and P+4000..P+4002 free — what `scripts/cluster.sh`
/// uses for a 3-node cluster (clients, routes, monitoring) — below the ephemeral range, so
/// connections elsewhere on the machine do not take them meanwhile.
fn free_port() -> u16 {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let seed = u32::from(std::process::id() as u16).wrapping_mul(7919);
    (0..2000_u32)
        .map(|i| 10_000 + u16::try_from((seed + i * 37) % 15_000).unwrap())
        .find(|p| {
            [0, 1, 2, 2000, 2001, 2002, 4000, 4001, 4002]
                .iter()
                .all(|offset| free(p + offset))
        })
        .expect("no free block of ports for a NATS cluster")
}

/// The working directory: a temporary folder with the checkout's folders linked in.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "clients", "config", "examples", "scripts", "schema", "tests",
    ] {
        std::os::unix::fs::symlink(repo().join(name), dir.path().join(name)).unwrap();
    }
    dir
}

const PRELUDE: &str = r#"
cargo() {
  if [ "${1:-}" = run ]; then
    shift
    while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
    [ "$#" -gt 0 ] && shift
    hermes "$@"
  else
    echo "README harness: \`cargo $*\` is not run here; mark the block no-run" >&2
    return 1
  fi
}
stop_jobs() { kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop_jobs EXIT
"#;

/// The fake model servers, by the address the README documents for each.
struct Fakes {
    openai: FakeOpenAi,
    responses: FakeResponses,
    anthropic: FakeAnthropic,
}

impl Fakes {
    /// `(documented address, fake's address)` pairs.
    fn addresses(&self) -> Vec<(&'static str, String)> {
        let host = |url: String| {
            url.trim_start_matches("http://")
                .trim_end_matches("/v1")
                .to_string()
        };
        vec![
            ("127.0.0.1:11434", host(self.openai.base_url())),
            ("127.0.0.1:1234", host(self.responses.base_url())),
            ("127.0.0.1:8080", host(self.anthropic.base_url())),
        ]
    }

    /// Requests each fake has received so far.
    fn seen(&self) -> [usize; 3] {
        [
            self.openai.requests().len(),
            self.responses.requests().len(),
            self.anthropic.requests().len(),
        ]
    }

    /// Whether any fake received a tool result after `seen`.
    fn received_tool_result(&self, seen: [usize; 3]) -> bool {
        let any = |requests: Vec<serde_json::Value>,
                   from: usize,
                   found: &dyn Fn(&serde_json::Value) -> bool| {
            requests[from..].iter().any(found)
        };
        any(self.openai.requests(), seen[0], &|r| {
            r["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
        }) || any(self.responses.requests(), seen[1], &|r| {
            r["input"]
                .as_array()
                .is_some_and(|i| i.iter().any(|i| i["type"] == "function_call_output"))
        }) || any(self.anthropic.requests(), seen[2], &|r| {
            r["messages"].as_array().is_some_and(|m| {
                m.iter().any(|m| {
                    m["content"]
                        .as_array()
                        .is_some_and(|b| b.iter().any(|b| b["type"] == "tool_result"))
                })
            })
        })
    }
}

/// The block's text with the harness's servers in place of the documented addresses.
fn localise(text: &str, fakes: &[(&'static str, String)]) -> String {
    let nats_port = free_port().to_string();
    let nats = regex::Regex::new(r"\b4222\b").unwrap();
    let text = nats.replace_all(text, nats_port.as_str());
    // In one pass: a fake's own address may begin like another documented one.
    let documented = regex::Regex::new(r"127\.0\.0\.1:\d+\b").unwrap();
    documented
        .replace_all(&text, |c: &regex::Captures<'_>| {
            fakes
                .iter()
                .find(|(address, _)| *address == &c[0])
                .map_or_else(|| c[0].to_string(), |(_, fake)| fake.clone())
        })
        .into_owned()
}

fn run_sh(block: &Block, dir: &Path, fakes: &[(&'static str, String)]) -> Result<(), String> {
    let text = localise(&block.text, fakes);
    let hermes = PathBuf::from(env!("CARGO_BIN_EXE_hermes"));
    let path = format!(
        "{}:{}:{}",
        hermes.parent().unwrap().display(),
        repo().join(".tools/venv/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("{PRELUDE}\n{text}");
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir)
        .env("PATH", path)
        .env("HERMES_LOG", "warn")
        .env_remove("HERMES_CONFIG")
        .env_remove("HERMES_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start bash: {e}"))?;
    let started = Instant::now();
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if started.elapsed() > BLOCK_TIMEOUT {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if output.status.success() {
        return Ok(());
    }
    let tail = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    Err(format!(
        "exit {:?} after {:?}\n--- block ---\n{text}--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
        output.status.code(),
        started.elapsed(),
        tail(&output.stdout),
        tail(&output.stderr)
    ))
}

fn check_toml(block: &Block, dir: &Path, fakes: &[(&'static str, String)]) -> Result<(), String> {
    let first = block.text.lines().next().unwrap_or_default();
    let name = first
        .strip_prefix("# ")
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|n| n.ends_with(".toml"));
    let path = dir.join(name.unwrap_or("readme-snippet.toml"));
    std::fs::write(&path, localise(&block.text, fakes)).map_err(|e| e.to_string())?;
    hermes::config::load::load_file(Some(&path))
        .map(|_| ())
        .map_err(|e| format!("does not load as a config file: {e}\n{}", block.text))
}

#[test]
fn readme_blocks_run() {
    let (_openai_rt, openai) = FakeOpenAi::start_auto("current_time", json!({}));
    let (_responses_rt, responses) = FakeResponses::start_auto("current_time", json!({}));
    let (_anthropic_rt, anthropic) = FakeAnthropic::start_auto("current_time", json!({}));
    let fakes = Fakes {
        openai,
        responses,
        anthropic,
    };
    let addresses = fakes.addresses();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let dir = workdir();
    let mut ran = 0;
    for block in blocks(&readme) {
        if block.has("no-run") {
            continue;
        }
        let seen = fakes.seen();
        let result = match block.lang.as_str() {
            "sh" | "bash" | "shell" => run_sh(&block, dir.path(), &addresses),
            "toml" => check_toml(&block, dir.path(), &addresses),
            _ => continue,
        };
        if let Err(why) = result {
            panic!("README.md block at line {} failed: {why}", block.line);
        }
        if block.has("expect-tool-call") {
            assert!(
                fakes.received_tool_result(seen),
                "README.md block at line {}: no turn completed a tool call through the model",
                block.line
            );
        }
        ran += 1;
    }
    assert!(
        ran >= 10,
        "only {ran} README blocks ran; is the README intact?"
    );
}

/// The README's real-model block (the environment's conventions, no config file) against the
/// fake server: what the model is sent is the neutral assistant, never the demo's shop.
#[test]
fn the_readmes_real_model_block_sends_the_neutral_prompt_and_no_demo_tool() {
    let (_runtime, fake) = FakeOpenAi::start_auto("current_time", json!({}));
    let fake_addr = fake
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    let addresses = [("127.0.0.1:11434", fake_addr)];
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let block = blocks(&readme)
        .into_iter()
        .find(|b| b.lang == "sh" && b.text.contains("export HERMES_MODEL="))
        .expect("the README has an environment-convention block");
    let dir = workdir();
    run_sh(&block, dir.path(), &addresses).unwrap();
    let requests = fake.requests();
    let plans: Vec<&serde_json::Value> = requests
        .iter()
        .filter(|r| r["messages"][0]["role"] == "system" && r.get("response_format").is_none())
        .collect();
    assert!(!plans.is_empty(), "no planning request reached the model");
    for request in plans {
        let system = request["messages"][0]["content"].as_str().unwrap();
        assert_eq!(system, hermes::config::agents::NEUTRAL_SYSTEM_PROMPT);
        let tools: Vec<&str> = request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        for demo in ["order_lookup", "generate_report", "track_parcel", "add"] {
            assert!(
                !tools.contains(&demo),
                "demo tool {demo} offered: {tools:?}"
            );
        }
        assert!(
            tools.iter().all(|t| !t.contains("__")),
            "an MCP tool was offered (no server should be mounted): {tools:?}"
        );
        assert!(tools.contains(&"current_time"), "{tools:?}");
    }
}

#[test]
fn block_parser_reads_info_string_directives() {
    let md = "text\n```sh no-run\necho a\n```\n```toml\n# my.toml\nx = 1\n```\n";
    let found = blocks(md);
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].lang.as_str(), found[0].line), ("sh", 2));
    assert!(found[0].has("no-run"));
    assert_eq!(found[1].text, "# my.toml\nx = 1\n");
}
