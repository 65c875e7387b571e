//! The matrix: one cell per fault, and which cells the quick run keeps.

use crate::model::ModelFault;
use crate::procs::Role;

/// Where the probe turn is when its process is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// As its `turn.started` is seen (stored and acknowledged, nothing else done).
    Received,
    /// Its model call held at the model endpoint.
    Planning,
    /// Its MCP write call held inside the MCP server.
    MidTool,
    /// Its async job running, the turn paused.
    WaitingJob,
    /// Its high-risk call waiting for the user's confirmation.
    WaitingUser,
    /// Answered, its memory extraction held at the model endpoint.
    AnsweredNotExtracted,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Received,
        State::Planning,
        State::MidTool,
        State::WaitingJob,
        State::WaitingUser,
        State::AnsweredNotExtracted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            State::Received => "received",
            State::Planning => "planning",
            State::MidTool => "mid_tool",
            State::WaitingJob => "waiting_job",
            State::WaitingUser => "waiting_user",
            State::AnsweredNotExtracted => "answered_not_extracted",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the process of `role` that holds a probe turn in `state`; restarted a second
    /// later, as a process manager would.
    Kill { role: Role, state: State },
    /// nats-server stopped and started again on the same port and store.
    NatsRestart,
    /// The MCP server SIGKILLed while a write call is inside it, restarted a second later.
    McpKilledMidCall,
    /// The MCP server SIGSTOPped (it stops answering) longer than its call timeout.
    McpStopsAnswering,
    /// The model endpoint misbehaving for a few seconds.
    Model(ModelFault),
    /// The sled directories' filesystem full for a few seconds.
    DiskFull,
    /// This many malformed, oversized or mis-addressed envelopes.
    BadEnvelopes(usize),
    /// Every process stopped, the JetStream store wiped (a rebuilt cluster), the processes
    /// started again on their data directories.
    LogWiped,
    /// A session process stopped, its data directory deleted, started again.
    DataDirLost,
    /// The JetStream store copied aside, the load run on, then the old store put back under
    /// every process' newer data directory.
    LogRestoredOlder,
    /// nats-server reloaded with permissions that deny the replicated logs' subjects, then
    /// restored.
    PermissionsChanged,
}

pub struct Cell {
    pub name: String,
    pub fault: Fault,
    pub quick: bool,
}

fn role_name(role: Role) -> &'static str {
    role.actors()
}

/// Every cell of the full matrix; `quick` marks the reduced one. `bad_envelopes` is the
/// flood's size in the full run (the quick run sends fewer).
pub fn matrix() -> Vec<Cell> {
    let quick_kills = [
        (Role::Session, State::Planning),
        (Role::Session, State::WaitingUser),
        (Role::ToolExecutor, State::WaitingJob),
        (Role::McpBridge, State::MidTool),
        (Role::MemoryExtractor, State::AnsweredNotExtracted),
        (Role::Planner, State::Planning),
    ];
    let mut cells = Vec::new();
    for role in Role::ALL {
        for state in State::ALL {
            cells.push(Cell {
                name: format!("kill:{}@{}", role_name(role), state.name()),
                fault: Fault::Kill { role, state },
                quick: quick_kills.contains(&(role, state)),
            });
        }
    }
    let others = [
        ("nats:restart", Fault::NatsRestart, true),
        ("mcp:killed-mid-call", Fault::McpKilledMidCall, true),
        ("mcp:stops-answering", Fault::McpStopsAnswering, false),
        ("model:500", Fault::Model(ModelFault::ServerError), true),
        ("model:429", Fault::Model(ModelFault::RateLimited), false),
        ("model:hang", Fault::Model(ModelFault::Hang), false),
        (
            "model:cut-tool-call",
            Fault::Model(ModelFault::CutToolCall),
            false,
        ),
        (
            "model:invalid-json",
            Fault::Model(ModelFault::InvalidJson),
            false,
        ),
        ("disk:full", Fault::DiskFull, true),
        ("input:bad-envelopes", Fault::BadEnvelopes(10_000), true),
        // The quick run keeps data:dir-deleted, the cheapest of the four log-and-cache cells.
        ("log:store-wiped", Fault::LogWiped, false),
        ("data:dir-deleted", Fault::DataDirLost, true),
        ("log:restored-older", Fault::LogRestoredOlder, false),
        ("nats:permissions-changed", Fault::PermissionsChanged, false),
    ];
    for (name, fault, quick) in others {
        cells.push(Cell {
            name: name.to_string(),
            fault,
            quick,
        });
    }
    cells
}
