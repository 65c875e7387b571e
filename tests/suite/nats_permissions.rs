//! Least privilege on the bus, against a real nats-server running the shipped
//! `config/nats/hermes.conf` and Hermes configured by the shipped `config/nats/hermes.toml`:
//! every Hermes service runs in its own `hermes serve` under its role's credential, the Python
//! worker under its own, and plain NATS clients act as the shop, alice and the operators.
//!
//! Shown: each refusal (a publisher reaching memory, tools, the planner, jobs, another user's
//! session events (alice cannot read the shop's customers' or another person's, the shop not
//! alice's), another
//! publisher's or another agent's subjects, the JetStream API or other clients' inboxes; a
//! worker serving a tool it was not given; a user the publisher may not speak for; a trigger
//! event naming such a user; a service started under another role's credential) — and that a
//! full turn with a built-in, a worker and an MCP tool, memory and a trigger still works with
//! no permission refused to any Hermes process.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hermes::protocol::envelope::{Envelope, EnvelopeError};
use hermes::protocol::request::ToolsListRequest;
use hermes::protocol::{Accepted, RecallRequest, ToolsCatalog, TurnEvent, UserMessage};
use serde_json::{json, Value};

use crate::common::hermes_proc::{hermes, Serve};
use crate::common::nats_roles::{self, role_env, RawClient};
use crate::common::python_worker::PythonWorker;
use crate::common::runtime::multi_thread;
use crate::common::scenario::*;

const T: Duration = Duration::from_secs(60);
const MAX: usize = 1 << 20;

fn script() -> Scenario {
    Scenario::new("permissions")
        .rule(
            on_user(&["checkall"])
                .calls("order_lookup", json!({"order_id": "JD-20251111-0042"}))
                .calls("word_count", json!({"text": "one two three"}))
                .calls(
                    "catalog__search_products",
                    json!({"brand": "Sony", "category": "headphones", "max_price_yuan": 5000}),
                ),
        )
        .rule(
            on_user(&["report"]).calls("generate_report", json!({"topic": "phones", "seconds": 1})),
        )
        .rule(
            on_user(&["delegate"])
                .calls("agent__researcher", json!({"task": "compare headphones"})),
        )
        .rule(after_tool("generate_report").says("Your report is ready."))
        .rule(after_tool("agent__researcher").says("The researcher answered."))
        .rule(after_any_tool().says("Every tool answered."))
        .rule(on_user(&["days late"]).says("Sorry: your parcel is on its way."))
        .rule(on_user(&[]).says("ok"))
        .rule(on_user(&["checkall"]).role("extractor").says(
            "{\"memory_updates\": [{\"op\": \"add\", \"kind\": \"preference\", \"key\": \
             \"headphone_brand\", \"content\": \"likes Sony headphones\", \"importance\": 0.8}]}",
        ))
        .rule(
            on_user(&[])
                .role("extractor")
                .says("{\"memory_updates\": []}"),
        )
}

/// The shipped Hermes configuration with this test's models and a data directory: one file
/// for every process, as in a deployment.
fn deployment_config(dir: &Path) -> PathBuf {
    let scenario = dir.join("scenario.toml");
    std::fs::write(&scenario, script().to_toml()).unwrap();
    let shipped =
        std::fs::read_to_string(nats_roles::repo_file("config/nats/hermes.toml")).unwrap();
    let models: String = ["planner", "extractor", "summariser"]
        .iter()
        .map(|role| {
            format!(
                "[models.{role}]\nprovider = \"replay\"\nscenario = \"{}\"\n",
                scenario.display()
            )
        })
        .collect();
    // A second agent the assistant delegates to: delegations are messages the session
    // service sends to sessions as itself.
    let agents = "[agents.assistant]\ndelegates_to = [\"researcher\"]\n\
                  [agents.researcher]\ndescription = \"Researches products\"\n\
                  system_prompt = \"You research products.\"\ntools = []\nmax_steps = 4\n\
                  context_window = 128000\nreply_reserve = 4096\n";
    let text = format!(
        "{}\n{shipped}\n[engine]\ndata_dir = \"{}\"\n{models}{agents}",
        crate::common::scenario::demo_tools_toml(),
        dir.join("unused-data").display()
    );
    let path = dir.join("hermes.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `hermes serve --actors ACTORS` as `user`, with its own data directory.
fn serve(config: &Path, dir: &Path, url: &str, actors: &str, user: &str) -> Serve {
    let data = dir.join(format!("{user}-data"));
    let data = data.to_str().unwrap();
    Serve::start_with_env(config, url, actors, &["--data-dir", data], &role_env(user))
}

fn message(session: &str, user: &str, body: UserMessage) -> bytes::Bytes {
    Envelope::request(body)
        .for_session("assistant", session, Some(user))
        .encode()
        .unwrap()
}

/// Send a message as `client` on its own inbound subject; the session's answer.
async fn send(
    client: &RawClient,
    session: &str,
    user: &str,
    body: UserMessage,
) -> Result<Accepted, EnvelopeError> {
    let subject = format!("hermes.in.assistant.{session}.{}", client.user);
    let reply = tokio::time::timeout(
        T,
        client.client.request(subject, message(session, user, body)),
    )
    .await
    .expect("an answer in time")
    .expect("a reply");
    Envelope::<Accepted>::decode_reply(&reply.payload, MAX).map(|e| e.body)
}

fn refused_with(answer: Result<Accepted, EnvelopeError>, expected: &str) -> String {
    match answer {
        Err(EnvelopeError::Answered { code, message, .. }) => {
            assert_eq!(code, expected, "{message}");
            message
        }
        other => panic!("expected a `{expected}` refusal, got {other:?}"),
    }
}

/// The events of `session`'s turn up to its answer (or error).
async fn turn_events(events: &mut async_nats::Subscriber, session: &str) -> Vec<TurnEvent> {
    let mut seen = Vec::new();
    loop {
        let message = tokio::time::timeout(T, events.next())
            .await
            .expect("the turn goes on")
            .expect("the subscription is open");
        // One event, or several of the turn that left together.
        let envelope = Envelope::decode_events(&message.payload, MAX).unwrap();
        if envelope.session.as_deref() != Some(session) {
            continue;
        }
        for event in envelope.body.events {
            let last = matches!(event, TurnEvent::Answer { .. } | TurnEvent::Error { .. });
            seen.push(event);
            if last {
                return seen;
            }
        }
    }
}

/// The next event of `events` for which `pick` says something.
async fn next_matching<T>(
    events: &mut async_nats::Subscriber,
    mut pick: impl FnMut(&Value) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let message = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("the awaited event arrives in time")
            .expect("the subscription is open");
        let value: Value = serde_json::from_slice(&message.payload).unwrap();
        if let Some(found) = pick(&value) {
            return found;
        }
    }
}

/// Wait until the tool-executor has mounted the MCP bridge's tools.
async fn wait_for_mcp_tools(ops: &RawClient) {
    let deadline = Instant::now() + T;
    let list = Envelope::request(ToolsListRequest).encode().unwrap();
    while Instant::now() < deadline {
        if let Ok(Ok(reply)) = tokio::time::timeout(
            Duration::from_secs(5),
            ops.client.request("hermes.tools.list", list.clone()),
        )
        .await
        {
            let catalog = Envelope::<ToolsCatalog>::decode_reply(&reply.payload, 64 << 20).unwrap();
            if catalog
                .body
                .tools
                .iter()
                .any(|t| t.name == "catalog__search_products")
            {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the tool-executor never mounted the MCP tools");
}

/// What publishers and workers may not do, each refused by the server. Returns the
/// worker's refused subscription to a tool it may not serve, to show nothing reaches it.
async fn refusals(
    shop: &RawClient,
    alice: &RawClient,
    worker: &RawClient,
) -> async_nats::Subscriber {
    for subject in [
        "hermes.memory.recall",
        "hermes.memory.write",
        "hermes.tool.order_lookup",
        "hermes.tools.list",
        "hermes.plan",
        "hermes.job.job-1",
        "hermes.inbox.0.assistant.s1",
        "hermes.in.assistant.s1",       // the short form names no publisher
        "hermes.in.assistant.s1.alice", // another publisher's name
        "hermes.in.triage.s1.shop",     // another agent
        "$JS.API.INFO",
        "$JS.API.STREAM.LIST",
        "$KV.hermes_idem.x",
    ] {
        shop.publish_is_refused(subject).await;
    }
    for subject in [
        "hermes.out.triage.s1.shop",      // another agent's events
        "hermes.out.assistant.>",         // every user's events
        "hermes.out.assistant.a-1.alice", // a person's session
        "hermes.out.assistant.*.alice",
        "_INBOX.>", // everybody's replies
        "_INBOX.hermes-session.>",
        "hermes.memory.>",
        "hermes.tool.order_lookup",
        "hermes.audit.>",
        "$JS.>",
    ] {
        shop.subscribe_is_refused(subject).await;
    }
    alice
        .publish_is_refused("hermes.in.assistant.s1.shop")
        .await;
    // alice reads her own sessions only: not another user's, not the shop's customers'.
    for subject in [
        "hermes.out.assistant.>",
        "hermes.out.assistant.perm-1.shop",
        "hermes.out.assistant.*.shop",
        "hermes.out.assistant.b-1.bob",
        "hermes.out.assistant.*.*",
    ] {
        alice.subscribe_is_refused(subject).await;
    }
    // The worker serves its tool only, and publishes nothing but answers.
    let stolen = worker
        .subscribe_is_refused("hermes.tool.order_lookup")
        .await;
    worker.subscribe_is_refused("hermes.tool.*").await;
    worker
        .publish_is_refused("hermes.in.assistant.s1.worker-word-count")
        .await;
    worker
        .publish_is_refused("hermes.out.assistant.s1.worker-word-count")
        .await;
    // A request the server refused reaches nobody: the memory service is up, but silent.
    let recall = Envelope::request(RecallRequest {
        user: "u-1001".into(),
        query: "anything".into(),
        ..RecallRequest::default()
    })
    .encode()
    .unwrap();
    let reached = tokio::time::timeout(
        Duration::from_secs(2),
        shop.client.request("hermes.memory.recall", recall),
    )
    .await;
    assert!(
        !matches!(reached, Ok(Ok(_))),
        "the shop reached the memory service"
    );
    stolen
}

#[test]
fn every_service_runs_under_its_role_and_each_refusal_holds() {
    let nats = nats_roles::start_server();
    let url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let config = deployment_config(dir.path());
    let _services: Vec<Serve> = [
        ("mcp-bridge", "hermes-mcp"),
        ("tool-executor", "hermes-tools"),
        ("memory-extractor", "hermes-memory"),
        ("planner", "hermes-planner"),
        ("session", "hermes-session"),
    ]
    .iter()
    .map(|(actors, user)| serve(&config, dir.path(), &url, actors, user))
    .collect();
    let _worker = PythonWorker::start_as(
        &url,
        Some((
            "worker-word-count",
            &nats_roles::password("worker-word-count"),
        )),
    );
    let rt = multi_thread(2);
    rt.block_on(async {
        let shop = RawClient::connect(&url, "shop").await;
        let alice = RawClient::connect(&url, "alice").await;
        let worker = RawClient::connect(&url, "worker-word-count").await;
        let ops = RawClient::connect(&url, "hermes-ops").await;
        let mut audit = ops.client.subscribe("hermes.audit.>").await.unwrap();
        // Each reads the events of its own users' sessions, and only those.
        let mut events = shop
            .client
            .subscribe("hermes.out.assistant.*.shop")
            .await
            .unwrap();
        let mut alice_events = alice
            .client
            .subscribe("hermes.out.assistant.*.alice")
            .await
            .unwrap();
        alice.client.flush().await.unwrap();
        let mut replies = shop.client.subscribe("shop.orders.*.reply").await.unwrap();
        shop.client.flush().await.unwrap();
        ops.client.flush().await.unwrap();

        let mut stolen = refusals(&shop, &alice, &worker).await;
        wait_for_mcp_tools(&ops).await;

        // A full turn for one of the shop's customers: a built-in, a worker and an MCP tool,
        // a memory written afterwards — every service under its own role.
        let accepted = send(&shop, "perm-1", "cust-42", UserMessage::text("checkall please"))
            .await
            .expect("the shop's customer is accepted");
        assert_eq!(accepted.session, "perm-1");
        let turn = turn_events(&mut events, "perm-1").await;
        let results: Vec<(String, String, String)> = turn
            .iter()
            .filter_map(|e| match e {
                TurnEvent::ToolResult { result, .. } => Some((
                    result.name.clone(),
                    format!("{:?}", result.status),
                    result.via.clone(),
                )),
                _ => None,
            })
            .collect();
        for tool in ["order_lookup", "word_count", "catalog__search_products"] {
            let (_, status, via) = results
                .iter()
                .find(|(name, ..)| name == tool)
                .unwrap_or_else(|| panic!("no result of {tool}: {turn:?}"));
            assert_eq!(status, "Ok", "{tool}: {turn:?}");
            if tool == "word_count" {
                assert_eq!(via, "worker");
            }
        }
        assert!(
            matches!(turn.last(), Some(TurnEvent::Answer { text, .. }) if text == "Every tool answered."),
            "{turn:?}"
        );
        next_matching(&mut events, |v| {
            (v["body"]["type"] == "memory.written" && v["session"] == "perm-1").then_some(())
        })
        .await;
        // The executor ran order_lookup; the worker's refused subscription got nothing.
        let leaked = tokio::time::timeout(Duration::from_millis(200), stolen.next()).await;
        assert!(
            !matches!(leaked, Ok(Some(_))),
            "the worker received a call of a tool it may not serve"
        );

        // An async job (the job queue, its events into the session's inbox) and a
        // delegation (a message from the session service to another agent's session).
        for (session, text, answer) in [
            ("perm-4", "report please", "Your report is ready."),
            ("perm-5", "delegate this", "The researcher answered."),
        ] {
            send(&shop, session, "cust-42", UserMessage::text(text))
                .await
                .expect("accepted");
            let turn = turn_events(&mut events, session).await;
            assert!(
                matches!(turn.last(), Some(TurnEvent::Answer { text, .. }) if text == answer),
                "{session}: {turn:?}"
            );
        }

        // The shop may not speak for a user outside `cust-*`: refused, an error event for the
        // session, and an audit record naming the publisher and the user it claimed.
        let text = refused_with(
            send(&shop, "perm-2", "u-1001", UserMessage::text("hello")).await,
            "user_not_allowed",
        );
        assert!(text.contains("[bus.publishers.shop]"), "{text}");
        let (publisher, user) = next_matching(&mut audit, |v| {
            (v["kind"] == "audit.bus_denied").then(|| {
                (
                    v["body"]["publisher"].as_str().unwrap_or_default().to_string(),
                    v["body"]["user"].as_str().unwrap_or_default().to_string(),
                )
            })
        })
        .await;
        assert_eq!((publisher.as_str(), user.as_str()), ("shop", "u-1001"));
        let code = next_matching(&mut events, |v| {
            (v["session"] == "perm-2" && v["body"]["type"] == "error")
                .then(|| v["body"]["code"].clone())
        })
        .await;
        assert_eq!(code, json!("user_not_allowed"));

        // Only Hermes' own services pick where an answer goes.
        let answer_to = UserMessage {
            answer_to: Some("shop.orders.X.reply".into()),
            ..UserMessage::text("hello")
        };
        refused_with(send(&shop, "perm-3", "cust-1", answer_to).await, "internal_field");

        // alice speaks for alice alone.
        refused_with(
            send(&alice, "a-1", "bob", UserMessage::text("hi")).await,
            "user_not_allowed",
        );
        send(&alice, "a-1", "alice", UserMessage::text("hi"))
            .await
            .expect("alice as herself is accepted");
        // Her refused message's error came to her, then her answer.
        let refused = turn_events(&mut alice_events, "a-1").await;
        assert!(
            matches!(refused.as_slice(), [TurnEvent::Error { code, .. }] if code == "user_not_allowed"),
            "{refused:?}"
        );
        let hers = turn_events(&mut alice_events, "a-1").await;
        assert!(
            matches!(hers.last(), Some(TurnEvent::Answer { text, .. }) if text == "ok"),
            "alice reads her own answer: {hers:?}"
        );

        // A trigger event: its customer must be one the shop may speak for.
        let event = |customer: &str, id: &str| {
            json!({"customer": customer, "days_late": 2, "event_id": id}).to_string()
        };
        shop.client
            .publish("shop.orders.A1.delayed", event("cust-7", "e-1").into())
            .await
            .unwrap();
        shop.client
            .publish("shop.orders.B2.delayed", event("u-1001", "e-2").into())
            .await
            .unwrap();
        shop.client.flush().await.unwrap();
        let reply = tokio::time::timeout(T, replies.next())
            .await
            .expect("the trigger's answer in time")
            .unwrap();
        assert_eq!(reply.subject.as_str(), "shop.orders.A1.reply");
        let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(reply["body"]["text"], "Sorry: your parcel is on its way.");
        assert_eq!(reply["user"], "cust-7");
        let refused = next_matching(&mut audit, |v| {
            (v["kind"] == "audit.trigger").then(|| v["body"]["error"].to_string())
        })
        .await;
        assert!(refused.contains("user_not_allowed"), "{refused}");
        assert!(refused.contains("u-1001"), "{refused}");

        for (client, allowed) in [
            (&shop, "hermes.in.assistant.perm-1.shop"),
            (&shop, "hermes.out.assistant.*.shop"),
            (&shop, "shop.orders.A1.delayed"),
            (&alice, "hermes.in.assistant.a-1.alice"),
            (&alice, "hermes.out.assistant.*.alice"),
        ] {
            client.never_refused(allowed);
        }
    });

    // The shop's own example publisher, as the shop: its event answered on its reply subject.
    let published = std::process::Command::new(crate::common::python_worker::find_python())
        .arg(nats_roles::repo_file("examples/publish_event.py"))
        .args(["--url", &url, "--user", "shop", "--order", "B9"])
        .args(["--customer", "cust-9", "--timeout", "60"])
        .env("NATS_PASSWORD", nats_roles::password("shop"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&published.stdout);
    assert!(
        published.status.success() && said.contains("Sorry: your parcel is on its way."),
        "publish_event.py as shop: {said}\n{}",
        String::from_utf8_lossy(&published.stderr)
    );

    // The operators' CLI, as itself.
    let ops = |args: &[&str]| {
        let output = hermes()
            .envs(role_env("hermes-ops"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let err = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(output.status.success(), "hermes {args:?}: {text}\n{err}");
        text
    };
    let sent = ops(&[
        "send",
        "--bus",
        &url,
        "--session",
        "ops-1",
        "--user",
        "u-1001",
        "--text",
        "hello",
    ]);
    assert!(sent.contains("ok"), "{sent}");
    // The CLI as a person, under her own rules: her message, her answer.
    let output = hermes()
        .envs(role_env("alice"))
        .arg("--config")
        .arg(&config)
        .args(["send", "--bus", &url, "--session", "a-2", "--user", "alice"])
        .args(["--text", "hello"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && text.contains("ok"),
        "hermes send as alice: {text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // An agent outside her rules: the server refuses the publish, and the CLI says so and how
    // to fix it, instead of a bare "no answer".
    let output = hermes()
        .envs(role_env("alice"))
        .arg("--config")
        .arg(&config)
        .args([
            "send",
            "--bus",
            &url,
            "--agent",
            "triage",
            "--session",
            "a-3",
        ])
        .args(["--user", "alice", "--timeout", "3", "--text", "hello"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && err
                .lines()
                .any(|l| l.contains("no answer") && l.contains("nats-server does not let")),
        "hermes send as alice to triage: {err}"
    );
    let audit = ops(&["mcp", "audit", "--bus", &url, "--limit", "5"]);
    assert!(audit.contains("search_products"), "{audit}");
    let mounted = ops(&["mcp", "status", "--bus", &url]);
    assert!(mounted.contains("catalog"), "{mounted}");
    let sessions = ops(&["sessions", "ls", "--bus", &url, "--user", "u-1001"]);
    assert!(sessions.contains("ops-1"), "{sessions}");
    let shown = ops(&["sessions", "show", "ops-1", "--bus", &url]);
    assert!(shown.contains("hello"), "{shown}");
    let memories = ops(&["memory", "ls", "--bus", &url, "--user", "cust-42"]);
    assert!(memories.contains("headphone_brand"), "{memories}");
    let status = ops(&["status", "--bus", &url, "--json", "--wait", "3"]);
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(
        status["processes"].as_array().map(Vec::len),
        Some(5),
        "{status}"
    );

    // The backup role takes the deployment's streams and buckets, and puts them into a fresh
    // server under the same permissions.
    let backup_as = |url: &str, args: &[&str]| {
        let output = hermes()
            .envs(role_env("hermes-backup"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .args(["--bus", url])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let err = String::from_utf8_lossy(&output.stderr).to_string();
        assert!(output.status.success(), "hermes {args:?}: {text}\n{err}");
        text
    };
    let file = dir.path().join("perm.hermes-backup");
    let file = file.to_str().unwrap();
    let written = backup_as(&url, &["backup", "--out", file]);
    assert!(written.contains("HERMES_SESSION_LOG"), "{written}");
    let fresh = nats_roles::start_server();
    backup_as(&fresh.url(), &["restore", file]);
    let violations: Vec<String> = fresh
        .log()
        .lines()
        .filter(|l| l.contains("Violation"))
        .map(str::to_string)
        .collect();
    assert!(
        violations.is_empty(),
        "the restore was refused: {violations:#?}"
    );

    // No Hermes process was refused anything it does.
    let log = nats.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Violation") && l.contains("/user:hermes-"))
        .collect();
    assert!(
        refused.is_empty(),
        "Hermes roles were refused: {refused:#?}"
    );
}

#[test]
fn a_service_under_another_roles_credential_stops_at_start_naming_the_subject() {
    let nats = nats_roles::start_server();
    let dir = tempfile::tempdir().unwrap();
    let config = deployment_config(dir.path());
    // The memory-extractor's user may not serve hermes.plan.
    let output = hermes()
        .envs(role_env("hermes-memory"))
        .arg("--config")
        .arg(&config)
        .args(["serve", "--bus", &nats.url(), "--actors", "planner"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the planner served as hermes-memory"
    );
    for expected in [
        "`hermes.plan`",
        "user `hermes-memory`",
        "config/nats/hermes.conf",
    ] {
        assert!(err.contains(expected), "{expected} not named in: {err}");
    }
}
