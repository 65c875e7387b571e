//! `hermes demo team`: agents working together on an event from another system, on the
//! embedded defaults (`config/team.toml` with its scripted models).
//!
//! An `order.delayed` event is published on `shop.orders.<id>.delayed`; the trigger starts a
//! turn of the triage agent, which delegates in parallel to logistics (an async carrier-
//! tracking job) and care (the customer's remembered preferences), is woken by their answers
//! and publishes one reply on `shop.orders.<id>.reply`. The trace shows every session's events
//! as they happen; the command fails if the trigger, the two simultaneous delegations, the
//! wake-ups or the reply is missing. With `--remote` a third member, the Python A2A agent
//! `stats` ([`super::demo_remote`]), is asked over A2A in the same step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use hermes::actors::ActorSet;
use hermes::bus::{rpc, SharedBus, Subscription};
use hermes::config::Config;
use hermes::engine::Engine;
use hermes::protocol::envelope::Envelope;
use hermes::protocol::{kinds, MemoryKind, MemoryUpdate, MemoryWriteRequest, TurnEvent, UpdateOp};

use super::demo::{DemoArgs, TeamArgs};
use super::runtime::with_engine_runtime;

const ORDER: &str = "JD-20251111-0042";
const CUSTOMER: &str = "u-1001";

/// One event of the trace: when, which session, what.
struct Seen {
    at: Duration,
    agent: String,
    session: String,
    event: TurnEvent,
}

pub fn run(args: DemoArgs, team: TeamArgs) -> anyhow::Result<()> {
    let mut config = Config::team().context("the team demo's configuration")?;
    let _temp = super::demo::on_embedded_bus(&mut config, args.data_dir)?;
    let remote = match team.remote {
        true => {
            let dir = config.engine.data_dir.join("remote-member");
            let member = super::demo_remote::RemoteMember::start(team.python, &dir)?;
            super::demo_remote::join(&mut config, &member.url)?;
            Some(member)
        }
        false => None,
    };
    config.http.listen = args.http.clone();
    let config = Arc::new(config);
    let timeout = Duration::from_secs(args.timeout);
    with_engine_runtime(config.engine.io_threads, |io| async move {
        println!(
            "Hermes team demo — embedded bus, data in {}",
            config.engine.data_dir.display()
        );
        let page = super::serve::start_http(&config, &io).await?;
        let engine = Engine::start(config.clone(), ActorSet::ALL, io.clone()).await?;
        if let Some(page) = &page {
            super::serve::show_live(page, &engine, &io).await?;
        }
        let bus = engine.bus.clone();
        remember_preferences(&bus).await?;
        let events = bus.subscribe("hermes.out.>").await?;
        let reply_subject = format!("shop.orders.{ORDER}.reply");
        let replies = bus.subscribe(&reply_subject).await?;
        let event = json!({
            "event_id": "evt-7781",
            "customer": CUSTOMER,
            "days_late": 2,
            "tracking": "SF1428837610295",
        });
        let subject = format!("shop.orders.{ORDER}.delayed");
        println!("\n== An event arrives on {subject}\n   {event}");
        let start = Instant::now();
        bus.publish(&subject, serde_json::to_vec(&event)?.into())
            .await?;
        let (seen, reply) = follow(events, replies, start, timeout).await;
        super::demo::hold_page(page.as_ref(), args.hold).await;
        engine.shutdown().await;
        if let Some(reply) = &reply {
            println!("\n== Published on {reply_subject}\n   {reply}");
        }
        drop(remote);
        let checks = checklist(&seen, reply.is_some(), team.remote);
        println!("\n== What the trace shows");
        for (ok, what) in &checks {
            println!("  [{}] {what}", if *ok { "x" } else { " " });
        }
        let missing = checks.iter().filter(|(ok, _)| !ok).count();
        if missing > 0 {
            anyhow::bail!("{missing} team demo check(s) failed; see the trace above");
        }
        Ok(())
    })
}

/// What the care agent will find: the customer's preferences, written as an import would.
async fn remember_preferences(bus: &SharedBus) -> anyhow::Result<()> {
    let memories = [
        (
            "contact_channel",
            MemoryKind::Preference,
            "Prefers to be contacted by WeChat message in Chinese, never by phone",
        ),
        (
            "loyal_brand",
            MemoryKind::Fact,
            "Loyal Sony customer: bought Sony headphones on Singles' Day and was very happy",
        ),
    ];
    for (key, kind, content) in memories {
        let request = MemoryWriteRequest {
            user: CUSTOMER.into(),
            namespace: "default".into(),
            update: MemoryUpdate {
                op: UpdateOp::Add,
                kind,
                key: key.into(),
                content: content.into(),
                importance: 0.8,
                expiry_days: None,
                topics: vec!["contact".into(), "customer".into()],
            },
            source: "demo-team".into(),
        };
        rpc::request(
            bus.as_ref(),
            Envelope::request(request),
            Duration::from_secs(10),
        )
        .await
        .context("storing the customer's preferences")?;
    }
    println!("  remembered for {CUSTOMER}: WeChat only, loyal Sony customer");
    Ok(())
}

/// Print every session's events until the reply is published (or time runs out).
async fn follow(
    mut events: Subscription,
    mut replies: Subscription,
    start: Instant,
    timeout: Duration,
) -> (Vec<Seen>, Option<String>) {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        tokio::select! {
            message = events.next() => {
                let Some(message) = message else { return (seen, None) };
                for item in decode(&message.subject, &message.payload, start) {
                    print_line(&item);
                    seen.push(item);
                }
            }
            reply = replies.next() => {
                let text = reply.and_then(|m| {
                    let envelope = Envelope::decode(&m.payload, usize::MAX).ok()?;
                    let event = envelope.into_typed::<TurnEvent>(kinds::TURN_EVENT).ok()?;
                    match event.body {
                        TurnEvent::Answer { text, .. } => Some(text),
                        _ => None,
                    }
                });
                // A moment for the events published just before the reply.
                tokio::time::sleep(Duration::from_millis(100)).await;
                while let Ok(Some(message)) = tokio::time::timeout(Duration::from_millis(50), events.next()).await {
                    for item in decode(&message.subject, &message.payload, start) {
                        print_line(&item);
                        seen.push(item);
                    }
                }
                return (seen, text);
            }
            _ = tokio::time::sleep_until(deadline) => return (seen, None),
        }
    }
}

/// The events (deltas left out) a message on `hermes.out…` carries: one, or several that left
/// together.
fn decode(subject: &str, payload: &[u8], start: Instant) -> Vec<Seen> {
    let Ok(address) = hermes::protocol::subjects::parse_outbound(subject) else {
        return Vec::new();
    };
    let Ok(envelope) = Envelope::decode_events(payload, usize::MAX) else {
        return Vec::new();
    };
    envelope
        .body
        .events
        .into_iter()
        .filter(|event| !matches!(event, TurnEvent::Delta { .. }))
        .map(|event| Seen {
            at: start.elapsed(),
            agent: address.agent.clone(),
            session: address.session.clone(),
            event,
        })
        .collect()
}

fn print_line(item: &Seen) {
    let what = match &item.event {
        TurnEvent::TurnStarted { .. } => "turn started".to_string(),
        TurnEvent::MemoryRecalled { memories, .. } => format!(
            "recalled {} memories{}",
            memories.len(),
            memories
                .first()
                .map(|m| format!(": {}", m.content))
                .unwrap_or_default()
        ),
        TurnEvent::ToolCall { name, .. } => format!("calls {name}"),
        TurnEvent::ToolResult { result, .. } => {
            format!(
                "{} → {:?} ({} ms)",
                result.name, result.status, result.duration_ms
            )
        }
        TurnEvent::JobWaiting { name, job_id, .. } => {
            format!("waits for job {job_id} ({name}); its actor is free")
        }
        TurnEvent::AgentDelegated { agent, session, .. } => {
            format!("delegated to {agent} (session {session})")
        }
        TurnEvent::TurnResumed { reason, .. } => format!("woken: {reason}"),
        TurnEvent::Answer { text, .. } => format!("answer: {text}"),
        TurnEvent::Error { code, message, .. } => format!("error {code}: {message}"),
        other => other.type_name().to_string(),
    };
    println!(
        "  {:>6} ms  {:<10} {:<40} {what}",
        item.at.as_millis(),
        item.agent,
        item.session
    );
}

/// The checks of the story; each with what it shows.
fn checklist(seen: &[Seen], replied: bool, remote: bool) -> Vec<(bool, String)> {
    fn of<'a>(seen: &'a [Seen], agent: &'a str) -> impl Iterator<Item = &'a Seen> + 'a {
        seen.iter().filter(move |s| s.agent == agent)
    }
    let triage_started = of(seen, "triage").any(|s| {
        s.session == format!("order-{ORDER}") && matches!(s.event, TurnEvent::TurnStarted { .. })
    });
    let delegated: Vec<&str> = of(seen, "triage")
        .filter_map(|s| match &s.event {
            TurnEvent::AgentDelegated { agent, .. } => Some(agent.as_str()),
            _ => None,
        })
        .collect();
    // Both tasks were out — each accepted (stored) by its agent's session, whose turn then
    // runs on its own — before any answer came back to triage: the delegations ran side by
    // side, not one after the other. (Events of different sessions come from different
    // threads, so their times across sessions are not compared.)
    let first_wake = of(seen, "triage")
        .find(|s| matches!(s.event, TurnEvent::TurnResumed { .. }))
        .map(|s| s.at);
    let handed_out = of(seen, "triage")
        .filter(|s| matches!(s.event, TurnEvent::AgentDelegated { .. }))
        .filter(|s| first_wake.is_none_or(|w| s.at <= w))
        .count();
    let members = if remote { 3 } else { 2 };
    let side_by_side = handed_out == members;
    let job_waited = of(seen, "logistics")
        .any(|s| matches!(&s.event, TurnEvent::JobWaiting { name, .. } if name == "track_parcel"));
    let job_woke = of(seen, "logistics").any(|s| matches!(s.event, TurnEvent::TurnResumed { .. }));
    let care_recalled = of(seen, "care").any(
        |s| matches!(&s.event, TurnEvent::MemoryRecalled { memories, .. } if !memories.is_empty()),
    );
    let triage_woke = of(seen, "triage")
        .filter(|s| matches!(s.event, TurnEvent::TurnResumed { .. }))
        .count();
    let answered = of(seen, "triage").any(|s| matches!(s.event, TurnEvent::Answer { .. }));
    let stats_counted = of(seen, "triage").find_map(|s| match &s.event {
        TurnEvent::ToolResult { result, .. } if result.name == "agent__stats" => Some(
            result.output["answer"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| result.output.to_string()),
        ),
        _ => None,
    });
    let mut checks = vec![
        (
            triage_started,
            format!("the trigger turned the event into a triage turn (session order-{ORDER})"),
        ),
        (
            delegated.contains(&"logistics") && delegated.contains(&"care"),
            format!(
                "triage delegated to logistics and care in one step ({})",
                delegated.join(", ")
            ),
        ),
        (
            side_by_side,
            if remote {
                "all 3 delegated agents ran at the same time (all had their task before any \
                 answer came back)"
                    .to_string()
            } else {
                "both delegated agents ran at the same time (both had their task before either \
                 answer came back)"
                    .to_string()
            },
        ),
        (
            job_waited && job_woke,
            "logistics waited on its async carrier-tracking job and was woken by it".into(),
        ),
        (
            care_recalled,
            "care recalled the customer's remembered preferences".into(),
        ),
        (
            triage_woke >= 1 && answered,
            format!(
                "triage was woken by its agents' answers ({triage_woke} wake-ups) and answered"
            ),
        ),
        (
            replied,
            format!("one reply was published on shop.orders.{ORDER}.reply"),
        ),
    ];
    if remote {
        checks.insert(
            3,
            (
                stats_counted
                    .as_deref()
                    .is_some_and(|s| s.contains("words")),
                format!(
                    "the remote member stats (a Python agent) answered over A2A: {}",
                    stats_counted.unwrap_or_else(|| "no answer".into())
                ),
            ),
        );
    }
    checks
}
