//! Running a suite: every case on a fresh engine (all five actors, embedded bus) over a fresh
//! temporary data directory, so cases never see each other's sessions or memories — two cases
//! may use the same user (the order data belongs to users such as `u-1001`) — and a run is
//! repeatable. Starting an engine takes a fraction of a second; the tokenizer used for
//! counting is loaded once per suite.
//!
//! A case's messages go through [`SessionClient`] one at a time: each waits for its turn's
//! `answer` (through async jobs: a `waiting_job` turn answers when its job completes), `error`
//! or `confirmation.required`. Between two sessions of a case, and after the last when memory
//! checks need it, the run waits (at most `memory_wait_secs`) for the background extraction of
//! each answered turn (`memory.written`). Tool rounds and tokens come from the session log and
//! the planning requests seen on `hermes.plan` (see Tokens below).
//!
//! # Tokens
//! Per turn: when the provider reported `usage` for every model call, its prompt and
//! completion tokens; otherwise the planning requests as sent (messages and tool specs) and the
//! replies as stored, counted with the planner model's tokenizer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::runtime::Handle;
use tokio::time::Instant;

use super::check::{self, Observed, ObservedTurn, TurnEnd};
use super::report::{CaseReport, Overall, SuiteReport, TokenSource, Tokens};
use super::suite::{Case, Input, Suite};
use crate::actors::ActorSet;
use crate::bus::{rpc, SharedBus, Subscription};
use crate::client::{event_turn, ClientError, SessionClient};
use crate::config::Config;
use crate::context::tokens::TokenCounter;
use crate::engine::{Engine, EngineError};
use crate::llm::factory::build_model;
use crate::protocol::envelope::Envelope;
use crate::protocol::{subjects, Memory, MemoryListRequest, PlanRequest, Role, TurnEvent};
use crate::store::sessions::{SessionStore, StoredMessage};

/// How long listing a user's memories may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error("cannot create a temporary data directory: {0}")]
    TempDir(std::io::Error),
    #[error("cannot start the engine for case `{case}`: {source}")]
    Engine { case: String, source: EngineError },
    #[error("cannot build the planner model: {0}; check [models.planner] in the config")]
    Model(String),
    #[error("cannot load the tokenizer that counts tokens: {0}")]
    Tokenizer(String),
    #[error(
        "case `{case}` talks to agent `{agent}`, which the config does not define; \
         configured agents: {known} (set `agent` in the case or add [agents.{agent}])"
    )]
    UnknownAgent {
        case: String,
        agent: String,
        known: String,
    },
    #[error("case `{case}`: {message}")]
    Case { case: String, message: String },
}

/// What a run tells its caller as it goes (for a progress bar).
pub enum Progress<'a> {
    Started(&'a Case),
    Finished(&'a CaseReport),
}

/// Runs suites against one configuration.
pub struct Runner {
    config: Config,
    io: Handle,
    model: String,
    counter: TokenCounter,
}

impl Runner {
    /// `config` is the Hermes configuration every case's engine starts from (its data
    /// directory and bus are replaced); `io` is the runtime for network I/O. Must be called,
    /// like [`Runner::run`], inside an actix `System`.
    pub async fn new(config: Config, io: Handle) -> Result<Self, RunError> {
        let planner = build_model(&config.models.planner, "planner")
            .map_err(|e| RunError::Model(e.to_string()))?;
        let (model, name) = (planner.id(), planner.model_name());
        let counter = io
            .spawn_blocking(move || TokenCounter::for_model(&name))
            .await
            .map_err(|e| RunError::Tokenizer(e.to_string()))?
            .map_err(|e| RunError::Tokenizer(e.to_string()))?;
        Ok(Self {
            config,
            io,
            model,
            counter,
        })
    }

    /// The planner model's id, as the report names it.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Run every case of `suite` in order.
    pub async fn run(
        &self,
        suite: &Suite,
        mut progress: impl FnMut(Progress<'_>),
    ) -> Result<SuiteReport, RunError> {
        for case in &suite.cases {
            if self.config.agent(&case.agent).is_err() {
                return Err(RunError::UnknownAgent {
                    case: case.name.clone(),
                    agent: case.agent.clone(),
                    known: self
                        .config
                        .agents
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        let mut cases = Vec::with_capacity(suite.cases.len());
        for case in &suite.cases {
            progress(Progress::Started(case));
            let report = self.run_case(case).await?;
            progress(Progress::Finished(&report));
            cases.push(report);
        }
        Ok(SuiteReport {
            suite: suite.name.clone(),
            model: self.model.clone(),
            overall: Overall::of(&cases),
            cases,
            comparison: None,
        })
    }

    /// One case on its own engine and data directory.
    pub async fn run_case(&self, case: &Case) -> Result<CaseReport, RunError> {
        let temp = tempfile::tempdir().map_err(RunError::TempDir)?;
        let mut config = self.config.clone();
        config.engine.data_dir = temp.path().join("hermes");
        config.bus.url = "embedded".into();
        let engine = Engine::start(Arc::new(config), ActorSet::ALL, self.io.clone())
            .await
            .map_err(|source| RunError::Engine {
                case: case.name.clone(),
                source,
            })?;
        let result = self.drive(&engine, case).await;
        let unmounted = unmounted_mcp_servers(&engine);
        engine.shutdown().await;
        let mut report = result.map_err(|message| RunError::Case {
            case: case.name.clone(),
            message,
        })?;
        if !report.passed {
            // A likely cause worth naming beside the failed checks.
            report.failures.extend(unmounted);
        }
        Ok(report)
    }

    async fn drive(&self, engine: &Engine, case: &Case) -> Result<CaseReport, String> {
        let mut plans = engine
            .bus
            .subscribe(subjects::PLAN)
            .await
            .map_err(|e| format!("cannot watch the planning requests: {e}"))?;
        let Input::Sessions(sessions) = &case.input;
        let deadline = Instant::now() + case.timeout;
        let mut observed = Observed::default();
        let mut latency = Duration::ZERO;
        let mut stopped = false;
        let mut extraction = Ok(());
        for (k, messages) in sessions.iter().enumerate() {
            let client = SessionClient::open(
                engine.bus.clone(),
                &case.agent,
                &case.session_id(k),
                &case.user,
            )
            .await
            .map_err(|e| format!("cannot open session {}: {e}", case.session_id(k)))?;
            let mut follower = Follower::new(client, k, case.timeout);
            for text in messages {
                if stopped {
                    follower.skip(text);
                    continue;
                }
                latency += follower.turn(text, deadline).await;
                stopped = !follower.last_answered();
            }
            let last = k + 1 == sessions.len();
            if !stopped && (!last || case.expect.needs_memories()) {
                extraction = follower.wait_extractions(case.memory_wait).await;
            }
            observed.turns.extend(follower.into_turns());
        }
        if case.expect.needs_memories() {
            observed.memories = Some(match extraction {
                Ok(()) => list_memories(&engine.bus, &case.user).await,
                Err(e) => Err(e),
            });
        }
        let prompts = self.counted_prompts(&mut plans);
        let (tool_rounds, tokens) = self.rounds_and_tokens(engine, case, &observed, &prompts)?;
        observed.tool_rounds = tool_rounds;
        let failures = check::failures(&case.expect, &observed);
        Ok(CaseReport {
            name: case.name.clone(),
            passed: failures.is_empty(),
            failures,
            turns: u32::try_from(observed.turns.len()).unwrap_or(u32::MAX),
            tool_rounds,
            cost: self.price(case).map(|price| tokens.cost(&price)),
            tokens,
            latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// The price of the model the case's agent plans with, when its table has one.
    fn price(&self, case: &Case) -> Option<crate::config::Price> {
        let agent = self.config.agent(&case.agent).ok()?;
        self.config
            .models
            .model(&agent.model)
            .or(Some(&self.config.models.planner))
            .and_then(|m| m.price())
    }

    /// Prompt tokens per turn of the planning requests published so far, counted.
    fn counted_prompts(&self, plans: &mut Subscription) -> HashMap<String, u64> {
        let mut prompts: HashMap<String, u64> = HashMap::new();
        while let Some(Some(message)) = plans.next().now_or_never() {
            let Ok(request) = Envelope::<PlanRequest>::decode_request(&message.payload, usize::MAX)
            else {
                continue;
            };
            let request = request.body;
            let messages: u64 = request
                .messages
                .iter()
                .map(|m| u64::from(self.counter.count_message(m)))
                .sum();
            let tools = serde_json::to_string(&request.tools).unwrap_or_default();
            let tools = match request.tools.is_empty() {
                true => 0,
                false => u64::from(self.counter.count_fixed(&tools)),
            };
            *prompts.entry(request.turn_id).or_default() += messages + tools;
        }
        prompts
    }

    /// Tool rounds and tokens of the case's turns, from the session log.
    fn rounds_and_tokens(
        &self,
        engine: &Engine,
        case: &Case,
        observed: &Observed,
        prompts: &HashMap<String, u64>,
    ) -> Result<(u32, Tokens), String> {
        let db = engine
            .db
            .as_ref()
            .ok_or("the engine has no data directory")?;
        let store = SessionStore::open(db).map_err(|e| format!("cannot read the sessions: {e}"))?;
        let sessions = observed
            .turns
            .iter()
            .map(|t| t.session + 1)
            .max()
            .unwrap_or(0);
        let logs = (0..sessions)
            .map(|k| {
                store
                    .messages(&case.agent, &case.session_id(k))
                    .map_err(|e| format!("cannot read session {}: {e}", case.session_id(k)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut rounds = 0u32;
        let mut total: Option<Tokens> = None;
        for turn in &observed.turns {
            let Some(turn_id) = &turn.turn_id else {
                continue;
            };
            let replies: Vec<&StoredMessage> = logs[turn.session]
                .iter()
                .filter(|m| &m.turn_id == turn_id && m.message.role == Role::Assistant)
                .collect();
            let asked_tools = replies.iter().filter(|m| !m.message.tool_calls.is_empty());
            rounds += u32::try_from(asked_tools.count()).unwrap_or(u32::MAX);
            let counted = prompts.get(turn_id).copied().unwrap_or(0);
            let tokens = turn_tokens(&replies, counted);
            total = Some(match total {
                None => tokens,
                Some(t) => t.plus(tokens),
            });
        }
        Ok((rounds, total.unwrap_or_default()))
    }
}

/// A turn's tokens from its model replies: the provider's usage when every reply has it,
/// else `counted_prompt` and the replies' own counts (the usage's completion where reported).
fn turn_tokens(replies: &[&StoredMessage], counted_prompt: u64) -> Tokens {
    let reported = replies.iter().filter(|m| m.usage.is_some()).count();
    let all_reported = reported > 0 && reported == replies.len();
    let completion = replies
        .iter()
        .map(|m| u64::from(m.usage.map_or(m.tokens, |u| u.completion_tokens)))
        .sum();
    let prompt = match all_reported {
        true => replies
            .iter()
            .filter_map(|m| m.usage)
            .map(|u| u64::from(u.prompt_tokens))
            .sum(),
        false => counted_prompt,
    };
    let source = match reported {
        0 => TokenSource::Counted,
        _ if all_reported => TokenSource::Reported,
        _ => TokenSource::Mixed,
    };
    let usage = |f: fn(&crate::llm::Usage) -> u32| -> u64 {
        replies
            .iter()
            .filter_map(|m| m.usage.as_ref())
            .map(|u| u64::from(f(u)))
            .sum()
    };
    Tokens {
        prompt,
        completion,
        source,
        cached: usage(|u| u.cached_tokens),
        cache_write: usage(|u| u.cache_write_tokens),
        reasoning: usage(|u| u.reasoning_tokens),
    }
}

/// `MCP server x was not mounted: …` for each configured server that failed to start.
fn unmounted_mcp_servers(engine: &Engine) -> Vec<String> {
    let Some(catalog) = &engine.mcp else {
        return Vec::new();
    };
    catalog
        .servers
        .iter()
        .filter_map(|s| {
            let error = s.error.as_deref()?;
            Some(format!(
                "note: MCP server `{}` was not mounted, so its tools were missing: {error}",
                s.name
            ))
        })
        .collect()
}

async fn list_memories(bus: &SharedBus, user: &str) -> Result<Vec<Memory>, String> {
    let request = Envelope::request(MemoryListRequest {
        user: user.to_string(),
        namespace: None,
        id: None,
        ..MemoryListRequest::default()
    });
    rpc::request(bus.as_ref(), request, LIST_TIMEOUT)
        .await
        .map(|reply| reply.body.records)
        .map_err(|e| format!("cannot list the user's memories: {e}"))
}

/// One message of a session being followed.
struct Followed {
    message_id: Option<String>,
    turn: ObservedTurn,
    ended: bool,
    /// `memory.written` (or an extraction error) arrived for the turn.
    extracted: bool,
}

/// The turns of one session, fed by its event stream.
struct Follower {
    client: SessionClient,
    session: usize,
    timeout: Duration,
    turns: Vec<Followed>,
}

impl Follower {
    fn new(client: SessionClient, session: usize, timeout: Duration) -> Self {
        Self {
            client,
            session,
            timeout,
            turns: Vec::new(),
        }
    }

    fn push(&mut self, text: &str, end: TurnEnd) -> usize {
        self.turns.push(Followed {
            message_id: None,
            turn: ObservedTurn {
                session: self.session,
                message: text.to_string(),
                turn_id: None,
                events: Vec::new(),
                end,
            },
            ended: false,
            extracted: false,
        });
        self.turns.len() - 1
    }

    fn skip(&mut self, text: &str) {
        let i = self.push(text, TurnEnd::Skipped);
        self.turns[i].ended = true;
    }

    fn end(&mut self, i: usize, end: TurnEnd) {
        self.turns[i].turn.end = end;
        self.turns[i].ended = true;
    }

    /// Send `text` and follow its turn to its end or `deadline`; returns how long it took.
    async fn turn(&mut self, text: &str, deadline: Instant) -> Duration {
        let started = Instant::now();
        let i = self.push(text, TurnEnd::Skipped);
        let left = deadline.saturating_duration_since(started);
        match self.client.send(text, left).await {
            Ok(accepted) => self.turns[i].message_id = Some(accepted.message_id),
            Err(ClientError::Timeout(_)) => {
                self.end(i, TurnEnd::TimedOut(self.timeout));
                return started.elapsed();
            }
            Err(e) => {
                self.end(i, TurnEnd::NotSent(e.to_string()));
                return started.elapsed();
            }
        }
        while !self.turns[i].ended {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.client.next_event(left).await {
                Ok(Some(event)) => self.dispatch(event),
                Ok(None) => self.end(i, TurnEnd::TimedOut(self.timeout)),
                Err(e) => self.end(
                    i,
                    TurnEnd::Failed {
                        code: "event_stream_closed".into(),
                        message: e.to_string(),
                    },
                ),
            }
        }
        started.elapsed()
    }

    fn last_answered(&self) -> bool {
        self.turns
            .last()
            .is_some_and(|t| matches!(t.turn.end, TurnEnd::Answered(_)))
    }

    /// File `event` under its turn; an ending event ends the turn.
    fn dispatch(&mut self, event: TurnEvent) {
        if let TurnEvent::TurnStarted {
            turn_id,
            message_id,
        } = &event
        {
            if let Some(t) = self
                .turns
                .iter_mut()
                .find(|t| t.message_id.as_deref() == Some(message_id.as_str()))
            {
                t.turn.turn_id = Some(turn_id.clone());
            }
        }
        if let TurnEvent::Delta { .. } = event {
            return;
        }
        let found = match event_turn(&event) {
            Some(id) => self
                .turns
                .iter()
                .position(|t| t.turn.turn_id.as_deref() == Some(id)),
            // An error for no turn: the message in flight was refused.
            None => self
                .turns
                .iter()
                .position(|t| !t.ended && t.turn.turn_id.is_none() && t.message_id.is_some()),
        };
        let Some(i) = found else {
            return;
        };
        let ended = self.turns[i].ended;
        match &event {
            TurnEvent::Answer { text, .. } if !ended => {
                self.end(i, TurnEnd::Answered(text.clone()))
            }
            TurnEvent::Error { code, message, .. } if !ended => self.end(
                i,
                TurnEnd::Failed {
                    code: code.clone(),
                    message: message.clone(),
                },
            ),
            TurnEvent::ConfirmationRequired { name, .. } if !ended => {
                self.end(i, TurnEnd::Paused { name: name.clone() })
            }
            // After its answer, an error for the turn is its extraction's.
            TurnEvent::MemoryWritten { .. } | TurnEvent::Error { .. } => {
                self.turns[i].extracted = true
            }
            _ => {}
        }
        self.turns[i].turn.events.push(event);
    }

    /// Wait until every answered turn's memories are extracted, at most `wait`.
    async fn wait_extractions(&mut self, wait: Duration) -> Result<(), String> {
        let deadline = Instant::now() + wait;
        loop {
            let pending = self
                .turns
                .iter()
                .position(|t| matches!(t.turn.end, TurnEnd::Answered(_)) && !t.extracted);
            let Some(pending) = pending else {
                return Ok(());
            };
            let left = deadline.saturating_duration_since(Instant::now());
            let timed_out = || {
                format!(
                    "memory extraction of session {} message {} did not finish within {}s \
                     (memory_wait_secs)",
                    self.session + 1,
                    pending + 1,
                    wait.as_secs()
                )
            };
            match self.client.next_event(left).await {
                Ok(Some(event)) => self.dispatch(event),
                Ok(None) => return Err(timed_out()),
                Err(e) => return Err(format!("the event stream ended: {e}")),
            }
        }
    }

    fn into_turns(self) -> Vec<ObservedTurn> {
        self.turns.into_iter().map(|t| t.turn).collect()
    }
}
