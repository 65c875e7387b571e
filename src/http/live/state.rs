//! What the status page shows, folded from what the deployment says: turn events (sessions and
//! their turn states, tool calls, memory writes and recalls), the processes' status answers
//! (charts from their metrics) and the MCP catalog. Pure state, no I/O: [`super::feed`] feeds
//! it and takes [`LiveState::snapshot`]s.

use std::collections::{BTreeMap, HashMap, VecDeque};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::protocol::envelope::Envelope;
use crate::protocol::mcp::McpCatalog;
use crate::protocol::{ProcessStatus, ToolStatus, TurnEvent, TurnPhase};

/// Sessions kept (the most recently active).
const MAX_SESSIONS: usize = 200;
/// Tool calls and memory events kept.
const MAX_RECENT: usize = 50;
/// Points per chart.
const MAX_POINTS: usize = 120;

/// One session as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionView {
    pub agent: String,
    pub session: String,
    pub user: Option<String>,
    pub turn_id: Option<String>,
    /// Where its turn is, in the turn's own phases (`planning`, `awaiting_tools`,
    /// `waiting_job`, …), as the events tell it.
    pub state: TurnPhase,
    /// What the state is about: the tool, job, agents or error.
    pub detail: String,
    pub turns: u64,
    pub updated: DateTime<Utc>,
}

/// One tool call, from its `tool.result`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallView {
    pub ts: DateTime<Utc>,
    pub session: String,
    pub tool: String,
    pub status: String,
    pub duration_ms: u64,
    pub via: String,
}

/// One memory write or recall.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryView {
    pub ts: DateTime<Utc>,
    /// `recall` or the write's op (`add`, `update`, `delete`, …).
    pub op: String,
    pub user: Option<String>,
    pub session: String,
    /// The memories' keys and contents, shortened.
    pub what: String,
}

/// One process of the deployment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessView {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub actors: Vec<String>,
    pub sessions_live: Option<u64>,
    pub started_at: DateTime<Utc>,
    pub records_metrics: bool,
}

/// One mounted MCP server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpView {
    pub name: String,
    pub status: String,
    pub transport: String,
    pub tools: Vec<String>,
    pub reconnects: u32,
    pub error: Option<String>,
}

/// A small chart: the last points of one measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    pub title: String,
    pub unit: String,
    /// `(unix seconds, value)`, oldest first.
    pub points: VecDeque<(i64, f64)>,
}

/// Everything the page renders, as JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub at: DateTime<Utc>,
    pub sessions: Vec<SessionView>,
    pub tool_calls: Vec<ToolCallView>,
    pub memory: Vec<MemoryView>,
    pub processes: Vec<ProcessView>,
    pub mcp: Vec<McpView>,
    pub charts: Vec<Chart>,
}

/// The folded state.
#[derive(Debug, Default)]
pub struct LiveState {
    sessions: HashMap<(String, String), SessionView>,
    tool_calls: VecDeque<ToolCallView>,
    memory: VecDeque<MemoryView>,
    processes: Vec<ProcessView>,
    mcp: Vec<McpView>,
    /// In the order the page shows them.
    charts: Vec<(&'static str, Chart)>,
    /// The previous gather's turn count and time, for the turns-per-second rate.
    last_turns: Option<(f64, DateTime<Utc>)>,
}

impl LiveState {
    /// Fold one turn event published on `hermes.out.<agent>.<session>.<reader>`.
    pub fn apply(&mut self, event: &Envelope<TurnEvent>) {
        let (Some(agent), Some(session)) = (&event.agent, &event.session) else {
            return;
        };
        let key = (agent.clone(), session.clone());
        let view = self.sessions.entry(key).or_insert_with(|| SessionView {
            agent: agent.clone(),
            session: session.clone(),
            user: None,
            turn_id: None,
            state: TurnPhase::Received,
            detail: String::new(),
            turns: 0,
            updated: event.ts,
        });
        if event.user.is_some() {
            view.user.clone_from(&event.user);
        }
        view.updated = event.ts;
        match &event.body {
            TurnEvent::TurnStarted { turn_id, .. } => {
                view.turn_id = Some(turn_id.clone());
                view.turns += 1;
                view.state = TurnPhase::Planning;
                view.detail = String::new();
            }
            TurnEvent::ToolCall { name, .. } => {
                set(view, TurnPhase::AwaitingTools, format!("calling {name}"));
            }
            TurnEvent::JobWaiting { name, job_id, .. } => {
                set(
                    view,
                    TurnPhase::WaitingJob,
                    format!("{name} (job {job_id})"),
                );
            }
            TurnEvent::ConfirmationRequired { name, .. } => {
                set(view, TurnPhase::WaitingUser, format!("confirm {name}"));
            }
            TurnEvent::AgentDelegated { agent, .. } => {
                let detail = if view.state == TurnPhase::WaitingAgents {
                    format!("{}, {agent}", view.detail)
                } else {
                    agent.clone()
                };
                set(view, TurnPhase::WaitingAgents, detail);
            }
            TurnEvent::TurnResumed { reason, .. } => {
                set(view, TurnPhase::Planning, format!("resumed: {reason}"))
            }
            TurnEvent::Handoff { to, .. } => {
                set(view, TurnPhase::Planning, format!("handed off to {to}"));
            }
            TurnEvent::Answer { .. } => set(view, TurnPhase::Answered, String::new()),
            TurnEvent::Error { code, message, .. } => {
                set(
                    view,
                    TurnPhase::Failed,
                    format!("{code}: {}", shorten(message, 120)),
                );
            }
            TurnEvent::ToolResult { result, .. } => {
                push_bounded(
                    &mut self.tool_calls,
                    ToolCallView {
                        ts: event.ts,
                        session: session.clone(),
                        tool: result.name.clone(),
                        status: match result.status {
                            ToolStatus::Ok => "ok".into(),
                            ToolStatus::Error => "error".into(),
                        },
                        duration_ms: result.duration_ms,
                        via: result.via.clone(),
                    },
                );
            }
            TurnEvent::MemoryRecalled { memories, .. } => {
                let what = if memories.is_empty() {
                    "no memory matched".to_owned()
                } else {
                    memories
                        .iter()
                        .map(|m| format!("{}: {}", m.key, m.content))
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                push_bounded(
                    &mut self.memory,
                    MemoryView {
                        ts: event.ts,
                        op: "recall".into(),
                        user: event.user.clone(),
                        session: session.clone(),
                        what: shorten(&what, 160),
                    },
                );
            }
            TurnEvent::MemoryWritten { changes, .. } => {
                for change in changes {
                    push_bounded(
                        &mut self.memory,
                        MemoryView {
                            ts: event.ts,
                            op: change.op.as_str().into(),
                            user: event.user.clone(),
                            session: session.clone(),
                            what: shorten(&format!("{}: {}", change.key, change.content), 160),
                        },
                    );
                }
            }
            _ => {}
        }
        self.forget_oldest_sessions();
    }

    /// Take the processes' status answers: the process table and one point per chart.
    pub fn set_processes(&mut self, processes: &[ProcessStatus], at: DateTime<Utc>) {
        self.processes = processes
            .iter()
            .map(|p| ProcessView {
                id: p.id.clone(),
                host: p.host.clone(),
                pid: p.pid,
                actors: p.actors.clone(),
                sessions_live: p.sessions_live,
                started_at: p.started_at,
                records_metrics: !p.series.is_empty(),
            })
            .collect();
        let totals = Totals::of(processes);
        let turns = totals.sum("hermes_turns_total", None);
        let rate = match self.last_turns {
            Some((before, then)) if at > then => {
                let secs = (at - then).num_milliseconds() as f64 / 1000.0;
                ((turns - before) / secs).max(0.0)
            }
            _ => 0.0,
        };
        self.last_turns = Some((turns, at));
        let sessions_live: u64 = processes.iter().filter_map(|p| p.sessions_live).sum();
        let points = [
            ("turns", "turns / s", "", Some(rate)),
            ("sessions", "sessions live", "", Some(sessions_live as f64)),
            (
                "tools_ok",
                "tool success",
                "%",
                totals.ratio(
                    totals.sum("hermes_tool_calls_total", Some("status=\"ok\"")),
                    totals.sum("hermes_tool_calls_total", None),
                ),
            ),
            (
                "rounds",
                "tool rounds / task",
                "",
                totals.mean("hermes_task_tool_rounds"),
            ),
            ("tokens", "tokens / turn", "", totals.tokens_per_turn()),
            (
                "cache_hits",
                "prompt cache hits",
                "%",
                totals.ratio(
                    totals.sum("hermes_turn_tokens_sum", Some("kind=\"cached\"")),
                    totals.sum("hermes_turn_tokens_sum", Some("kind=\"prompt\"")),
                ),
            ),
            (
                "reasoning",
                "reasoning tokens / turn",
                "",
                totals.per_turn("reasoning"),
            ),
            (
                "recall_hits",
                "memory recall hits",
                "%",
                totals.ratio(
                    totals.sum("hermes_memory_recalls_total", Some("hit=\"true\"")),
                    totals.sum("hermes_memory_recalls_total", None),
                ),
            ),
            (
                "mcp_ms",
                "MCP call latency",
                "ms",
                totals
                    .mean("hermes_mcp_call_duration_seconds")
                    .map(|s| s * 1000.0),
            ),
            (
                "jobs",
                "jobs in flight",
                "",
                Some(
                    totals.sum("hermes_jobs", Some("state=\"submitted\""))
                        + totals.sum("hermes_jobs", Some("state=\"running\"")),
                ),
            ),
        ];
        for (key, title, unit, value) in points {
            let at_index = match self.charts.iter().position(|(k, _)| *k == key) {
                Some(index) => index,
                None => {
                    let chart = Chart {
                        title: title.to_owned(),
                        unit: unit.to_owned(),
                        points: VecDeque::new(),
                    };
                    self.charts.push((key, chart));
                    self.charts.len() - 1
                }
            };
            let chart = &mut self.charts[at_index].1;
            if let Some(value) = value.filter(|v| v.is_finite()) {
                chart.points.push_back((at.timestamp(), value));
                while chart.points.len() > MAX_POINTS {
                    chart.points.pop_front();
                }
            }
        }
    }

    /// Take the MCP catalog.
    pub fn set_mcp(&mut self, catalog: &McpCatalog) {
        self.mcp = catalog
            .servers
            .iter()
            .map(|s| McpView {
                name: s.name.clone(),
                status: s.status.clone(),
                transport: s.transport.clone(),
                tools: s.tools.iter().map(|t| t.name.clone()).collect(),
                reconnects: s.reconnects,
                error: s.error.clone(),
            })
            .collect();
    }

    /// What the page renders now: sessions most recently active first, newest calls first.
    pub fn snapshot(&self, at: DateTime<Utc>) -> Snapshot {
        let mut sessions: Vec<_> = self.sessions.values().cloned().collect();
        sessions.sort_by(|a, b| b.updated.cmp(&a.updated).then(a.session.cmp(&b.session)));
        Snapshot {
            at,
            sessions,
            tool_calls: self.tool_calls.iter().rev().cloned().collect(),
            memory: self.memory.iter().rev().cloned().collect(),
            processes: self.processes.clone(),
            mcp: self.mcp.clone(),
            charts: self.charts.iter().map(|(_, c)| c.clone()).collect(),
        }
    }

    fn forget_oldest_sessions(&mut self) {
        while self.sessions.len() > MAX_SESSIONS {
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|(_, v)| v.updated)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(key) => self.sessions.remove(&key),
                None => break,
            };
        }
    }
}

/// The deployment's series summed over its processes.
struct Totals(BTreeMap<String, f64>);

impl Totals {
    fn of(processes: &[ProcessStatus]) -> Self {
        let mut totals = BTreeMap::new();
        for process in processes {
            for (series, value) in &process.series {
                *totals.entry(series.clone()).or_default() += value;
            }
        }
        Self(totals)
    }

    /// The sum of metric `name`'s series, only those whose labels contain `label` if given.
    fn sum(&self, name: &str, label: Option<&str>) -> f64 {
        self.0
            .iter()
            .filter(|(series, _)| {
                let (metric, labels) = series.split_once('{').unwrap_or((series.as_str(), ""));
                metric == name && label.is_none_or(|l| labels.contains(l))
            })
            .map(|(_, value)| value)
            .sum()
    }

    /// A histogram's mean (`_sum / _count`); `None` before its first sample.
    fn mean(&self, name: &str) -> Option<f64> {
        let count = self.sum(&format!("{name}_count"), None);
        (count > 0.0).then(|| self.sum(&format!("{name}_sum"), None) / count)
    }

    /// Prompt and completion tokens per finished turn (cached and reasoning tokens are part
    /// of those, not added again).
    fn tokens_per_turn(&self) -> Option<f64> {
        Some(self.per_turn("prompt")? + self.per_turn("completion")?)
    }

    /// Tokens of one `kind` per finished turn.
    fn per_turn(&self, kind: &str) -> Option<f64> {
        let label = format!("kind=\"{kind}\"");
        let turns = self.sum("hermes_turn_tokens_count", Some(&label));
        (turns > 0.0).then(|| self.sum("hermes_turn_tokens_sum", Some(&label)) / turns)
    }

    fn ratio(&self, part: f64, whole: f64) -> Option<f64> {
        (whole > 0.0).then(|| 100.0 * part / whole)
    }
}

fn set(view: &mut SessionView, state: TurnPhase, detail: String) {
    view.state = state;
    view.detail = detail;
}

fn push_bounded<T>(queue: &mut VecDeque<T>, item: T) {
    queue.push_back(item);
    while queue.len() > MAX_RECENT {
        queue.pop_front();
    }
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
