//! What each slash command does: switch session or agent, list sessions and memories,
//! forget one, decide a waiting call, cancel, help.

use hermes::protocol::{subjects, TurnPhase};
use hermes::protocol::{
    Memory, MemoryForgetRequest, MemoryListRequest, SessionListRequest, SessionSummary,
};

use super::commands::{Command, HELP};
use super::talk::Chat;
use super::view::clip;

/// Sessions `/sessions` lists.
const SESSIONS_SHOWN: usize = 20;

impl Chat {
    pub(super) async fn command(&mut self, command: Command) {
        let done = match command {
            Command::New => {
                let id = format!("chat-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
                self.talk_to(self.who.agent.clone(), id).await
            }
            Command::Switch(id) => self.talk_to(self.who.agent.clone(), id).await,
            Command::Agent(name) => match self.config.agent(&name) {
                Ok(_) => self.talk_to(name, self.who.session.clone()).await,
                Err(e) => Err(anyhow::anyhow!("{e}")),
            },
            Command::Sessions => self.sessions().await,
            Command::Memory => self.memories().await,
            Command::Forget(key) => self.forget(&key).await,
            Command::Confirm(answer) => self.decide(true, answer).await,
            Command::Deny => self.decide(false, None).await,
            Command::Cancel => self.cancel().await,
            Command::Help => {
                self.help();
                Ok(())
            }
            Command::Quit => {
                self.quit = true;
                Ok(())
            }
        };
        if let Err(e) = done {
            self.failed(&format!("{e:#}"));
        }
    }

    /// Talk to `agent` in `session` from now on.
    async fn talk_to(&mut self, agent: String, session: String) -> anyhow::Result<()> {
        subjects::check_id("session", &session)?;
        let client = crate::cli::send::open_client(
            self.bus.clone(),
            &self.config,
            &agent,
            &session,
            &self.who.user,
        )
        .await?;
        let left: Vec<String> = self.background.drain().collect();
        for turn in left {
            let note = format!(
                "turn {turn} goes on in session {}; /switch {} shows its answer",
                self.who.session, self.who.session
            );
            self.view.note(&mut self.screen, &note);
        }
        self.confirm = None;
        self.client = client;
        self.who.agent = agent;
        self.who.session = session;
        let note = format!(
            "· now agent {} · session {}",
            self.who.agent, self.who.session
        );
        self.view.note(&mut self.screen, &note);
        Ok(())
    }

    async fn sessions(&mut self) -> anyhow::Result<()> {
        let reply = self
            .asker
            .ask(SessionListRequest {
                user: Some(self.who.user.clone()),
                agent: None,
                offset: 0,
                limit: SESSIONS_SHOWN,
            })
            .await?;
        if reply.sessions.is_empty() {
            self.view.note(&mut self.screen, "no sessions yet");
            return Ok(());
        }
        let lines: Vec<String> = reply
            .sessions
            .iter()
            .map(|s| self.session_line(s))
            .collect();
        for line in lines {
            self.screen.line(&line);
        }
        if reply.total > reply.sessions.len() {
            let more = format!(
                "{} more: `hermes sessions ls --user {}`",
                reply.total - reply.sessions.len(),
                self.who.user
            );
            self.view.note(&mut self.screen, &more);
        }
        Ok(())
    }

    fn session_line(&self, s: &SessionSummary) -> String {
        let current = s.session == self.who.session && s.agent == self.who.agent;
        let mark = if current { "●" } else { " " };
        let phase = s.phase.map_or("new", TurnPhase::as_str);
        let line = format!(
            "{mark} {:<20} {:<12} {:>3} messages  {:<14} {}",
            s.session,
            s.agent,
            s.messages,
            phase,
            s.updated_at.format("%Y-%m-%d %H:%M")
        );
        if current {
            self.screen.look.bold(&line)
        } else {
            line
        }
    }

    async fn memories(&mut self) -> anyhow::Result<()> {
        let records = self.list_memories().await?;
        if records.is_empty() {
            let note = format!("no memories of {} yet", self.who.user);
            self.view.note(&mut self.screen, &note);
            return Ok(());
        }
        let cols = self.screen.cols();
        for m in records {
            let kind = serde_json::to_value(m.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let line = format!(
                "  {} {}",
                self.screen.look.bold(&m.key),
                clip(
                    &format!("{} ({kind})", m.content),
                    cols.saturating_sub(m.key.len() + 4)
                )
            );
            self.screen.line(&line);
        }
        self.view.note(&mut self.screen, "/forget KEY forgets one");
        Ok(())
    }

    async fn list_memories(&self) -> anyhow::Result<Vec<Memory>> {
        let reply = self
            .asker
            .ask(MemoryListRequest {
                user: self.who.user.clone(),
                ..MemoryListRequest::default()
            })
            .await?;
        Ok(reply.records)
    }

    async fn forget(&mut self, key: &str) -> anyhow::Result<()> {
        let Some(record) = self
            .list_memories()
            .await?
            .into_iter()
            .find(|m| m.key == key)
        else {
            anyhow::bail!("no memory with key `{key}`; /memory lists the keys");
        };
        let reply = self
            .asker
            .ask(MemoryForgetRequest {
                user: record.user.clone(),
                namespace: record.namespace.clone(),
                id: Some(record.id.clone()),
                key: None,
            })
            .await?;
        let note = if reply.changes.is_empty() {
            format!("`{key}` was already gone")
        } else {
            format!("· forgot {key}")
        };
        self.view.note(&mut self.screen, &note);
        Ok(())
    }

    /// `/confirm` (with an answer, for a question) or `/deny` the call the session's turn
    /// waits on, and watch the turn go on.
    async fn decide(
        &mut self,
        approve: bool,
        answer: Option<serde_json::Value>,
    ) -> anyhow::Result<()> {
        let call = self.confirm.as_ref().map(|p| p.call_id.clone());
        let decided = match (answer, &call) {
            (Some(answer), Some(call)) => self.client.answer(call, answer, self.timeout).await?,
            (Some(_), None) => {
                anyhow::bail!("no question waits for an answer; /confirm alone decides a call")
            }
            (None, _) => {
                self.client
                    .confirm(approve, call.as_deref(), self.timeout)
                    .await?
            }
        };
        self.confirm = None;
        let what = if approve {
            "· approved"
        } else {
            "· declined"
        };
        self.view.note(&mut self.screen, what);
        self.watch(None, Some(decided.turn_id));
        Ok(())
    }

    async fn cancel(&mut self) -> anyhow::Result<()> {
        let stopped = self
            .client
            .cancel("cancelled with /cancel in hermes chat", self.timeout)
            .await?;
        match stopped.turn_id {
            // Its `error` event says so.
            Some(turn) if self.background.contains(&turn) => {}
            Some(turn) => {
                let note = format!("⨯ cancelled turn {turn}");
                self.view.note(&mut self.screen, &note);
            }
            None => self.view.note(&mut self.screen, "nothing to cancel"),
        }
        self.confirm = None;
        Ok(())
    }

    fn help(&mut self) {
        let look = self.screen.look;
        for (usage, what) in HELP {
            let line = format!("  {} {what}", look.bold(&format!("{usage:<14}")));
            self.screen.line(&line);
        }
        let keys = [
            "Enter sends · a trailing \\ or Alt-Enter adds a line · ↑/↓ history · Tab completes /commands",
            "Ctrl-C cancels the running turn · at the prompt, Ctrl-C twice or Ctrl-D leaves",
        ];
        for k in keys {
            self.view.note(&mut self.screen, &format!("  {k}"));
        }
        let logs = match &self.logs {
            Some(path) => format!("  logs: {}", path.display()),
            None => "  logs: stderr".to_string(),
        };
        self.view.note(&mut self.screen, &logs);
    }
}
