//! The conversation loop of `hermes chat`: one `select!` over the prompt's lines, the
//! session's events, Ctrl-C and the first key typed while a turn waits. It decides which turn
//! is in the foreground (the one the person watches, streamed and cancelled by Ctrl-C) and
//! which go on behind the prompt (a turn waiting for a job or a confirmation).

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hermes::bus::SharedBus;
use hermes::config::Config;
use hermes::protocol::TurnEvent;
use hermes_client::{event_turn, PendingCall, SessionClient};
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::commands::Line;
use super::input::{Input, Prompter};
use super::screen::Screen;
use super::terminal::{KeyWatch, Quiet};
use super::view::View;
use crate::cli::reach::Asker;

/// Who the chat talks to.
#[derive(Debug, Clone)]
pub struct Who {
    pub agent: String,
    pub session: String,
    pub user: String,
}

/// The turn the person watches.
#[derive(Debug)]
pub(super) struct Foreground {
    /// The message that starts it, until `turn.started` names the turn.
    message_id: Option<String>,
    turn: Option<String>,
    /// It waits for a job or another agent (the prompt comes back at the first key).
    waiting: bool,
}

/// Finished turns whose late events (memory written, extraction failed) are still shown.
const RECENT: usize = 16;

/// How long, leaving after piped input, the last turn's memory write is waited for.
const MEMORY_GRACE: Duration = Duration::from_secs(10);

pub struct Chat {
    pub(super) config: Arc<Config>,
    pub(super) bus: SharedBus,
    pub(super) client: SessionClient,
    pub(super) who: Who,
    pub(super) timeout: Duration,
    pub(super) screen: Screen,
    pub(super) view: View,
    pub(super) asker: Asker,
    pub(super) logs: Option<PathBuf>,
    prompter: Prompter,
    /// A terminal (not piped input).
    interactive: bool,
    prompting: bool,
    input_done: bool,
    /// The last prompt ended with Ctrl-C: another one leaves.
    interrupted: bool,
    quiet: Option<Quiet>,
    keys: Option<KeyWatch>,
    pub(super) fg: Option<Foreground>,
    pub(super) background: HashSet<String>,
    recent: VecDeque<String>,
    /// A high-risk call waits for `/confirm` or `/deny`.
    pub(super) confirm: Option<PendingCall>,
    /// `/quit` was typed.
    pub(super) quit: bool,
}

/// What [`Chat::new`] needs.
pub struct Parts {
    pub config: Arc<Config>,
    pub bus: SharedBus,
    pub client: SessionClient,
    pub who: Who,
    pub timeout: Duration,
    pub screen: Screen,
    pub asker: Asker,
    pub logs: Option<PathBuf>,
    pub prompter: Prompter,
    pub interactive: bool,
}

impl Chat {
    pub fn new(p: Parts) -> Self {
        let look = p.screen.look;
        Self {
            config: p.config,
            bus: p.bus,
            client: p.client,
            who: p.who,
            timeout: p.timeout,
            screen: p.screen,
            view: View::new(look),
            asker: p.asker,
            logs: p.logs,
            prompter: p.prompter,
            interactive: p.interactive,
            prompting: false,
            input_done: false,
            interrupted: false,
            quiet: p.interactive.then(Quiet::new),
            keys: p.interactive.then(KeyWatch::start),
            fg: None,
            background: HashSet::new(),
            recent: VecDeque::new(),
            confirm: None,
            quit: false,
        }
    }

    /// Talk until Ctrl-D (or the end of piped input, once its last turn ended), `/quit` or a
    /// second Ctrl-C.
    pub async fn run(&mut self) -> anyhow::Result<()> {
        let mut sigint = signal(SignalKind::interrupt())?;
        let banner = super::banner(&self.who, self.logs.as_deref());
        if self.interactive {
            for line in banner {
                self.view.note(&mut self.screen, &line);
            }
            self.screen.line("");
        } else {
            for line in banner {
                eprintln!("{line}");
            }
        }
        loop {
            if self.quit || (self.input_done && self.fg.is_none()) {
                break;
            }
            if self.fg.is_none() && !self.prompting && !self.input_done {
                self.prompt();
            }
            let watching = self.fg.as_ref().is_some_and(|f| f.waiting) && self.keys.is_some();
            tokio::select! {
                _ = sigint.recv() => {
                    if self.interrupt(&mut sigint).await {
                        break;
                    }
                }
                input = self.prompter.lines.recv(), if self.prompting => {
                    self.input(input.unwrap_or(Input::Eof)).await;
                }
                Some(()) = key(&mut self.keys), if watching => self.send_behind_prompt(),
                event = self.client.next_event(Duration::from_secs(3600)) => {
                    if let Some(event) = event? {
                        self.event(event);
                    }
                }
            }
        }
        self.leave().await;
        Ok(())
    }

    fn prompt(&mut self) {
        if let Some(quiet) = &mut self.quiet {
            quiet.restore();
        }
        if self.interactive {
            self.screen.prompting(true);
        }
        self.prompting = true;
        self.prompter.ask(String::new());
    }

    async fn input(&mut self, input: Input) {
        self.prompting = false;
        self.screen.prompting(false);
        match input {
            Input::Line(text) => {
                self.interrupted = false;
                if !self.interactive && !text.trim().is_empty() {
                    let echo = self.screen.look.bold(&format!("› {text}"));
                    self.screen.line(&echo);
                }
                self.line(Line::parse(&text)).await;
            }
            Input::Interrupted if self.interrupted => self.quit = true,
            Input::Interrupted => {
                self.interrupted = true;
                self.view.note(
                    &mut self.screen,
                    "Ctrl-C again or Ctrl-D leaves (/cancel stops a waiting turn)",
                );
            }
            Input::Eof => self.input_done = true,
        }
    }

    async fn line(&mut self, line: Line) {
        match line {
            Line::Empty => {}
            Line::Message(text) => self.say(&text).await,
            Line::Command(command) => self.command(command).await,
            Line::Invalid(why) => self.view.note(&mut self.screen, &why),
        }
    }

    async fn say(&mut self, text: &str) {
        if let Some(pending) = &self.confirm {
            let note = format!(
                "the turn waits for your decision on `{}` first: /confirm runs it, /deny declines",
                pending.name
            );
            self.view.note(&mut self.screen, &note);
            return;
        }
        match self.client.send(text, self.timeout).await {
            Ok(accepted) => self.watch(Some(accepted.message_id), None),
            Err(e) => self.failed(&e.to_string()),
        }
    }

    /// Follow a turn in the foreground: the one `message_id` starts, or `turn`.
    pub(super) fn watch(&mut self, message_id: Option<String>, turn: Option<String>) {
        if let Some(turn) = &turn {
            self.background.remove(turn);
        }
        self.fg = Some(Foreground {
            message_id,
            turn,
            waiting: false,
        });
        if let Some(quiet) = &mut self.quiet {
            quiet.enter();
        }
        self.view.started(&mut self.screen);
    }

    pub(super) fn failed(&mut self, why: &str) {
        let line = self.screen.look.bad(&format!("✗ {why}"));
        self.screen.line(&line);
    }

    fn event(&mut self, event: TurnEvent) {
        if let (
            TurnEvent::TurnStarted {
                turn_id,
                message_id,
            },
            Some(fg),
        ) = (&event, &mut self.fg)
        {
            if fg.turn.is_none() && fg.message_id.as_ref() == Some(message_id) {
                fg.turn = Some(turn_id.clone());
            }
        }
        let Some(turn) = event_turn(&event).map(str::to_string) else {
            self.view.event(&mut self.screen, &event, false);
            return;
        };
        let foreground = self.fg.as_ref().and_then(|f| f.turn.as_ref()) == Some(&turn);
        if !foreground && !self.background.contains(&turn) && !self.recent.contains(&turn) {
            return;
        }
        self.view.event(&mut self.screen, &event, foreground);
        match &event {
            TurnEvent::Answer { .. } => self.ended(&turn),
            TurnEvent::Error { code, .. } if !code.starts_with("memory_extraction") => {
                self.ended(&turn)
            }
            TurnEvent::ConfirmationRequired {
                call_id,
                name,
                message,
                questions,
                ..
            } => {
                self.confirm = Some(PendingCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    message: message.clone(),
                    questions: questions.clone(),
                });
                if foreground {
                    self.fg = None;
                    self.view.park(&mut self.screen, &turn);
                }
                self.background.insert(turn);
            }
            TurnEvent::JobWaiting { .. } | TurnEvent::AgentDelegated { .. } if foreground => {
                if let Some(fg) = &mut self.fg {
                    fg.waiting = true;
                }
                if let Some(keys) = &self.keys {
                    keys.arm();
                }
            }
            TurnEvent::TurnResumed { .. } if foreground => {
                if let Some(fg) = &mut self.fg {
                    fg.waiting = false;
                }
                if let Some(keys) = &mut self.keys {
                    keys.disarm();
                }
            }
            _ => {}
        }
    }

    fn ended(&mut self, turn: &str) {
        if self.fg.as_ref().and_then(|f| f.turn.as_deref()) == Some(turn) {
            self.fg = None;
            if let Some(keys) = &mut self.keys {
                keys.disarm();
            }
        }
        self.background.remove(turn);
        if self.confirm.is_some() && self.background.is_empty() {
            self.confirm = None;
        }
        if !self.recent.iter().any(|t| t == turn) {
            self.recent.push_back(turn.to_string());
            if self.recent.len() > RECENT {
                self.recent.pop_front();
            }
        }
    }

    /// A key was typed while the foreground turn waits: it goes on behind the prompt.
    fn send_behind_prompt(&mut self) {
        let Some(turn) = self.fg.take().and_then(|f| f.turn) else {
            return;
        };
        self.view.park(&mut self.screen, &turn);
        self.background.insert(turn);
    }

    /// Ctrl-C outside the prompt: cancel the foreground turn; `true`: leave (nothing to
    /// cancel, or a second Ctrl-C while cancelling).
    async fn interrupt(&mut self, sigint: &mut Signal) -> bool {
        if self.fg.is_none() {
            return true;
        }
        self.view.note(
            &mut self.screen,
            "cancelling the turn… (Ctrl-C again leaves)",
        );
        tokio::select! {
            _ = sigint.recv() => true,
            stopped = self.client.cancel("cancelled with Ctrl-C in hermes chat", self.timeout) => {
                match stopped {
                    Ok(s) if s.turn_id.is_none() => {
                        // It ended on its own meanwhile; its last events say how.
                    }
                    Ok(_) => {}
                    Err(e) => self.failed(&format!("the turn was not cancelled: {e}")),
                }
                false
            }
        }
    }

    async fn leave(&mut self) {
        self.view.clear(&mut self.screen);
        if let Some(quiet) = &mut self.quiet {
            quiet.restore();
        }
        if !self.interactive && self.config.bus.url == "embedded" {
            self.await_memory().await;
        }
        for turn in &self.background {
            let note = format!(
                "turn {turn} goes on without this chat; `hermes chat --session {}` shows the \
                 session later",
                self.who.session
            );
            self.view.note(&mut self.screen, &note);
        }
    }

    /// Piped input ended: the last turn's memory write (or its failure) before the engine
    /// stops with this process.
    async fn await_memory(&mut self) {
        let Some(last) = self.recent.back().cloned() else {
            return;
        };
        let deadline = tokio::time::Instant::now() + MEMORY_GRACE;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.client.next_event(left).await {
                Ok(Some(event)) => {
                    let ours = event_turn(&event) == Some(last.as_str());
                    let done = ours
                        && matches!(
                            &event,
                            TurnEvent::MemoryWritten { .. } | TurnEvent::Error { .. }
                        );
                    if ours {
                        self.view.event(&mut self.screen, &event, false);
                    }
                    if done {
                        return;
                    }
                }
                _ => return,
            }
        }
    }
}

async fn key(keys: &mut Option<KeyWatch>) -> Option<()> {
    match keys {
        Some(keys) => keys.pressed.recv().await,
        None => std::future::pending().await,
    }
}
