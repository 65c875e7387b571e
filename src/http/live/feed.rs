//! Feeding the live view from the bus: every turn event of the deployment (`hermes.out.>`),
//! the processes' status answers every [`STATUS_EVERY`] and the MCP catalog every
//! [`MCP_EVERY`]. One task owns the [`LiveState`]; each change is published as a JSON
//! snapshot on a watch channel, at most every [`PUBLISH_EVERY`], for the page's event stream.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::state::LiveState;
use crate::actors::status;
use crate::bus::{rpc, SharedBus, Subscription};
use crate::protocol::envelope::Envelope;
use crate::protocol::request::McpCatalogRequest;

/// How often the processes are asked for their status (and the charts get a point).
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How long their answers are waited for.
const STATUS_WAIT: Duration = Duration::from_millis(600);
/// How often the MCP catalog is read.
const MCP_EVERY: Duration = Duration::from_secs(5);
/// Changes are sent to the page at most this often.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);
/// The subject pattern of every turn event.
const ALL_EVENTS: &str = "hermes.out.>";

/// The latest snapshot as JSON; `None` until the feed has started.
pub type Snapshots = watch::Receiver<Option<Arc<str>>>;

/// Subscribe to the deployment's events and start the task that folds them. Must run on the
/// I/O runtime. The task ends when `cancel` fires or the bus closes.
pub async fn start(
    bus: SharedBus,
    cancel: CancellationToken,
) -> Result<Snapshots, crate::bus::BusError> {
    let events = bus.subscribe(ALL_EVENTS).await?;
    let (tx, rx) = watch::channel(None);
    tokio::spawn(run(bus, events, tx, cancel));
    Ok(rx)
}

enum Input {
    Processes(Vec<crate::protocol::ProcessStatus>),
    Mcp(crate::protocol::mcp::McpCatalog),
}

async fn run(
    bus: SharedBus,
    mut events: Subscription,
    snapshots: watch::Sender<Option<Arc<str>>>,
    cancel: CancellationToken,
) {
    let (inputs, mut received) = tokio::sync::mpsc::channel::<Input>(64);
    tokio::spawn(poll_status(bus.clone(), inputs.clone(), cancel.clone()));
    tokio::spawn(poll_mcp(bus.clone(), inputs, cancel.clone()));
    let max_payload = bus.max_payload();
    let mut state = LiveState::default();
    let mut dirty = true;
    let mut publish = tokio::time::interval(PUBLISH_EVERY);
    publish.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            message = events.next() => {
                let Some(message) = message else {
                    tracing::warn!("status page: the bus ended the event subscription; the page stops updating until the process restarts");
                    return;
                };
                // One event, or several of a turn that left together (`turn.events`).
                match Envelope::decode_events(&message.payload, max_payload) {
                    Ok(events) => {
                        for event in events.into_each() {
                            state.apply(&event);
                        }
                        dirty = true;
                    }
                    Err(error) => tracing::debug!(%error, "status page: unreadable event skipped"),
                }
            }
            Some(input) = received.recv() => {
                match input {
                    Input::Processes(processes) => state.set_processes(&processes, Utc::now()),
                    Input::Mcp(catalog) => state.set_mcp(&catalog),
                }
                dirty = true;
            }
            _ = publish.tick(), if dirty => {
                match serde_json::to_string(&state.snapshot(Utc::now())) {
                    Ok(json) => {
                        snapshots.send_replace(Some(Arc::from(json)));
                    }
                    Err(error) => tracing::warn!(%error, "status page snapshot not encoded"),
                }
                dirty = false;
            }
        }
    }
}

async fn poll_status(
    bus: SharedBus,
    inputs: tokio::sync::mpsc::Sender<Input>,
    cancel: CancellationToken,
) {
    let mut every = tokio::time::interval(STATUS_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = every.tick() => {}
        }
        match status::gather(&bus, STATUS_WAIT).await {
            Ok(processes) => {
                if inputs.send(Input::Processes(processes)).await.is_err() {
                    return;
                }
            }
            Err(error) => tracing::debug!(%error, "status page: status not gathered"),
        }
    }
}

async fn poll_mcp(
    bus: SharedBus,
    inputs: tokio::sync::mpsc::Sender<Input>,
    cancel: CancellationToken,
) {
    let mut every = tokio::time::interval(MCP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = every.tick() => {}
        }
        let asked = rpc::request(
            bus.as_ref(),
            Envelope::request(McpCatalogRequest),
            Duration::from_secs(2),
        )
        .await;
        match asked {
            Ok(catalog) => {
                if inputs.send(Input::Mcp(catalog.body)).await.is_err() {
                    return;
                }
            }
            // No bridge in the deployment, or none answering: the table stays as it was.
            Err(error) => tracing::debug!(%error, "status page: MCP catalog not read"),
        }
    }
}
