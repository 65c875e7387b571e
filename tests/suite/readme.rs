//! README.md and the chapters in docs/ (and clients/python/README.md), executed: every fenced
//! code block is checked or says why not, so the documents and the binary cannot drift apart.
//! Each document runs on its own,
//! its blocks in order, in one working directory — the way a reader follows it:
//!
//! - `sh`/`bash` blocks run;
//! - `toml` blocks load as a config file (one whose first line is `# NAME.toml …` is also
//!   written to `NAME.toml` for the blocks after it);
//! - `python` blocks are written to the file their first line names (`# NAME.py …`), and a
//!   later `sh` block of the same document must run that file;
//! - the `text chat-capture` block of [`CAPTURE_DOC`] is compared with the terminal by
//!   `chat_terminal.rs`;
//! - any other block carries `no-run` in its info string followed by the reason it is not run
//!   (`sh no-run — minutes of load`); `every_block_is_run_loaded_or_says_why_not` fails on a
//!   block that does neither, and on a document with runnable blocks that no test runs.
//!
//! `links_between_the_documents_resolve` keeps the chapter map walkable: every relative link
//! names a file of the checkout and every `#anchor` a heading of its document.
//!
//! How a block runs: `bash -euo pipefail` in a temporary directory that links the checkout's
//! `clients/`, `config/`, `examples/`, `scripts/`, `schema/` and `tests/`; `hermes` is the
//! binary under test (first on `PATH`, with `.tools/venv/bin` for `nats-server` and Python
//! with nats-py and `hermes_client`); `cargo run [--release] -- ARGS` runs `hermes ARGS`;
//! background jobs (`&`) are stopped when the block ends. Addresses stand for servers the
//! harness provides: `127.0.0.1:11434` (an OpenAI-compatible server, as Ollama's port) becomes
//! the local fake OpenAI server, which answers like a small obliging model and streams
//! tool-call arguments in fragments; `127.0.0.1:1234` (LM Studio's port) the fake Responses
//! server and `127.0.0.1:8080` (a llama.cpp server's) the fake Anthropic Messages server, which
//! answer the same way in their wire formats; and `4222` becomes a free port of the document
//! for the `nats-server` its blocks start themselves (the same port for every block of one
//! document, so a file one block writes reaches the server another starts).
//!
//! Info-string words after the language are harness directives: `no-run` (with its reason),
//! `chat-capture`, and `expect-tool-call` (the fake model must have received a tool result
//! during the block, i.e. a turn completed a tool call).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::fake_anthropic::FakeAnthropic;
use crate::common::fake_openai::FakeOpenAi;
use crate::common::fake_responses::FakeResponses;

use super::chat_terminal::CAPTURE_DOC;

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

    /// The file a block is written to: its first line's `# NAME.EXT …`.
    fn file_name(&self, ext: &str) -> Option<&str> {
        self.text
            .lines()
            .next()?
            .strip_prefix("# ")?
            .split_whitespace()
            .next()
            .filter(|n| n.ends_with(ext) && n.len() > ext.len())
    }

    /// Why a `no-run` block is not run: the info string's words after `no-run`.
    fn no_run_reason(&self) -> Option<String> {
        let at = self.directives.iter().position(|d| d == "no-run")?;
        Some(self.directives[at + 1..].join(" "))
    }
}

/// How the tests check a block.
#[derive(Debug, PartialEq)]
enum Claim {
    /// Run by bash.
    Run,
    /// Loaded as a config file.
    Load,
    /// Written to this file for a later block to run.
    Write(String),
    /// Compared with the terminal by `chat_terminal.rs`.
    ChatCapture,
    /// Not run, for the reason its info string gives.
    NotRun,
}

/// What a block's info string and text promise, or why the tests cannot keep the promise.
fn claim(doc: &str, block: &Block, later: &[Block]) -> Result<Claim, String> {
    let at = format!("{doc} block at line {}", block.line);
    let skipped = block.directives.iter().position(|d| d == "no-run");
    let directives = &block.directives[..skipped.unwrap_or(block.directives.len())];
    if let Some(unknown) = directives
        .iter()
        .find(|d| !["expect-tool-call", "chat-capture"].contains(&d.as_str()))
    {
        return Err(format!(
            "{at}: unknown directive `{unknown}` (known: no-run, expect-tool-call, chat-capture)"
        ));
    }
    if skipped.is_some() {
        let reason = block.no_run_reason().unwrap_or_default();
        return if reason.chars().filter(|c| c.is_alphabetic()).count() >= 8 {
            Ok(Claim::NotRun)
        } else {
            Err(format!(
                "{at}: `no-run` needs its reason after it in the info string \
                 (```sh no-run — minutes of load on a release build)"
            ))
        };
    }
    match (block.lang.as_str(), block.has("chat-capture")) {
        ("text", true) if doc == CAPTURE_DOC => Ok(Claim::ChatCapture),
        (_, true) => Err(format!(
            "{at}: a chat capture is compared only in {CAPTURE_DOC} (chat_terminal.rs)"
        )),
        ("sh" | "bash" | "shell", _) => Ok(Claim::Run),
        ("toml", _) => Ok(Claim::Load),
        ("python", _) => {
            let name = block.file_name(".py").ok_or_else(|| {
                format!("{at}: a python block starts with `# NAME.py`, the file it is written to")
            })?;
            let run = later.iter().any(|b| {
                ["sh", "bash", "shell"].contains(&b.lang.as_str())
                    && !b.has("no-run")
                    && b.text.contains(name)
            });
            if run {
                Ok(Claim::Write(name.to_string()))
            } else {
                Err(format!("{at}: no later sh block of {doc} runs {name}"))
            }
        }
        (lang, _) => Err(format!(
            "{at}: a `{lang}` block is neither run nor loaded; mark it `no-run` with the reason"
        )),
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
/// connections elsewhere on the machine do not take them meanwhile. Each call starts its
/// search elsewhere, so documents run side by side do not pick the same port before either
/// binds it.
fn free_port() -> u16 {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let seed = u32::from(std::process::id() as u16)
        .wrapping_mul(7919)
        .wrapping_add(CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(1543));
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

/// Where a document's blocks run: the harness's servers in place of the documented addresses.
struct Servers {
    fakes: Vec<(&'static str, String)>,
    nats_port: u16,
}

/// The block's text with the harness's servers in place of the documented addresses.
fn localise(text: &str, servers: &Servers) -> String {
    let fakes = &servers.fakes;
    let nats_port = servers.nats_port.to_string();
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

fn run_sh(block: &Block, dir: &Path, servers: &Servers) -> Result<(), String> {
    let text = localise(&block.text, servers);
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

fn check_toml(block: &Block, dir: &Path, servers: &Servers) -> Result<(), String> {
    let path = dir.join(block.file_name(".toml").unwrap_or("readme-snippet.toml"));
    std::fs::write(&path, localise(&block.text, servers)).map_err(|e| e.to_string())?;
    hermes::config::load::load_file(Some(&path))
        .map(|_| ())
        .map_err(|e| format!("does not load as a config file: {e}\n{}", block.text))
}

/// Every document whose blocks the tests run, each by a test of its own (so two run side by
/// side): README.md, then the chapters in docs/ that have a block to run.
macro_rules! documents {
    ($($test:ident => $doc:literal,)*) => {
        const DOCUMENTS: &[&str] = &[$($doc),*];
        $(
            #[test]
            fn $test() {
                run_document($doc);
            }
        )*
    };
}

documents! {
    readme_blocks_run => "README.md",
    docs_using_blocks_run => "docs/using.md",
    docs_models_blocks_run => "docs/models.md",
    docs_memory_blocks_run => "docs/memory.md",
    docs_mcp_blocks_run => "docs/mcp.md",
    docs_agents_blocks_run => "docs/agents.md",
    docs_a2a_blocks_run => "docs/a2a.md",
    docs_clients_blocks_run => "docs/clients.md",
    docs_clusters_blocks_run => "docs/clusters.md",
    docs_security_blocks_run => "docs/security.md",
    docs_operations_blocks_run => "docs/operations.md",
}

/// README.md, every docs/*.md and the Python client's README, as paths relative to the checkout.
fn all_documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs.push("clients/python/README.md".to_string());
    docs
}

/// Runs a document's blocks in order in one working directory; panics at the first that fails.
fn run_document(doc: &str) {
    let (_openai_rt, openai) = FakeOpenAi::start_auto("current_time", json!({}));
    let (_responses_rt, responses) = FakeResponses::start_auto("current_time", json!({}));
    let (_anthropic_rt, anthropic) = FakeAnthropic::start_auto("current_time", json!({}));
    let fakes = Fakes {
        openai,
        responses,
        anthropic,
    };
    let servers = Servers {
        fakes: fakes.addresses(),
        nats_port: free_port(),
    };
    let markdown = std::fs::read_to_string(repo().join(doc)).unwrap();
    let all = blocks(&markdown);
    let dir = workdir();
    let mut ran = 0;
    for (i, block) in all.iter().enumerate() {
        let claim = claim(doc, block, &all[i + 1..]).unwrap_or_else(|why| panic!("{why}"));
        let seen = fakes.seen();
        let result = match claim {
            Claim::Run => run_sh(block, dir.path(), &servers),
            Claim::Load => check_toml(block, dir.path(), &servers),
            Claim::Write(name) => {
                std::fs::write(dir.path().join(&name), localise(&block.text, &servers))
                    .map_err(|e| format!("cannot write {name}: {e}"))
            }
            Claim::ChatCapture | Claim::NotRun => continue,
        };
        if let Err(why) = result {
            panic!("{doc} block at line {} failed: {why}", block.line);
        }
        if block.has("expect-tool-call") {
            assert!(
                fakes.received_tool_result(seen),
                "{doc} block at line {}: no turn completed a tool call through the model",
                block.line
            );
        }
        ran += 1;
    }
    assert!(ran > 0, "no block of {doc} ran; is it intact?");
}

/// The promise of the module: no block of README.md or docs/ goes unchecked without a reason,
/// and every document with a block to run is run by a test.
#[test]
fn every_block_is_run_loaded_or_says_why_not() {
    let mut problems = Vec::new();
    let mut captures = 0;
    for doc in all_documents() {
        let markdown = std::fs::read_to_string(repo().join(&doc)).unwrap();
        let all = blocks(&markdown);
        let mut runnable = false;
        for (i, block) in all.iter().enumerate() {
            match claim(&doc, block, &all[i + 1..]) {
                Ok(Claim::NotRun) => {}
                Ok(Claim::ChatCapture) => captures += 1,
                Ok(_) => runnable = true,
                Err(why) => problems.push(why),
            }
        }
        if runnable && !DOCUMENTS.contains(&doc.as_str()) {
            problems.push(format!(
                "{doc} has blocks to run but no test runs it: add it to `documents!` in {}",
                file!()
            ));
        }
    }
    for doc in DOCUMENTS {
        if !all_documents().iter().any(|d| d == doc) {
            problems.push(format!("{doc} is in `documents!` but does not exist"));
        }
    }
    if captures != 1 {
        problems.push(format!(
            "{CAPTURE_DOC} should hold exactly one ```text chat-capture block; found {captures}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
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
    let servers = Servers {
        fakes: vec![("127.0.0.1:11434", fake_addr)],
        nats_port: free_port(),
    };
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let block = blocks(&readme)
        .into_iter()
        .find(|b| b.lang == "sh" && b.text.contains("export HERMES_MODEL="))
        .expect("the README has an environment-convention block");
    let dir = workdir();
    run_sh(&block, dir.path(), &servers).unwrap();
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

#[test]
fn a_block_is_claimed_only_when_a_check_keeps_its_promise() {
    let md =
        "```sh no-run\nslow\n```\n```sh no-run — minutes of load on a release build\nslow\n```\n\
              ```python\nprint(1)\n```\n```python\n# a.py — one\nprint(1)\n```\n\
              ```python\n# b.py — two\nprint(2)\n```\n```sh\npython b.py\n```\n\
              ```\ndiagram\n```\n```sh no_run\nx\n```\n```text chat-capture\n›\n```\n";
    let all = blocks(md);
    let claims: Vec<Result<Claim, String>> = all
        .iter()
        .enumerate()
        .map(|(i, b)| claim("doc.md", b, &all[i + 1..]))
        .collect();
    assert!(claims[0].as_ref().unwrap_err().contains("needs its reason"));
    assert_eq!(claims[1], Ok(Claim::NotRun));
    assert!(claims[2]
        .as_ref()
        .unwrap_err()
        .contains("starts with `# NAME.py`"));
    assert!(claims[3].as_ref().unwrap_err().contains("runs a.py"));
    assert_eq!(claims[4], Ok(Claim::Write("b.py".into())));
    assert_eq!(claims[5], Ok(Claim::Run));
    assert!(claims[6]
        .as_ref()
        .unwrap_err()
        .contains("neither run nor loaded"));
    assert!(claims[7]
        .as_ref()
        .unwrap_err()
        .contains("unknown directive `no_run`"));
    assert!(claims[8].as_ref().unwrap_err().contains("compared only in"));
    assert_eq!(
        claim(CAPTURE_DOC, &all[8], &[]),
        Ok(Claim::ChatCapture),
        "the capture in its document"
    );
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || [' ', '-', '_'].contains(c))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a document's headings (outside code blocks).
fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The chapter map and the cross-references stay walkable: every relative link of README.md
/// and docs/ names a file of the checkout, and every `#anchor` a heading of its document.
#[test]
fn links_between_the_documents_resolve() {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    for doc in all_documents() {
        let path = repo().join(&doc);
        let markdown = std::fs::read_to_string(&path).unwrap();
        for target in link.captures_iter(&markdown).map(|c| c[1].to_string()) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let linked = if file.is_empty() {
                path.clone()
            } else {
                path.parent().unwrap().join(file)
            };
            if !linked.exists() {
                broken.push(format!("{doc}: {target}: no such file"));
                continue;
            }
            if !fragment.is_empty() {
                let text = std::fs::read_to_string(&linked).unwrap_or_default();
                if !anchors(&text).iter().any(|a| a == fragment) {
                    broken.push(format!("{doc}: {target}: no heading with that anchor"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    assert_eq!(
        anchor(" Agents as MCP tools, and a gateway"),
        "agents-as-mcp-tools-and-a-gateway"
    );
    assert_eq!(
        anchor(" Whole tasks: `hermes eval tasks`"),
        "whole-tasks-hermes-eval-tasks"
    );
    assert_eq!(
        anchors("# A\n```sh\n# not a heading\n```\n## Remote servers behind OAuth 2.1\n"),
        ["a", "remote-servers-behind-oauth-21"]
    );
}
