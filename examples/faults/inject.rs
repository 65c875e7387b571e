//! Striking a cell's fault at the right moment. A probe turn (a session of its own, chosen so
//! its owner is known) is driven into the state the fault needs — held at the model endpoint,
//! inside the MCP server, waiting on a job or on the user — and the fault strikes there;
//! held requests are released once it has, and killed processes come back a second later,
//! as under a process manager.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{json, Map, Value};
use tokio::task::JoinHandle;

use crate::cells::{Fault, State};
use crate::deploy::Deployment;
use crate::disk::Tmpfs;
use crate::drive::{drive, Driven, Kind, Turn};
use crate::load::{Load, TURN_DEADLINE};
use crate::model::{Held, ModelFault};
use crate::procs::Role;

/// How long a probe may take to reach its state.
const REACH: Duration = Duration::from_secs(40);
/// A killed process is restarted after this long.
const RESTART_AFTER: Duration = Duration::from_secs(1);
/// How long the model, the MCP server or the disk misbehaves.
const WINDOW: Duration = Duration::from_secs(5);
/// How long the MCP server stops answering (longer than its 5 s call timeout).
const FROZEN: Duration = Duration::from_secs(8);

/// The probe turn's driver.
pub type Probe = JoinHandle<(Turn, Driven)>;

/// What the injection did: the probe (if any) and facts for the cell's line.
pub struct Injected {
    pub probe: Option<Probe>,
    pub extra: Map<String, Value>,
    /// The probe never reached its state: the cell proves nothing.
    pub missed: Option<String>,
}

pub struct CellContext<'a> {
    pub load: &'a Load,
    /// The cell's directory (config files, logs).
    pub work: &'a std::path::Path,
    pub tmpfs: Option<&'a Tmpfs>,
    pub flood_size: usize,
}

pub fn inject(
    dep: &mut Deployment,
    fault: Fault,
    ctx: &CellContext<'_>,
) -> anyhow::Result<Injected> {
    let mut injected = Injected {
        probe: None,
        extra: Map::new(),
        missed: None,
    };
    match fault {
        Fault::Kill { role, state } => kill_at(dep, role, state, &mut injected)?,
        Fault::NatsRestart => {
            injected.probe = Some(start_probe(dep, "probe0", Kind::Read, None)?);
            dep.nats.restart();
        }
        Fault::McpKilledMidCall => {
            let probe = Turn::new("probe0", 1, Kind::Write)?;
            dep.ledger.hold(&probe.tag)?;
            let entry = probe.tag.clone();
            injected.probe = Some(spawn_probe(dep, probe, None));
            let reached = wait(dep, REACH, |d| d.ledger.is_held(&entry));
            if !reached {
                injected.missed = Some("the write call never reached the MCP server".into());
            }
            dep.ledger.kill9();
            sleep_supervised(dep, RESTART_AFTER)?;
            dep.ledger.release();
            dep.ledger.restart()?;
        }
        Fault::McpStopsAnswering => {
            injected.probe = Some(start_probe(dep, "probe0", Kind::Write, None)?);
            dep.ledger.freeze(true);
            sleep_supervised(dep, FROZEN)?;
            dep.ledger.freeze(false);
        }
        Fault::Model(model_fault) => {
            dep.model.fail_for(model_fault, WINDOW);
            let kind = match model_fault {
                ModelFault::CutToolCall => Kind::Write,
                _ => Kind::Read,
            };
            injected.probe = Some(start_probe(dep, "probe0", kind, None)?);
            sleep_supervised(dep, WINDOW)?;
        }
        Fault::DiskFull => {
            let tmpfs = ctx.tmpfs.context("the disk cell runs on a tmpfs")?;
            let filled = tmpfs.fill()?;
            injected
                .extra
                .insert("disk_filled_bytes".into(), json!(filled));
            injected.probe = Some(start_probe(dep, "probe0", Kind::Write, None)?);
            sleep_supervised(dep, WINDOW)?;
            tmpfs.free();
        }
        Fault::LogWiped
        | Fault::DataDirLost
        | Fault::LogRestoredOlder
        | Fault::PermissionsChanged => {
            injected.probe = Some(start_probe(dep, "probe0", Kind::Read, None)?);
            crate::heal::strike(dep, fault, ctx.work, &mut injected.extra)?;
        }
        Fault::BadEnvelopes(_) => {
            let sessions = ctx.load.started_sessions();
            let sessions = if sessions.is_empty() {
                ctx.load.sessions.clone()
            } else {
                sessions
            };
            let bus = dep.bus.clone();
            let started = Instant::now();
            let flooded = dep.block_on(crate::flood::flood(&bus, &sessions, ctx.flood_size));
            injected.extra.insert(
                "bad_envelopes".into(),
                json!({
                    "sent": flooded.sent,
                    "requests": flooded.requests,
                    "refused": flooded.refused,
                    "unanswered": flooded.unanswered,
                    "accepted": flooded.accepted,
                    "secs": started.elapsed().as_secs_f64(),
                }),
            );
            injected
                .extra
                .insert("bad_accepted".into(), json!(flooded.accepted));
        }
    }
    Ok(injected)
}

fn kill_at(
    dep: &mut Deployment,
    role: Role,
    state: State,
    injected: &mut Injected,
) -> anyhow::Result<()> {
    let session = dep.owned_session("probe");
    let target = dep
        .target(role, &session)
        .with_context(|| format!("no {role:?} process owns {session}"))?;
    let kind = match state {
        State::Received | State::Planning | State::AnsweredNotExtracted => Kind::Read,
        State::MidTool => Kind::Write,
        State::WaitingJob => Kind::Job { seconds: 4 },
        State::WaitingUser => Kind::Confirm,
    };
    let probe = Turn::new(&session, 1, kind)?;
    match state {
        State::Planning => dep.model.hold(&probe.tag, Held::Plan),
        State::AnsweredNotExtracted => dep.model.hold(&probe.tag, Held::Extraction),
        State::MidTool => dep.ledger.hold(&probe.tag)?,
        _ => {}
    }
    let hold_confirm = Arc::new(AtomicBool::new(state == State::WaitingUser));
    let message = probe.message_id.clone();
    let tag = probe.tag.clone();
    injected.probe = Some(spawn_probe(dep, probe, Some(hold_confirm.clone())));
    let reached = wait(dep, REACH, |d| {
        let turn = {
            let seen = d.observer.seen();
            seen.message_of
                .iter()
                .find(|(_, m)| **m == message)
                .map(|(t, _)| t.clone())
        };
        match state {
            State::Received => turn.is_some(),
            State::Planning | State::AnsweredNotExtracted => d.model.held(),
            State::MidTool => d.ledger.is_held(&tag),
            State::WaitingJob => turn.is_some_and(|t| d.observer.seen().jobs_waiting.contains(&t)),
            State::WaitingUser => {
                turn.is_some_and(|t| d.observer.seen().confirmations.contains(&t))
            }
        }
    });
    if !reached {
        injected.missed = Some(format!(
            "the probe {session} never reached {}",
            state.name()
        ));
    }
    dep.kill9(&target)?;
    injected.extra.insert("killed".into(), json!(target));
    injected.extra.insert("probe".into(), json!(session));
    dep.model.release();
    dep.ledger.release();
    sleep_supervised(dep, RESTART_AFTER)?;
    dep.restart(&target)?;
    // The user comes back and approves the call that waited across the crash.
    hold_confirm.store(false, Ordering::Release);
    Ok(())
}

pub fn start_probe(
    dep: &Deployment,
    session: &str,
    kind: Kind,
    hold_confirm: Option<Arc<AtomicBool>>,
) -> anyhow::Result<Probe> {
    let probe = Turn::new(session, 1, kind)?;
    Ok(spawn_probe(dep, probe, hold_confirm))
}

fn spawn_probe(dep: &Deployment, probe: Turn, hold_confirm: Option<Arc<AtomicBool>>) -> Probe {
    let (bus, observer) = (dep.bus.clone(), dep.observer.clone());
    dep.runtime().spawn(async move {
        let deadline = Instant::now() + TURN_DEADLINE;
        let driven = drive(&bus, &observer, &probe, deadline, hold_confirm).await;
        (probe, driven)
    })
}

/// Poll `reached` (restarting crashed processes meanwhile) until it holds or `within` passes.
fn wait(dep: &mut Deployment, within: Duration, reached: impl Fn(&Deployment) -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if reached(dep) {
            return true;
        }
        let _ = dep.supervise();
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

pub fn sleep_supervised(dep: &mut Deployment, how_long: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + how_long;
    while Instant::now() < deadline {
        dep.supervise()?;
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
