//! `hermes chat`: a conversation in the terminal. By default the chat view ([`view`]): the
//! answer streamed once (Markdown rendered on a terminal), a line per tool call, job and
//! delegated agent, line editing and slash commands ([`commands`], [`actions`]), Ctrl-C to
//! cancel a turn ([`talk`]) and logs in a file of the data directory. `--trace` prints the
//! engine's event trace instead ([`trace`]), as `hermes send` does.

mod actions;
mod commands;
mod input;
mod questions;
mod render;
mod screen;
mod talk;
mod terminal;
mod trace;
mod view;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use hermes::config::Config;

use super::reach::Asker;
use super::runtime::with_engine_runtime;
use super::send::{apply, connect, Target};
use input::Prompter;
use render::Look;
use screen::Screen;
use talk::{Chat, Parts, Who};

#[derive(Args)]
pub struct ChatArgs {
    #[command(flatten)]
    target: Target,
    /// Print every event of each turn (`turn.started`, `delta`, `tool.call`, `tool.result`,
    /// `answer`, …) as `hermes send` does, instead of the chat view; logs stay on stderr.
    #[arg(long)]
    trace: bool,
    /// Write logs to stderr — into the conversation — instead of `<data_dir>/chat.log`.
    #[arg(long)]
    log_stderr: bool,
}

impl ChatArgs {
    /// The file the chat view logs to (none: stderr), for the `--config` file at `config`.
    pub fn log_file(&self, configs: &[PathBuf]) -> Option<PathBuf> {
        if self.trace || self.log_stderr {
            return None;
        }
        let dir = match &self.target.data_dir {
            Some(dir) => dir.clone(),
            None => hermes::config::Config::load_all(configs)
                .map(|c| c.engine.data_dir)
                .ok()?,
        };
        Some(dir.join("chat.log"))
    }
}

/// `logs`: the file logs go to, when they do not go to stderr.
pub fn run(config: Config, args: ChatArgs, logs: Option<PathBuf>) -> anyhow::Result<()> {
    let config = apply(config, &args.target);
    if let Some(notice) = super::doctor::scripted_model_notice(&config) {
        eprintln!("{notice}\n");
    }
    let t = args.target;
    let who = Who {
        agent: t.agent.clone(),
        session: t.session.clone(),
        user: t.user.clone(),
    };
    let timeout = Duration::from_secs(t.timeout);
    let trace = args.trace;
    with_engine_runtime(config.engine.io_threads, |io| async move {
        let (bus, engine) = connect(config.clone(), io).await?;
        let mut client =
            super::send::open_client(bus.clone(), &config, &who.agent, &who.session, &who.user)
                .await?;
        let result = if trace {
            trace::run(&mut client, &who, timeout).await
        } else {
            let asker = Asker::new(bus.clone(), &config, "this chat's engine".into());
            let (prompter, screen, interactive) = terminal_or_pipe(&config)?;
            let mut chat = Chat::new(Parts {
                config,
                bus,
                client,
                who,
                timeout,
                screen,
                asker,
                logs,
                prompter,
                interactive,
            });
            chat.run().await
        };
        if let Some(engine) = engine {
            engine.shutdown().await;
        }
        result
    })
}

/// On a terminal (stdin and stdout) the line editor and its printer; else piped lines and
/// stdout. Styled unless stdout is not a terminal or `NO_COLOR` is set.
fn terminal_or_pipe(config: &Config) -> anyhow::Result<(Prompter, Screen, bool)> {
    let terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let styled = std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let look = Look { styled };
    if terminal {
        let history = config.engine.data_dir.join("chat_history");
        match input::terminal(history, styled) {
            Ok((prompter, printer)) => {
                return Ok((prompter, Screen::new(look, Some(printer)), true))
            }
            // A terminal the line editor cannot drive (TERM=dumb…): lines as from a pipe.
            Err(e) => tracing::warn!(error = %e, "no line editing on this terminal"),
        }
    }
    Ok((input::piped(), Screen::new(look, None), false))
}

/// The first lines of a chat: who talks to whom, where the logs go, the keys.
pub(super) fn banner(who: &Who, logs: Option<&Path>) -> Vec<String> {
    let logs = match logs {
        Some(path) => format!("logs: {}", path.display()),
        None => "logs: stderr".into(),
    };
    vec![
        format!(
            "hermes chat · agent {} · session {} · user {}",
            who.agent, who.session, who.user
        ),
        format!("{logs} · /help lists commands · Ctrl-C cancels a turn · Ctrl-D leaves"),
    ]
}
