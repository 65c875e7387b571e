//! What the person types. On a terminal: rustyline on its own thread — line editing, history
//! kept in the data directory, Tab completing slash commands, a trailing `\` or Alt-Enter
//! for another line — asked for one line at a time, so the prompt shows only when the chat
//! wants input. From a pipe: lines as they come (a trailing `\` joins the next one too).

use std::borrow::Cow;
use std::io::BufRead;
use std::path::PathBuf;

use rustyline::completion::Completer;
use rustyline::config::Config;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Cmd, Editor, EventHandler, KeyCode, KeyEvent, Modifiers};
use tokio::sync::mpsc;

use super::commands;
use super::screen::Printer;

/// One answer to a prompt.
#[derive(Debug)]
pub enum Input {
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D at an empty prompt, or the end of piped input.
    Eof,
}

/// Asks for lines; they arrive on `lines`.
pub struct Prompter {
    ask: Option<std::sync::mpsc::Sender<String>>,
    pub lines: mpsc::UnboundedReceiver<Input>,
}

impl Prompter {
    /// Show `initial` typed ahead at the prompt and read a line (from a pipe: the next line
    /// is read anyway).
    pub fn ask(&self, initial: String) {
        if let Some(ask) = &self.ask {
            let _ = ask.send(initial);
        }
    }
}

/// A line editor on its own thread, and the printer that writes above its prompt.
pub fn terminal(history: PathBuf, styled: bool) -> anyhow::Result<(Prompter, Printer)> {
    let config = Config::builder()
        .auto_add_history(false)
        .history_ignore_space(true)
        .max_history_size(1000)?
        .build();
    let mut editor: Editor<ChatHelper, DefaultHistory> = Editor::with_config(config)?;
    editor.set_helper(Some(ChatHelper));
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    if history.exists() {
        if let Err(e) = editor.load_history(&history) {
            tracing::warn!(path = %history.display(), error = %e, "chat history not read");
        }
    }
    let printer: Printer = Box::new(editor.create_external_printer()?);
    let prompt = ChatPrompt::new(styled);
    let (ask, asked) = std::sync::mpsc::channel::<String>();
    let (tell, lines) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("hermes-chat-input".into())
        .spawn(move || {
            for initial in asked {
                let answer = match editor.readline_with_initial(&prompt, (&initial, "")) {
                    Ok(line) => {
                        let line = join_continued(&line);
                        if !line.trim().is_empty() {
                            let _ = editor.add_history_entry(line.as_str());
                            if let Err(e) = editor.append_history(&history) {
                                tracing::debug!(error = %e, "chat history not saved");
                            }
                        }
                        Input::Line(line)
                    }
                    Err(ReadlineError::Interrupted) => Input::Interrupted,
                    Err(ReadlineError::Eof) => Input::Eof,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the terminal failed");
                        Input::Eof
                    }
                };
                let eof = matches!(answer, Input::Eof);
                if tell.send(answer).is_err() || eof {
                    break;
                }
            }
        })?;
    Ok((
        Prompter {
            ask: Some(ask),
            lines,
        },
        printer,
    ))
}

/// Lines from a pipe, read ahead on their own thread.
pub fn piped() -> Prompter {
    let (tell, lines) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut pending = String::new();
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            match line.strip_suffix('\\') {
                Some(start) => {
                    pending.push_str(start);
                    pending.push('\n');
                }
                None => {
                    pending.push_str(&line);
                    if tell
                        .send(Input::Line(std::mem::take(&mut pending)))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        if !pending.is_empty() {
            let _ = tell.send(Input::Line(pending));
        }
        let _ = tell.send(Input::Eof);
    });
    Prompter { ask: None, lines }
}

/// The editor's text with each `\`-newline continuation made a plain newline.
fn join_continued(text: &str) -> String {
    text.replace("\\\n", "\n")
}

/// `› `, bold on a styled terminal.
struct ChatPrompt {
    raw: String,
    styled: String,
}

impl ChatPrompt {
    fn new(styled: bool) -> Self {
        let raw = "› ".to_string();
        let styled = if styled {
            console::style(&raw)
                .bold()
                .cyan()
                .force_styling(true)
                .to_string()
        } else {
            raw.clone()
        };
        Self { raw, styled }
    }
}

impl rustyline::Prompt for ChatPrompt {
    fn raw(&self) -> &str {
        &self.raw
    }
    fn styled(&self) -> &str {
        &self.styled
    }
}

/// Completion of slash commands; a trailing `\` asks for another line.
struct ChatHelper;

impl Completer for ChatHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let typed = &line[..pos];
        if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
            return Ok((pos, Vec::new()));
        }
        let found = commands::names()
            .filter(|n| n.starts_with(typed))
            .map(|n| format!("{n} "))
            .collect();
        Ok((0, found))
    }
}

impl Hinter for ChatHelper {
    type Hint = String;
}

impl Highlighter for ChatHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(&'s self, prompt: &'p str, _: bool) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for ChatHelper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl rustyline::Helper for ChatHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backslash_continuation_becomes_a_newline() {
        assert_eq!(join_continued("first \\\nsecond"), "first \nsecond");
        assert_eq!(join_continued("no continuation"), "no continuation");
    }
}
