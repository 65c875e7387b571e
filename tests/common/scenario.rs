//! Replay scripts for tests, built in code instead of TOML copied from file to file:
//!
//! ```ignore
//! let script = Scenario::new("shop")
//!     .rule(on_user(&["order"]).calls("order_lookup", json!({"order_id": "JD-1"})))
//!     .rule(after_tool("order_lookup").says("It ships tomorrow."))
//!     .rule(on_user(&[]).says("Hello."));
//! let config = test_config(dir.path(), &script);
//! ```
//!
//! [`Scenario::to_toml`] renders the file the `replay` provider reads, so every script still
//! goes through the real scenario parser. Rules are tried in order; the first that matches
//! answers.

use serde_json::Value;

/// A replay script: a name and its rules, in order.
#[derive(Debug, Clone)]
pub struct Scenario {
    name: String,
    rules: Vec<Rule>,
}

/// One rule: which requests it answers and what it answers.
#[derive(Debug, Clone)]
pub struct Rule {
    role: String,
    when_last: String,
    contains: Vec<String>,
    after_tool: Option<String>,
    text: String,
    calls: Vec<(String, Value)>,
}

/// The planner, when the last message is the user's and contains every one of `words`
/// (any user message when `words` is empty).
pub fn on_user(words: &[&str]) -> Rule {
    Rule {
        role: "planner".into(),
        when_last: "user".into(),
        contains: words.iter().map(|w| w.to_string()).collect(),
        after_tool: None,
        text: String::new(),
        calls: Vec::new(),
    }
}

/// The planner, when the last message is a result of `tool`.
pub fn after_tool(tool: &str) -> Rule {
    Rule {
        when_last: "tool".into(),
        after_tool: Some(tool.into()),
        ..on_user(&[])
    }
}

/// The planner, when the last message is any tool result.
pub fn after_any_tool() -> Rule {
    Rule {
        when_last: "tool".into(),
        ..on_user(&[])
    }
}

impl Rule {
    /// Answer for another role (`extractor`, `summariser`).
    pub fn role(mut self, role: &str) -> Self {
        self.role = role.into();
        self
    }

    /// Also require the last message to contain `word`.
    pub fn containing(mut self, word: &str) -> Self {
        self.contains.push(word.into());
        self
    }

    /// Answer with this text.
    pub fn says(mut self, text: &str) -> Self {
        self.text = text.into();
        self
    }

    /// Answer with a call of `tool` (several calls make one parallel step).
    pub fn calls(mut self, tool: &str, arguments: Value) -> Self {
        self.calls.push((tool.into(), arguments));
        self
    }

    fn to_table(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("role".into(), self.role.clone().into());
        t.insert("when_last".into(), self.when_last.clone().into());
        if !self.contains.is_empty() {
            t.insert("contains".into(), self.contains.clone().into());
        }
        if let Some(tool) = &self.after_tool {
            t.insert("after_tool".into(), tool.clone().into());
        }
        t.insert("text".into(), self.text.clone().into());
        if !self.calls.is_empty() {
            let calls: Vec<toml::Value> = self
                .calls
                .iter()
                .map(|(name, arguments)| {
                    let mut c = toml::Table::new();
                    c.insert("name".into(), name.clone().into());
                    c.insert(
                        "arguments".into(),
                        toml::Value::try_from(arguments).expect("arguments without nulls"),
                    );
                    toml::Value::Table(c)
                })
                .collect();
            t.insert("tool_calls".into(), calls.into());
        }
        t
    }
}

impl Scenario {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            rules: Vec::new(),
        }
    }

    /// Add a rule after the others.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The scenario file's text.
    pub fn to_toml(&self) -> String {
        let mut doc = toml::Table::new();
        doc.insert("name".into(), self.name.clone().into());
        let rules: Vec<toml::Value> = self
            .rules
            .iter()
            .map(|r| toml::Value::Table(r.to_table()))
            .collect();
        doc.insert("rule".into(), rules.into());
        toml::to_string(&doc).expect("a scenario renders as TOML")
    }
}

/// A scenario named `name` in which "sum" calls `add` with 19 and 23 and the answer is
/// "The sum is 42."; anything else is answered "ok", and the extractor finds nothing.
pub fn sum_scenario(name: &str) -> Scenario {
    Scenario::new(name)
        .rule(on_user(&["sum"]).calls("add", serde_json::json!({"a": 19, "b": 23})))
        .rule(after_tool("add").says("The sum is 42."))
        .rule(on_user(&[]).says("ok"))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
}

/// A config file for a `hermes serve` process: the demo profile's tools and catalog server
/// (not its agent table, so a test may add `[agents.assistant]`), data in `<dir>/<name>-data`,
/// `script` as the model of every role. Returns the file's path (`<dir>/<name>.toml`).
pub fn write_serve_config(
    dir: &std::path::Path,
    name: &str,
    script: &Scenario,
) -> std::path::PathBuf {
    let scenario = dir.join(format!("{name}-scenario.toml"));
    std::fs::write(&scenario, script.to_toml()).unwrap();
    let data = dir.join(format!("{name}-data"));
    let models: String = ["planner", "extractor", "summariser"]
        .iter()
        .map(|role| {
            format!(
                "[models.{role}]\nprovider = \"replay\"\nscenario = {:?}\n",
                scenario.display().to_string()
            )
        })
        .collect();
    let config = format!(
        "{}\n{models}\n[engine]\ndata_dir = {:?}\n",
        demo_tools_toml(),
        data.display().to_string()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).unwrap();
    path
}

/// The demo profile's `[tools]` table as TOML: the shop's builtin tools (`generate_report`,
/// `add`, `order_lookup`…) for a config file that has no demo agent or models.
pub fn demo_builtin_toml() -> String {
    let demo = hermes::config::Config::demo().expect("the demo profile loads");
    let builtin: Vec<String> = demo
        .tools
        .builtin
        .iter()
        .map(|name| format!("{name:?}"))
        .collect();
    format!("[tools]\nbuiltin = [{}]\n", builtin.join(", "))
}

/// [`demo_builtin_toml`] and the demo's catalog MCP server (`catalog__…` tools).
pub fn demo_tools_toml() -> String {
    format!(
        "{}\n[[mcp.servers]]\nname = \"catalog\"\ncommand = \"self\"\n\
         args = [\"mcp\", \"catalog-server\"]\ntimeout_secs = 30\n",
        demo_builtin_toml()
    )
}
