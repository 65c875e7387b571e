//! Several session processes on one NATS deployment: every session has one owner at a time,
//! its history stays whole, and a killed owner's sessions carry on elsewhere.
//!
//! Real processes: a nats-server with JetStream (or a 3-node cluster with replicas 3, one of
//! whose nodes restarts mid-load), two `hermes serve --actors session`, two processes with the
//! planner (the bench model, so every answer can be checked) and the memory-extractor, and two
//! with the tool-executor and the MCP-bridge, each bridge connected to a real MCP server with a
//! write tool that counts its executions. After each turn the driver also writes a memory for
//! the session's user (four users shared by all sessions) through either memory-extractor; at
//! the end every acknowledged memory must be listed by both. Sessions are driven from outside
//! over NATS, as a
//! publishing system would; turns rotate through a sync read tool (`add`), the MCP write tool
//! (`ledger__record`, deduplicated by its idempotency key) and an async job
//! (`generate_report`, whose completion wakes the turn).
//!
//! Size: `HERMES_SCALE_SESSIONS` × `HERMES_SCALE_TURNS` (default 24 × 3 here; the issue's full
//! size, 200 × 5, is `scripts/scale-out.sh`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use hermes::bus::rpc;
use hermes::bus::{self, SharedBus};
use hermes::memory::{MemoryKind, MemoryUpdate, UpdateOp};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::mcp::McpAuditRequest;
use hermes::protocol::memory::{MemoryListRequest, MemoryWriteRequest};
use hermes::protocol::UserMessage;
use hermes::store::replica::LogRecord;

use crate::common::hermes_proc::Serve;
use crate::common::ledger_mcp;
use crate::common::nats_server::{NatsCluster, NatsServer};

const AGENT: &str = "assistant";
const ANSWER_TIMEOUT: Duration = Duration::from_secs(90);

fn size() -> (usize, u64) {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (
        usize::try_from(var("HERMES_SCALE_SESSIONS", 24)).unwrap(),
        var("HERMES_SCALE_TURNS", 3),
    )
}

fn write_config(dir: &Path, name: &str, replicas: u32, ledger_url: &str) -> PathBuf {
    let config = format!(
        r#"
[engine]
data_dir = "{data}"
# The bench model answers at once: a planning request lost with a restarting node is sent
# again after 10 s instead of the default 60 s.
plan_timeout_secs = 10
request_timeout_secs = 5
[models.planner]
provider = "bench"
[models.extractor]
provider = "replay"
scenario = "builtin:demo"
[models.summariser]
provider = "replay"
scenario = "builtin:demo"
[tools]
builtin = ["add", "generate_report", "job_status"]
[[tools.define]]
name = "ledger__record"
effect = "write"
[[mcp.servers]]
name = "ledger"
url = "{ledger_url}"
timeout_secs = 5
[cluster]
partitions = 8
failover_secs = 2
ack_wait_secs = 4
replicas = {replicas}
"#,
        data = dir.join(format!("{name}-data")).display(),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config).unwrap();
    path
}

/// What the outside world saw: every answer event, per session, with its envelope id (a
/// subscriber keeps one answer per id: a session re-sends an answer after a crash with the
/// same id, as it cannot know whether the first copy left the dying process).
#[derive(Default)]
struct Seen {
    answers: HashMap<String, Vec<String>>,
    ids: HashMap<String, std::collections::BTreeSet<(String, String)>>,
    resent: usize,
    /// When the fault was injected, and when the first answer after it arrived.
    fault_at: Option<Instant>,
    first_answer_after_fault: Option<Instant>,
    /// When each session's answers arrived (first copies only).
    answered_at: HashMap<String, Vec<Instant>>,
    /// Async jobs started and not yet ended, by the events on `hermes.job.*`.
    jobs_running: HashSet<String>,
    jobs_failed: usize,
    /// Memories acknowledged by `hermes.memory.write`: (user, key).
    memories: Vec<(String, String)>,
}

impl Seen {
    /// Longest time from the fault to the next answer of a session that was not finished
    /// when the fault struck: how long the dead process's sessions waited for a new owner.
    fn longest_stall(&self, turns: u64) -> Option<Duration> {
        let fault = self.fault_at?;
        self.answered_at
            .values()
            .filter(|times| {
                let before = times.iter().filter(|t| **t <= fault).count();
                (before as u64) < turns
            })
            .filter_map(|times| times.iter().find(|t| **t > fault))
            .map(|t| t.saturating_duration_since(fault))
            .max()
    }
}

/// What turn `t` asks for: turns rotate through a read, a write and an async job.
fn message(session: &str, t: u64) -> String {
    match t % 3 {
        1 => format!("turn {t}: add {t} and {}", 1000 + t),
        2 => format!("turn {t}: call ledger__record {{\"entry\": \"{session}-{t}\"}}"),
        _ => format!(
            "turn {t}: call generate_report {{\"topic\": \"{session}-{t}\", \"seconds\": 1}}"
        ),
    }
}

/// The answer turn `t` must get.
fn expected(session: &str, t: u64) -> String {
    match t % 3 {
        1 => format!("The answer is {}.", 2 * t + 1000),
        2 => format!("The answer is {session}-{t}."),
        _ => format!("The answer is A 4-section report on {session}-{t}."),
    }
}

/// The user a session speaks for: four users, so each user's memory is written from several
/// sessions at once and through both memory-extractors.
fn user_of(session: &str) -> String {
    let n: usize = session.trim_start_matches("scale").parse().unwrap_or(0);
    format!("u{}", n % 4)
}

/// A word of letters only, unique per (session, turn): the memories' contents must not be
/// near-duplicates (the merge rules would rightly fold them), and a tokeniser splits digits
/// from letters, which made `scale1x5q` and `scale5x1q` the same words.
fn letters(session: &str, t: u64) -> String {
    let n: u64 = session.trim_start_matches("scale").parse().unwrap_or(0);
    let mut rest = n * 100 + t;
    let mut word = String::from("zq");
    loop {
        word.push(char::from(b'a' + u8::try_from(rest % 26).unwrap()));
        rest /= 26;
        if rest == 0 {
            return word;
        }
    }
}

/// Write one memory for the session's user through `hermes.memory.write` (either
/// memory-extractor answers), as an MCP client or another system would; retried until
/// acknowledged (the same key makes a retry an update of the same slot).
async fn write_memory(bus: &SharedBus, seen: &Arc<Mutex<Seen>>, session: &str, t: u64) {
    let user = user_of(session);
    let key = format!("{session}_t{t}");
    let request = MemoryWriteRequest {
        user: user.clone(),
        namespace: "default".into(),
        update: MemoryUpdate {
            op: UpdateOp::Add,
            kind: MemoryKind::Fact,
            key: key.clone(),
            content: format!("code {}", letters(session, t)),
            importance: 0.5,
            expiry_days: None,
            topics: Vec::new(),
        },
        source: session.to_string(),
    };
    for _ in 0..20 {
        let envelope = Envelope::request(request.clone());
        match rpc::request(bus.as_ref(), envelope, Duration::from_secs(5)).await {
            Ok(_) => {
                seen.lock().unwrap().memories.push((user, key));
                return;
            }
            Err(e) => {
                eprintln!("memory write of {key} failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Acknowledged memories missing from `hermes.memory.list`, asked several times so both
/// memory-extractors answer (each must know every user's whole memory).
async fn count_lost_memories(bus: &SharedBus, seen: &Seen) -> usize {
    let mut by_user: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
    for (user, key) in &seen.memories {
        by_user.entry(user).or_default().insert(key);
    }
    let mut lost = 0;
    for (user, keys) in by_user {
        let mut worst = 0;
        for _ in 0..6 {
            let request = MemoryListRequest {
                user: user.to_string(),
                namespace: None,
                id: None,
                ..MemoryListRequest::default()
            };
            let reply = rpc::request(
                bus.as_ref(),
                Envelope::request(request),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
            let listed: HashSet<&str> = reply.body.records.iter().map(|m| m.key.as_str()).collect();
            let missing = keys.iter().filter(|k| !listed.contains(**k)).count();
            if missing > 0 {
                eprintln!(
                    "user {user}: {missing} of {} memories missing from a list",
                    keys.len()
                );
            }
            worst = worst.max(missing);
        }
        lost += worst;
    }
    lost
}

/// Executions of the ledger's `record` tool missing from `hermes.mcp.audit` — the shared trail,
/// whichever MCP-bridge answers (asked several times so both do).
async fn count_lost_audit_records(bus: &SharedBus, ledger: &ledger_mcp::Counts) -> usize {
    let executed: usize = ledger.lock().unwrap().values().sum();
    let mut worst = 0;
    for _ in 0..4 {
        let request = McpAuditRequest { limit: 100_000 };
        let reply = rpc::request(
            bus.as_ref(),
            Envelope::request(request),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        let audited = reply
            .body
            .records
            .iter()
            // A call cut off by the kill shows `started`: in the trail, outcome unknown.
            .filter(|r| {
                r.server == "ledger"
                    && r.target == "record"
                    && (r.status == "ok" || r.status == "started")
            })
            .count();
        worst = worst.max(executed.saturating_sub(audited));
    }
    worst
}

/// Publish turn `t` of `session` until a session process has it (same envelope id on every
/// try, so a retry is never a second message), then wait for its answer.
async fn drive_turn(bus: &SharedBus, seen: &Arc<Mutex<Seen>>, session: &str, t: u64) {
    let text = message(session, t);
    let envelope =
        Envelope::request(UserMessage::text(text)).for_session(AGENT, session, Some("u1"));
    let subject = hermes::protocol::subjects::inbound(AGENT, session).unwrap();
    let payload = envelope.encode().unwrap();
    for _ in 0..10 {
        // A reply (accepted or not) means the message is stored in its partition inbox; a
        // timeout may mean it is, too (the owner died before answering): resend, the id
        // dedupes.
        match bus
            .request(&subject, payload.clone(), Duration::from_secs(5))
            .await
        {
            Ok(_) => break,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let want = expected(session, t);
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while Instant::now() < deadline {
        // Each turn gives one answer (a re-sent copy has the same id and is not counted):
        // the t-th answer ends turn t, right or wrong (count_faults judges it).
        let answered = seen
            .lock()
            .unwrap()
            .answers
            .get(session)
            .is_some_and(|a| a.contains(&want) || a.len() >= usize::try_from(t).unwrap());
        if answered {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Collect every `answer` event on `hermes.out.>`.
async fn watch_answers(bus: &SharedBus, seen: Arc<Mutex<Seen>>) {
    let seen_jobs = seen.clone();
    let mut out = bus.subscribe("hermes.out.>").await.unwrap();
    tokio::spawn(async move {
        while let Some(message) = out.next().await {
            let Ok(v) = serde_json::from_slice::<Value>(&message.payload) else {
                continue;
            };
            // An answer alone (`turn.event`), or with the events before it (`turn.events`,
            // whose envelope id is then the answer's).
            let answer = match v["body"]["events"].as_array() {
                Some(events) => events.iter().find(|e| e["type"] == "answer").cloned(),
                None => Some(v["body"].clone()).filter(|e| e["type"] == "answer"),
            };
            if let Some(answer) = answer {
                let session = hermes::protocol::subjects::parse_outbound(&message.subject)
                    .unwrap()
                    .session;
                let text = answer["text"].as_str().unwrap_or_default().to_string();
                let id = v["id"].as_str().unwrap_or_default().to_string();
                let mut seen = seen.lock().unwrap();
                if seen.fault_at.is_some() && seen.first_answer_after_fault.is_none() {
                    seen.first_answer_after_fault = Some(Instant::now());
                }
                if seen
                    .ids
                    .entry(session.clone())
                    .or_default()
                    .insert((id, text.clone()))
                {
                    seen.answered_at
                        .entry(session.clone())
                        .or_default()
                        .push(Instant::now());
                    seen.answers.entry(session).or_default().push(text);
                } else {
                    seen.resent += 1;
                }
            }
        }
    });
    let mut jobs = bus.subscribe("hermes.job.*").await.unwrap();
    tokio::spawn(async move {
        while let Some(message) = jobs.next().await {
            let Ok(v) = serde_json::from_slice::<Value>(&message.payload) else {
                continue;
            };
            let job = v["body"]["job_id"].as_str().unwrap_or_default().to_string();
            let mut seen = seen_jobs.lock().unwrap();
            match v["kind"].as_str().unwrap_or_default() {
                "job.progress" => {
                    seen.jobs_running.insert(job);
                }
                "job.done" => {
                    seen.jobs_running.remove(&job);
                }
                "job.failed" => {
                    seen.jobs_running.remove(&job);
                    seen.jobs_failed += 1;
                    eprintln!("job failed: {}", v["body"]["error"]);
                }
                _ => {}
            }
        }
    });
    bus.flush().await.unwrap();
}

/// The run's faults, all of which must be zero (the tool-process kill may leave writes whose
/// outcome is honestly unknown: see [`Faults::must_be_zero`]).
#[derive(Debug, Default, PartialEq, Clone)]
struct Faults {
    never_answered: usize,
    answered_twice: usize,
    writes_executed_twice: usize,
    split_histories: usize,
    memories_lost: usize,
    /// Ledger calls the MCP server executed that the deployment's audit trail does not show.
    audit_records_lost: usize,
    /// Write calls in flight in a killed tool process, answered as "outcome unknown" instead
    /// of being run a second time (not a fault: the honest answer; only the tool-process kill
    /// may cause them).
    writes_reported_unknown: usize,
    /// What went wrong where, shown with the counts when they are not zero.
    notes: Notes,
}

/// What the counts do not say (which turn of which session went unanswered, what its log
/// holds), shown with them by a failed assertion: CI shows the assertion, not the test's
/// stderr. Not a count: any two are equal.
#[derive(Default, Clone)]
struct Notes(Vec<String>);

impl PartialEq for Notes {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.0).finish()
    }
}

impl Faults {
    /// Say `what` now (stderr) and with the counts.
    fn note(&mut self, what: String) {
        eprintln!("{what}");
        self.notes.0.push(what);
    }
}

/// What a turn is told about a write call whose earlier execution never recorded an outcome.
const WRITE_OUTCOME_UNKNOWN: &str = "its outcome was never recorded";

impl Faults {
    /// The counts that must be zero: every fault but honest "outcome unknown" answers.
    fn must_be_zero(&self) -> Faults {
        Faults {
            writes_reported_unknown: 0,
            ..self.clone()
        }
    }
}

/// Count the faults: answers missing or repeated, and sessions whose replicated log is not
/// one history holding each turn's message once, in order.
async fn count_faults(
    bus: &SharedBus,
    seen: &Seen,
    ledger: &ledger_mcp::Counts,
    sessions: &[String],
    turns: u64,
) -> Faults {
    let mut faults = Faults {
        writes_executed_twice: ledger.lock().unwrap().values().filter(|n| **n > 1).count(),
        ..Faults::default()
    };
    let log = bus.cluster().expect("NATS has a cluster").session_log();
    for session in sessions {
        let answers = seen.answers.get(session).cloned().unwrap_or_default();
        // A write call whose executor died mid-call is not run again: the turn is answered
        // that its outcome is unknown (the ledger shows whether it ran, never twice).
        let mut unknown = answers
            .iter()
            .filter(|a| a.contains(WRITE_OUTCOME_UNKNOWN))
            .count();
        for t in 1..=turns {
            match answers
                .iter()
                .filter(|a| **a == expected(session, t))
                .count()
            {
                0 if t % 3 == 2 && unknown > 0 => {
                    unknown -= 1;
                    faults.writes_reported_unknown += 1;
                    faults.note(format!(
                        "session {session}: turn {t} was told its write's outcome is unknown"
                    ));
                }
                0 => {
                    faults.note(format!(
                        "session {session}: turn {t} never answered; answers seen: {answers:?}"
                    ));
                    faults.never_answered += 1;
                }
                1 => {}
                _ => faults.answered_twice += 1,
            }
        }
        let records = log.read_after(AGENT, session, 0).await.unwrap();
        if let Some((_, last)) = records.last() {
            let record: LogRecord = serde_json::from_slice(last).unwrap();
            if answers.len() < usize::try_from(turns).unwrap() {
                faults.note(format!(
                    "session {session}: last task state {:?}",
                    record.task.turn
                ));
            }
        }
        let mut by_seq: BTreeMap<u64, String> = BTreeMap::new();
        let mut split = false;
        for (_, bytes) in records {
            let record: LogRecord = serde_json::from_slice(&bytes).unwrap();
            for m in record.messages {
                let text = m.message.content.clone();
                if let Some(before) = by_seq.insert(m.seq, text.clone()) {
                    split |= before != text;
                }
            }
        }
        let users: Vec<&String> = by_seq.values().filter(|t| t.starts_with("turn ")).collect();
        let wanted: Vec<String> = (1..=turns).map(|t| message(session, t)).collect();
        let in_order =
            users.len() == wanted.len() && users.iter().zip(&wanted).all(|(a, b)| *a == b);
        let contiguous = by_seq.keys().copied().eq(0..by_seq.len() as u64);
        if answers.len() < usize::try_from(turns).unwrap() {
            faults.note(format!("session {session}: its log holds {by_seq:?}"));
        }
        if split || !in_order || !contiguous {
            faults.note(format!("session {session}: split={split} in_order={in_order} contiguous={contiguous}: {by_seq:?}"));
            faults.split_histories += 1;
        }
    }
    faults
}

/// Session processes heard on `hermes.cluster.sessions`, and those that said they held
/// partitions.
#[derive(Default)]
struct Members {
    heard: HashSet<String>,
    owners: HashSet<String>,
}

async fn watch_members(bus: &SharedBus) -> Arc<Mutex<Members>> {
    let members = Arc::new(Mutex::new(Members::default()));
    let mut heard = bus.subscribe("hermes.cluster.sessions").await.unwrap();
    let seen = members.clone();
    tokio::spawn(async move {
        while let Some(message) = heard.next().await {
            let announcement: Value = serde_json::from_slice(&message.payload).unwrap();
            let id = announcement["id"].as_str().unwrap().to_string();
            let owned = announcement["owned"]
                .as_array()
                .is_some_and(|o| !o.is_empty());
            let mut members = seen.lock().unwrap();
            if owned {
                members.owners.insert(id.clone());
            }
            members.heard.insert(id);
        }
    });
    members
}

/// When the fault strikes.
#[derive(Clone, Copy, PartialEq)]
enum When {
    /// Once a third of the turns are answered.
    ThirdAnswered,
    /// Once a third of the turns are answered and async jobs are running.
    JobsRunning,
}

/// Drive `sessions` × `turns` from outside, calling `fault` as `when` says; returns the
/// faults counted afterwards and how many session processes owned partitions during the run.
fn run_load(
    deployment: &Deployment,
    when: When,
    fault: impl FnOnce() + Send + 'static,
) -> (Faults, usize) {
    let url = deployment.nats.client_url();
    let url = url.as_str();
    let (count, turns) = size();
    let rt = crate::common::runtime::multi_thread(2);
    rt.block_on(async {
        let bus = bus::connect(url, None).await.unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        watch_answers(&bus, seen.clone()).await;
        let members = watch_members(&bus).await;
        // Both session processes know each other before the load, as in a running deployment.
        let deadline = Instant::now() + Duration::from_secs(15);
        while members.lock().unwrap().heard.len() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let sessions: Vec<String> = (0..count).map(|i| format!("scale{i}")).collect();
        let total = count * usize::try_from(turns).unwrap();
        let watcher = {
            let seen = seen.clone();
            tokio::spawn(async move {
                loop {
                    let (answered, jobs) = {
                        let seen = seen.lock().unwrap();
                        let answered: usize = seen.answers.values().map(Vec::len).sum();
                        (answered, seen.jobs_running.len())
                    };
                    if answered * 3 >= total && (when == When::ThirdAnswered || jobs > 0) {
                        eprintln!("fault strikes: {answered} answers, {jobs} jobs running");
                        tokio::task::spawn_blocking(fault).await.unwrap();
                        seen.lock().unwrap().fault_at = Some(Instant::now());
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        let started = Instant::now();
        let mut drivers = Vec::new();
        for session in &sessions {
            let (bus, seen, session) = (bus.clone(), seen.clone(), session.clone());
            drivers.push(tokio::spawn(async move {
                for t in 1..=turns {
                    drive_turn(&bus, &seen, &session, t).await;
                    write_memory(&bus, &seen, &session, t).await;
                }
            }));
        }
        for d in drivers {
            d.await.unwrap();
        }
        watcher.await.unwrap();
        // Late duplicates would arrive now.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let elapsed = started.elapsed();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        let mut faults = count_faults(&bus, &seen, &deployment.ledger, &sessions, turns).await;
        faults.memories_lost = count_lost_memories(&bus, &seen).await;
        faults.audit_records_lost = count_lost_audit_records(&bus, &deployment.ledger).await;
        let failover = seen
            .fault_at
            .zip(seen.first_answer_after_fault)
            .map(|(at, first)| first.saturating_duration_since(at));
        eprintln!(
            "scale-out run: {count} sessions x {turns} turns in {:.1} s; {faults:?}; answers \
             re-sent with the same id: {}; jobs failed: {}; fault to next answer: {failover:?}; \
             fault to the last stalled session's next answer: {:?}",
            elapsed.as_secs_f64(),
            seen.resent,
            seen.jobs_failed,
            seen.longest_stall(turns)
        );
        let owners = members.lock().unwrap().owners.len();
        (faults, owners)
    })
}

/// The NATS side of a deployment.
enum Nats {
    Single(NatsServer),
    Cluster(Arc<Mutex<NatsCluster>>),
}

impl Nats {
    /// Every node: the Hermes processes spread over them.
    fn url(&self) -> String {
        match self {
            Nats::Single(server) => server.url(),
            Nats::Cluster(cluster) => cluster.lock().unwrap().url(),
        }
    }

    /// Where the outside publisher and observer connect: a node that stays up, so what is
    /// counted is the engine's delivery (answer events are core NATS, and a subscriber on a
    /// node that dies loses the events in flight to it, as with any core NATS subscription).
    fn client_url(&self) -> String {
        match self {
            Nats::Single(server) => server.url(),
            Nats::Cluster(cluster) => cluster.lock().unwrap().nodes[0].url(),
        }
    }
}

struct Deployment {
    nats: Nats,
    _dir: tempfile::TempDir,
    session_a: Option<Serve>,
    _session_b: Serve,
    tools_a: Option<Serve>,
    _others: Vec<Serve>,
    /// Serves the ledger MCP server the bridges call.
    _mcp_runtime: tokio::runtime::Runtime,
    ledger: ledger_mcp::Counts,
}

fn deploy() -> Deployment {
    deploy_on(Nats::Single(NatsServer::start()), 1)
}

fn deploy_on(nats: Nats, replicas: u32) -> Deployment {
    let dir = tempfile::tempdir().unwrap();
    let url = nats.url();
    let mcp_runtime = crate::common::runtime::multi_thread(1);
    let (ledger_url, ledger) = mcp_runtime.block_on(ledger_mcp::start());
    let start = |name: &str, actors: &str| {
        let config = write_config(dir.path(), name, replicas, &ledger_url);
        Serve::start(&config, &url, actors)
    };
    // Session-b plans in-process too, so its turns' messages go into the session log with their
    // first write (turn::first_write); session-a's are appended on arrival.
    let session_a = start("session-a", "session");
    let session_b = start("session-b", "session,planner");
    let tools_a = start("tools-a", "tool-executor,mcp-bridge");
    let others = vec![
        start("tools-b", "tool-executor,mcp-bridge"),
        start("core-a", "planner,memory-extractor"),
        start("core-b", "planner,memory-extractor"),
    ];
    Deployment {
        nats,
        _dir: dir,
        session_a: Some(session_a),
        _session_b: session_b,
        tools_a: Some(tools_a),
        _others: others,
        _mcp_runtime: mcp_runtime,
        ledger,
    }
}

#[test]
fn two_session_processes_answer_every_turn_once_with_whole_histories() {
    let deployment = deploy();
    let (faults, owners) = run_load(&deployment, When::ThirdAnswered, || {});
    assert_eq!(faults, Faults::default());
    assert_eq!(owners, 2, "both session processes own partitions");
}

/// Run the load and kill -9 `victim` as `when` says; the faults counted. Panics when the
/// load ended before the kill.
fn kill_mid_load(deployment: &Deployment, victim: Option<Serve>, when: When) -> Faults {
    let victim = Arc::new(Mutex::new(victim));
    let kill = victim.clone();
    let (faults, _) = run_load(deployment, when, move || {
        if let Some(serve) = kill.lock().unwrap().take() {
            serve.kill9();
        }
    });
    assert!(
        victim.lock().unwrap().is_none(),
        "the process was killed mid-load"
    );
    faults
}

#[test]
fn killing_a_session_process_mid_load_loses_and_repeats_nothing() {
    let mut deployment = deploy();
    let victim = deployment.session_a.take();
    let faults = kill_mid_load(&deployment, victim, When::ThirdAnswered);
    assert_eq!(faults, Faults::default());
}

#[test]
fn killing_a_tool_executor_while_jobs_run_loses_and_repeats_nothing() {
    let mut deployment = deploy();
    let victim = deployment.tools_a.take();
    let faults = kill_mid_load(&deployment, victim, When::JobsRunning);
    assert_eq!(faults.must_be_zero(), Faults::default());
}

// Each tool process runs its MCP-bridge beside its tool-executor, so the executor's MCP calls
// stay in-process; a bridge in a process of its own could lose a write call in flight through
// the restarting node (core NATS request/reply), which the executor reports as `timeout`.
#[test]
fn restarting_a_node_of_a_three_node_cluster_mid_load_loses_and_repeats_nothing() {
    let cluster = Arc::new(Mutex::new(NatsCluster::start()));
    let deployment = deploy_on(Nats::Cluster(cluster.clone()), 3);
    let restarted = Arc::new(Mutex::new(false));
    let done = restarted.clone();
    let (faults, _) = run_load(&deployment, When::ThirdAnswered, move || {
        cluster.lock().unwrap().nodes[1].restart();
        *done.lock().unwrap() = true;
    });
    assert!(*restarted.lock().unwrap(), "a node was restarted mid-load");
    assert_eq!(faults, Faults::default());
}
