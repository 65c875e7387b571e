//! The text `hermes init` writes: a commented `hermes.toml` for the user's model, bus, first
//! agent, MCP servers and trigger. Every value goes through TOML's own string encoding, so a
//! purpose or a path with quotes still makes a file that loads.

use std::fmt::Write as _;

/// The wire format the model's endpoint speaks: the `provider` of its `[models.*]` tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InitProvider {
    /// OpenAI Chat Completions: OpenAI, Ollama, vLLM, llama.cpp, DeepSeek, Qwen…
    Openai,
    /// The OpenAI Responses API (reasoning kept across tool calls): OpenAI, Ollama, vLLM,
    /// LM Studio.
    OpenaiResponses,
    /// The Anthropic Messages API (thinking, prompt caching): Anthropic, Ollama, llama.cpp.
    Anthropic,
}

impl InitProvider {
    /// The `provider` value in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::OpenaiResponses => "openai-responses",
            Self::Anthropic => "anthropic",
        }
    }

    /// `openai`, `openai-responses` or `anthropic`.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Openai, Self::OpenaiResponses, Self::Anthropic]
            .into_iter()
            .find(|p| p.as_str() == text.trim())
    }
}

/// What the user chose; each field becomes one section of the file.
#[derive(Debug, Clone)]
pub struct InitAnswers {
    pub provider: InitProvider,
    /// The endpoint, e.g. `https://api.openai.com/v1`, Ollama's or `https://api.anthropic.com`.
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the API key; none for local servers.
    pub api_key_env: Option<String>,
    /// `embedded` or `nats://…`.
    pub bus: String,
    pub data_dir: String,
    pub agent: String,
    /// One line on what the agent is for.
    pub purpose: String,
    pub mcp_servers: Vec<McpServerAnswer>,
    /// A NATS subject whose events start turns of the agent.
    pub trigger: Option<String>,
}

/// One MCP server to mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServerAnswer {
    /// A child process speaking MCP over stdio.
    Command {
        name: String,
        command: String,
        args: Vec<String>,
    },
    /// A Streamable HTTP endpoint.
    Url { name: String, url: String },
}

/// An `--mcp` answer that is not `NAME=COMMAND` or `NAME=URL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpSpecError {
    #[error("`{0}` is not NAME=COMMAND or NAME=URL, e.g. files=\"npx -y @modelcontextprotocol/server-filesystem /srv\"")]
    NoName(String),
    #[error("`{0}` needs both a name and a command or URL")]
    Empty(String),
}

impl McpServerAnswer {
    /// `NAME=COMMAND ARGS…` or `NAME=http(s)://…`.
    pub fn parse(spec: &str) -> Result<Self, McpSpecError> {
        let (name, target) = spec
            .split_once('=')
            .ok_or_else(|| McpSpecError::NoName(spec.to_string()))?;
        let name = name.trim().to_string();
        let target = target.trim();
        if name.is_empty() || target.is_empty() {
            return Err(McpSpecError::Empty(spec.to_string()));
        }
        if target.starts_with("http://") || target.starts_with("https://") {
            return Ok(Self::Url {
                name,
                url: target.to_string(),
            });
        }
        let mut words = target.split_whitespace().map(str::to_string);
        let command = words.next().unwrap_or_default();
        Ok(Self::Command {
            name,
            command,
            args: words.collect(),
        })
    }
}

/// A TOML string literal of `text`.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

fn quoted_list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", items.join(", "))
}

/// The system prompt of the first agent, from its name and purpose.
pub fn system_prompt(agent: &str, purpose: &str) -> String {
    format!(
        "You are {agent}, an assistant: {purpose}. Answer clearly and concisely. When a tool can \
         give you a fact you do not have, use it rather than guess; when you do not know, say so."
    )
}

/// The commented configuration file for `answers`.
pub fn render(answers: &InitAnswers) -> String {
    let mut out = String::new();
    let a = answers;
    let _ = writeln!(
        out,
        "# Hermes configuration written by `hermes init`. It is merged over the embedded defaults\n\
         # (config/default.toml in the repository documents every key): tables merge key by key,\n\
         # arrays and plain values replace. Use it with `hermes --config <this file> …`;\n\
         # `hermes doctor` shows the effective configuration and probes the model.\n"
    );
    let _ = writeln!(
        out,
        "[engine]\n\
         # Where sessions, memories and queues are stored (sled). Created if missing.\n\
         data_dir = {}\n",
        quoted(&a.data_dir)
    );
    let _ = writeln!(
        out,
        "[bus]\n\
         # `embedded` runs every actor in one process; `nats://host:4222` talks to a nats-server\n\
         # started with JetStream (`nats-server -js`), where any number of processes share work.\n\
         url = {}\n",
        quoted(&a.bus)
    );
    render_models(&mut out, a);
    render_agent(&mut out, a);
    render_mcp(&mut out, &a.mcp_servers);
    render_trigger(&mut out, a);
    out
}

fn render_models(out: &mut String, a: &InitAnswers) {
    let _ = writeln!(
        out,
        "# One model per role: planner (plans each step and calls tools), extractor (mines finished\n\
         # turns for memories in the background), summariser (folds old turns into a summary).\n\
         # All three use your model here; give the extractor and summariser a smaller one to save\n\
         # cost. `provider`: \"openai\" (Chat Completions: OpenAI, Ollama, vLLM, llama.cpp…),\n\
         # \"openai-responses\" (the Responses API, for reasoning models) or \"anthropic\" (Messages)."
    );
    for role in ["planner", "extractor", "summariser"] {
        let _ = writeln!(
            out,
            "[models.{role}]\nprovider = \"{}\"",
            a.provider.as_str()
        );
        let _ = writeln!(out, "model = {}", quoted(&a.model));
        let _ = writeln!(out, "base_url = {}", quoted(&a.base_url));
        match &a.api_key_env {
            Some(var) => {
                let _ = writeln!(
                    out,
                    "# The variable holding the API key (the key itself never goes in this file).\n\
                     api_key_env = {}",
                    quoted(var)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "# No API key (a local server). Set api_key_env = \"VAR\" if yours needs one."
                );
            }
        }
        let _ = writeln!(out);
    }
}

fn render_agent(out: &mut String, a: &InitAnswers) {
    let _ = writeln!(
        out,
        "# Your first agent. Sessions address it as hermes.in.{agent}.<session>; talk to it with\n\
         # `hermes --config <this file> chat --agent {agent}`. Every key left out has a default\n\
         # (`hermes agents ls` shows the effective values and where each came from).\n\
         [agents.{agent}]\n\
         description = {description}\n\
         system_prompt = {prompt}\n\
         # The [models.<name>] table that plans its turns.\n\
         model = \"planner\"\n\
         # Most model calls in one turn.\n\
         max_steps = 8\n\
         # Its model's window and the share kept for the reply are taken from the model when it is\n\
         # known (else 128000 and 4096); set them for a model with a smaller window:\n\
         # context_window = 32768\n\
         # reply_reserve = 2048\n\
         # The only tools it may see and call ([] = none); leave it out for every tool.\n\
         # tools = [\"current_time\", \"session_search\"]\n\
         # Memory namespaces it recalls from and writes to; extract = false keeps its turns out.\n\
         memory = {{ read = [\"default\"], write = \"default\", extract = true }}\n",
        agent = a.agent,
        description = quoted(&a.purpose),
        prompt = quoted(&system_prompt(&a.agent, &a.purpose)),
    );
}

fn render_mcp(out: &mut String, servers: &[McpServerAnswer]) {
    let _ = writeln!(
        out,
        "# MCP servers whose tools the agents may use, as `<server>__<tool>`. Add one table each:\n\
         # [[mcp.servers]]\n\
         # name = \"files\"\n\
         # command = \"npx\"\n\
         # args = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/srv/docs\"]\n\
         # (or url = \"http://127.0.0.1:3001/mcp\" for a Streamable HTTP server)"
    );
    for server in servers {
        match server {
            McpServerAnswer::Command {
                name,
                command,
                args,
            } => {
                let _ = writeln!(
                    out,
                    "[[mcp.servers]]\nname = {}\ncommand = {}\nargs = {}\ntimeout_secs = 30",
                    quoted(name),
                    quoted(command),
                    quoted_list(args)
                );
            }
            McpServerAnswer::Url { name, url } => {
                let _ = writeln!(
                    out,
                    "[[mcp.servers]]\nname = {}\nurl = {}\ntimeout_secs = 30",
                    quoted(name),
                    quoted(url)
                );
            }
        }
    }
    let _ = writeln!(out);
}

fn render_trigger(out: &mut String, a: &InitAnswers) {
    let Some(subject) = &a.trigger else {
        let _ = writeln!(
            out,
            "# Events on any NATS subject can start turns: see [[triggers]] in docs/agents.md\n\
             # (\"Events in\") or run `hermes init` again with --trigger SUBJECT."
        );
        return;
    };
    // A session per event source: the subject's first wildcard token names it (session ids
    // may not hold dots); a subject without one gets one session.
    let session = subject
        .split('.')
        .position(|t| t == "*" || t == ">")
        .map_or("events".to_string(), |i| format!("event-{{subject.{i}}}"));
    let _ = writeln!(
        out,
        "# Each event published on this subject (a JSON payload) starts a turn of {agent};\n\
         # `{{subject.N}}` is the N-th token of the subject (from 0), `{{payload.x}}` a field of the\n\
         # event, `{{payload}}` all of it. Adapt the templates to your events.\n\
         [[triggers]]\n\
         name = \"events\"\n\
         subject = {subject}\n\
         agent = {agent_q}\n\
         session = {session}\n\
         user = \"events\"\n\
         prompt = \"An event arrived on {{subject}}: {{payload}}. Decide what it needs and answer.\"\n\
         # An event published twice (same Nats-Msg-Id header) is handled once; to publish the\n\
         # answer, name a subject: reply_subject = \"{{subject}}.reply\"\n",
        agent = a.agent,
        agent_q = quoted(&a.agent),
        subject = quoted(subject),
        session = quoted(&session),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers() -> InitAnswers {
        InitAnswers {
            base_url: "http://127.0.0.1:11434/v1".into(),
            model: "qwen2.5:7b".into(),
            provider: InitProvider::Openai,
            api_key_env: None,
            bus: "embedded".into(),
            data_dir: "data/hermes".into(),
            agent: "helper".into(),
            purpose: "answers \"quoted\" questions about our docs".into(),
            mcp_servers: vec![
                McpServerAnswer::parse("files=npx -y @modelcontextprotocol/server-filesystem /srv")
                    .unwrap(),
                McpServerAnswer::parse("docs=http://127.0.0.1:3001/mcp").unwrap(),
            ],
            trigger: Some("ci.builds.*.failed".into()),
        }
    }

    #[test]
    fn the_written_file_loads_with_the_chosen_model_agent_servers_and_trigger() {
        let text = render(&answers());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hermes.toml");
        std::fs::write(&path, &text).unwrap();
        let (config, _) = hermes::config::load::load_file(Some(&path)).unwrap();
        let helper = config.agent("helper").unwrap();
        assert!(helper.system_prompt.contains("\"quoted\""));
        assert_eq!(config.mcp.servers.len(), 2);
        assert_eq!(config.mcp.servers[0].args.len(), 3);
        assert_eq!(
            config.mcp.servers[1].url.as_deref(),
            Some("http://127.0.0.1:3001/mcp")
        );
        assert_eq!(config.triggers[0].subject, "ci.builds.*.failed");
        assert_eq!(config.triggers[0].session, "event-{subject.2}");
        assert_eq!(config.models.planner.model_name(), Some("qwen2.5:7b"));
        assert!(text.lines().filter(|l| l.starts_with('#')).count() > 20);
    }

    #[test]
    fn each_provider_writes_tables_of_its_own_wire_format() {
        use hermes::config::ModelConfig;
        for provider in [InitProvider::OpenaiResponses, InitProvider::Anthropic] {
            let text = render(&InitAnswers {
                provider,
                api_key_env: Some("MY_KEY".into()),
                ..answers()
            });
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("hermes.toml");
            std::fs::write(&path, &text).unwrap();
            let (config, _) = hermes::config::load::load_file(Some(&path)).unwrap();
            for role in ["planner", "extractor", "summariser"] {
                let model = config.models.role(role).unwrap();
                let matches = match (provider, model) {
                    (InitProvider::OpenaiResponses, ModelConfig::OpenaiResponses(t)) => {
                        t.api_key_env.as_deref() == Some("MY_KEY")
                    }
                    (InitProvider::Anthropic, ModelConfig::Anthropic(t)) => {
                        t.api_key_env.as_deref() == Some("MY_KEY")
                    }
                    _ => false,
                };
                assert!(matches, "{role} of {provider:?}: {model:?}");
            }
        }
        assert_eq!(
            InitProvider::parse("openai-responses"),
            Some(InitProvider::OpenaiResponses)
        );
        assert_eq!(InitProvider::parse("gemini"), None);
    }

    #[test]
    fn an_mcp_spec_without_a_name_is_refused_with_an_example() {
        let err = McpServerAnswer::parse("npx server").unwrap_err();
        assert_eq!(err, McpSpecError::NoName("npx server".into()));
        assert!(err.to_string().contains("NAME=COMMAND"), "{err}");
    }
}
