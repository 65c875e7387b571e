//! The slash commands of `hermes chat`: a typed line is parsed once into a [`Line`] — a
//! message for the agent or one [`Command`] — and the chat loop matches on that.

/// What the person typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Nothing to do (an empty line).
    Empty,
    /// Text for the agent.
    Message(String),
    Command(Command),
    /// A `/word` that is not a command, or a command missing its argument: say why.
    Invalid(String),
}

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/new`: start a new session with the same agent.
    New,
    /// `/sessions`: this user's sessions, newest first.
    Sessions,
    /// `/switch ID`: continue session ID.
    Switch(String),
    /// `/memory`: what the agent remembers about this user.
    Memory,
    /// `/forget KEY`: forget the memory in slot KEY.
    Forget(String),
    /// `/agent NAME`: talk to another agent (same session id).
    Agent(String),
    /// `/confirm [JSON]`: run the high-risk call the turn waits on, or answer what its MCP
    /// server asked (the JSON is the form's answer; none: its defaults).
    Confirm(Option<serde_json::Value>),
    /// `/deny`: decline it.
    Deny,
    /// `/cancel`: stop the session's turn in progress (a waiting one too).
    Cancel,
    /// `/help`: commands, keys and where the log is.
    Help,
    /// `/quit` (or `/exit`): leave.
    Quit,
}

/// Every command with its one-line help, in the order `/help` lists them.
pub const HELP: &[(&str, &str)] = &[
    ("/new", "start a new session with this agent"),
    ("/sessions", "your sessions, newest first"),
    ("/switch ID", "continue session ID"),
    ("/memory", "what the agent remembers about you"),
    ("/forget KEY", "forget the memory in slot KEY (see /memory)"),
    ("/agent NAME", "talk to agent NAME in this session"),
    (
        "/confirm [JSON]",
        "run the call the turn waits on, or answer its question",
    ),
    ("/deny", "decline it: it never runs"),
    ("/cancel", "stop the turn in progress, a waiting one too"),
    ("/help", "this list"),
    ("/quit", "leave (Ctrl-D does too)"),
];

/// The names completion offers after a `/`.
pub fn names() -> impl Iterator<Item = &'static str> {
    HELP.iter()
        .map(|&(usage, _)| usage.split_whitespace().next().unwrap_or(usage))
}

impl Line {
    /// Parse a typed line. A line starting with `//` is a message starting with `/`.
    pub fn parse(text: &str) -> Line {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Line::Empty;
        }
        if let Some(escaped) = trimmed.strip_prefix("//") {
            return Line::Message(format!("/{escaped}"));
        }
        let Some(rest) = trimmed.strip_prefix('/') else {
            return Line::Message(text.trim_end().to_string());
        };
        let mut words = rest.split_whitespace();
        let name = words.next().unwrap_or_default();
        let arg = words.next().map(str::to_string);
        let extra = words.next().is_some();
        let needs = |usage: &str, arg: Option<String>| match arg {
            Some(a) if !extra => Line::Command(command_with(usage, a)),
            _ => Line::Invalid(format!("usage: {usage}")),
        };
        let bare = |command: Command| {
            if arg.is_some() {
                Line::Invalid(format!("/{name} takes no argument"))
            } else {
                Line::Command(command)
            }
        };
        match name {
            "new" => bare(Command::New),
            "sessions" => bare(Command::Sessions),
            "memory" => bare(Command::Memory),
            "confirm" | "yes" => confirm(rest[name.len()..].trim()),
            "deny" | "no" => bare(Command::Deny),
            "cancel" => bare(Command::Cancel),
            "help" | "?" => bare(Command::Help),
            "quit" | "exit" => bare(Command::Quit),
            "switch" => needs("/switch ID", arg),
            "forget" => needs("/forget KEY", arg),
            "agent" => needs("/agent NAME", arg),
            other => Line::Invalid(format!(
                "no command /{other}; /help lists them (start a message with // to send a /)"
            )),
        }
    }
}

/// `/confirm` alone, or with a JSON answer (which may hold spaces).
fn confirm(answer: &str) -> Line {
    if answer.is_empty() {
        return Line::Command(Command::Confirm(None));
    }
    match serde_json::from_str(answer) {
        Ok(value) => Line::Command(Command::Confirm(Some(value))),
        Err(e) => Line::Invalid(format!(
            "usage: /confirm [JSON] — the answer is not JSON ({e}); e.g. /confirm {{\"name\": \"Ada\"}}"
        )),
    }
}

fn command_with(usage: &str, arg: String) -> Command {
    match usage {
        "/switch ID" => Command::Switch(arg),
        "/forget KEY" => Command::Forget(arg),
        _ => Command::Agent(arg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_a_message_and_slash_words_are_commands() {
        assert_eq!(Line::parse("  hello  "), Line::Message("  hello".into()));
        assert_eq!(Line::parse("   "), Line::Empty);
        assert_eq!(Line::parse("/new"), Line::Command(Command::New));
        assert_eq!(
            Line::parse("/switch s-2"),
            Line::Command(Command::Switch("s-2".into()))
        );
        assert_eq!(
            Line::parse("/forget budget"),
            Line::Command(Command::Forget("budget".into()))
        );
        assert_eq!(
            Line::parse("/agent researcher"),
            Line::Command(Command::Agent("researcher".into()))
        );
        assert_eq!(
            Line::parse("/confirm"),
            Line::Command(Command::Confirm(None))
        );
        assert_eq!(
            Line::parse(r#"/confirm {"name": "Ada", "age": 36}"#),
            Line::Command(Command::Confirm(Some(
                serde_json::json!({"name": "Ada", "age": 36})
            )))
        );
        assert!(
            matches!(Line::parse("/confirm {name"), Line::Invalid(why) if why.contains("not JSON"))
        );
    }

    #[test]
    fn a_double_slash_sends_a_message_starting_with_a_slash() {
        assert_eq!(
            Line::parse("//etc/hosts is a file"),
            Line::Message("/etc/hosts is a file".into())
        );
    }

    #[test]
    fn a_missing_or_extra_argument_says_the_usage() {
        assert_eq!(
            Line::parse("/switch"),
            Line::Invalid("usage: /switch ID".into())
        );
        assert_eq!(
            Line::parse("/forget a b"),
            Line::Invalid("usage: /forget KEY".into())
        );
        assert!(matches!(Line::parse("/new now"), Line::Invalid(_)));
        assert!(matches!(Line::parse("/bogus"), Line::Invalid(m) if m.contains("/help")));
    }

    #[test]
    fn every_listed_command_parses() {
        for name in names() {
            let line = match name {
                "/switch" | "/forget" | "/agent" => format!("{name} x"),
                _ => name.to_string(),
            };
            assert!(
                matches!(Line::parse(&line), Line::Command(_)),
                "{line} does not parse"
            );
        }
    }
}
