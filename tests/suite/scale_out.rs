//! Several session processes on one NATS deployment: every session has one owner at a time,
//! its history stays whole, and a killed owner's sessions carry on elsewhere.
//!
//! Real processes: a nats-server with JetStream (or a 3-node cluster with replicas 3, one of
//! whose nodes restarts mid-load), two `hermes serve --actors session`, and
//! worker processes for the planner (the bench model: it answers `The answer is a+b.` from the
//! `add` tool's result, so every answer can be checked) and the tool-executor. Sessions are
//! driven from outside over NATS, as a publishing system would.
//!
//! Size: `HERMES_SCALE_SESSIONS` × `HERMES_SCALE_TURNS` (default 24 × 3 here; the issue's full
//! size, 200 × 5, is `scripts/scale-out.sh`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use hermes::bus::{self, SharedBus};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::UserMessage;
use hermes::store::replica::LogRecord;

use crate::common::hermes_proc::Serve;
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

fn write_config(dir: &Path, name: &str, replicas: u32) -> PathBuf {
    let config = format!(
        r#"
[engine]
data_dir = "{data}"
[models.planner]
provider = "bench"
[models.extractor]
provider = "replay"
scenario = "builtin:demo"
[models.summariser]
provider = "replay"
scenario = "builtin:demo"
[tools]
builtin = ["add"]
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

fn expected(t: u64) -> String {
    format!("The answer is {}.", 2 * t + 1000)
}

/// Publish turn `t` of `session` until a session process has it (same envelope id on every
/// try, so a retry is never a second message), then wait for its answer.
async fn drive_turn(bus: &SharedBus, seen: &Arc<Mutex<Seen>>, session: &str, t: u64) {
    let text = format!("turn {t}: add {t} and {}", 1000 + t);
    let envelope = Envelope::request(UserMessage { text }).for_session(AGENT, session, Some("u1"));
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
    let want = expected(t);
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    while Instant::now() < deadline {
        let answered = seen
            .lock()
            .unwrap()
            .answers
            .get(session)
            .is_some_and(|a| a.contains(&want));
        if answered {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Collect every `answer` event on `hermes.out.>`.
async fn watch_answers(bus: &SharedBus, seen: Arc<Mutex<Seen>>) {
    let mut out = bus.subscribe("hermes.out.>").await.unwrap();
    tokio::spawn(async move {
        while let Some(message) = out.next().await {
            let Ok(v) = serde_json::from_slice::<Value>(&message.payload) else {
                continue;
            };
            if v["body"]["type"] == "answer" {
                let session = message.subject.rsplit('.').next().unwrap().to_string();
                let text = v["body"]["text"].as_str().unwrap_or_default().to_string();
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
    bus.flush().await.unwrap();
}

/// The run's faults, all of which must be zero.
#[derive(Debug, Default, PartialEq)]
struct Faults {
    never_answered: usize,
    answered_twice: usize,
    split_histories: usize,
}

/// Count the faults: answers missing or repeated, and sessions whose replicated log is not
/// one history holding each turn's message once, in order.
async fn count_faults(bus: &SharedBus, seen: &Seen, sessions: &[String], turns: u64) -> Faults {
    let mut faults = Faults::default();
    let log = bus.cluster().expect("NATS has a cluster").session_log();
    for session in sessions {
        let answers = seen.answers.get(session).cloned().unwrap_or_default();
        for t in 1..=turns {
            match answers.iter().filter(|a| **a == expected(t)).count() {
                0 => {
                    eprintln!(
                        "session {session}: turn {t} never answered; answers seen: {answers:?}"
                    );
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
                eprintln!("session {session}: last task state {:?}", record.task.turn);
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
        let wanted: Vec<String> = (1..=turns)
            .map(|t| format!("turn {t}: add {t} and {}", 1000 + t))
            .collect();
        let in_order =
            users.len() == wanted.len() && users.iter().zip(&wanted).all(|(a, b)| *a == b);
        let contiguous = by_seq.keys().copied().eq(0..by_seq.len() as u64);
        if split || !in_order || !contiguous {
            eprintln!("session {session}: split={split} in_order={in_order} contiguous={contiguous}: {by_seq:?}");
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

/// Drive `sessions` × `turns` from outside, calling `fault` once a third of the turns are
/// answered; returns the faults counted afterwards and how many session processes owned
/// partitions during the run.
fn run_load(url: &str, fault: impl FnOnce() + Send + 'static) -> (Faults, usize) {
    let (count, turns) = size();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
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
                    let answered: usize = seen.lock().unwrap().answers.values().map(Vec::len).sum();
                    if answered * 3 >= total {
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
        let faults = count_faults(&bus, &seen, &sessions, turns).await;
        let failover = seen
            .fault_at
            .zip(seen.first_answer_after_fault)
            .map(|(at, first)| first.saturating_duration_since(at));
        eprintln!(
            "scale-out run: {count} sessions x {turns} turns in {:.1} s; {faults:?}; answers \
             re-sent with the same id: {}; fault to next answer: {failover:?}; fault to the \
             last stalled session's next answer: {:?}",
            elapsed.as_secs_f64(),
            seen.resent,
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
    fn url(&self) -> String {
        match self {
            Nats::Single(server) => server.url(),
            Nats::Cluster(cluster) => cluster.lock().unwrap().url(),
        }
    }
}

struct Deployment {
    nats: Nats,
    _dir: tempfile::TempDir,
    session_a: Option<Serve>,
    _session_b: Serve,
    _workers: Vec<Serve>,
}

fn deploy() -> Deployment {
    deploy_on(Nats::Single(NatsServer::start()), 1)
}

fn deploy_on(nats: Nats, replicas: u32) -> Deployment {
    let dir = tempfile::tempdir().unwrap();
    let url = nats.url();
    let start = |name: &str, actors: &str| {
        Serve::start(&write_config(dir.path(), name, replicas), &url, actors)
    };
    let session_a = start("session-a", "session");
    let session_b = start("session-b", "session");
    let workers = vec![
        // One memory-extractor: memories are still per process (see README "Running a cluster").
        start("worker-a", "planner,tool-executor,memory-extractor"),
        start("worker-b", "planner,tool-executor"),
    ];
    Deployment {
        nats,
        _dir: dir,
        session_a: Some(session_a),
        _session_b: session_b,
        _workers: workers,
    }
}

#[test]
fn two_session_processes_answer_every_turn_once_with_whole_histories() {
    let deployment = deploy();
    let (faults, owners) = run_load(&deployment.nats.url(), || {});
    assert_eq!(faults, Faults::default());
    assert_eq!(owners, 2, "both session processes own partitions");
}

#[test]
fn killing_a_session_process_mid_load_loses_and_repeats_nothing() {
    let mut deployment = deploy();
    let victim = Arc::new(Mutex::new(deployment.session_a.take()));
    let kill = victim.clone();
    let (faults, _) = run_load(&deployment.nats.url(), move || {
        if let Some(serve) = kill.lock().unwrap().take() {
            serve.kill9();
        }
    });
    assert!(
        victim.lock().unwrap().is_none(),
        "the session process was killed mid-load"
    );
    assert_eq!(faults, Faults::default());
}

// Run by scripts/scale-out.sh, not in CI: under CI's load a tool request in flight through the
// restarting node is lost (core NATS request/reply), the call ends `unavailable` after its
// timeout, and the bench model turns that into a wrong answer. Retrying read and idempotent
// tool calls after a reconnect is the missing piece (see the issue note).
#[test]
#[ignore = "node-restart fault run: scripts/scale-out.sh runs it (tool requests in flight are not retried yet)"]
fn restarting_a_node_of_a_three_node_cluster_mid_load_loses_and_repeats_nothing() {
    let cluster = Arc::new(Mutex::new(NatsCluster::start()));
    let deployment = deploy_on(Nats::Cluster(cluster.clone()), 3);
    let restarted = Arc::new(Mutex::new(false));
    let done = restarted.clone();
    let (faults, _) = run_load(&deployment.nats.url(), move || {
        cluster.lock().unwrap().nodes[1].restart();
        *done.lock().unwrap() = true;
    });
    assert!(*restarted.lock().unwrap(), "a node was restarted mid-load");
    assert_eq!(faults, Faults::default());
}
