//! The memory service over the bus: write/forget/recall subjects, durability, user isolation,
//! Chinese and English recall, the OpenAI-compatible embedder, and extraction robustness
//! (a job queued while no extractor runs is not lost; invalid output is dropped once).

use crate::common::scenario::*;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermes::bus::{self, rpc, Bus};
use hermes::client::SessionClient;
use hermes::config::EmbedderConfig;
use hermes::llm::ChatMessage;
use hermes::memory::embed::openai::OpenAiEmbedder;
use hermes::memory::embed::Embedder;
use hermes::memory::refs::MemoryRefs;
use hermes::memory::{MemoryKind, MemoryStore, MemoryUpdate, UpdateOp};
use hermes::protocol::envelope::Envelope;
use hermes::protocol::subjects;
use hermes::protocol::{
    kinds, ExtractJob, MemoryForgetRequest, MemoryWriteReply, MemoryWriteRequest, RecallReply,
    RecallRequest, TurnEvent,
};

use crate::common::engine::{test_config, with_engine};
use crate::common::fake_embeddings::FakeEmbeddings;

const T: Duration = Duration::from_secs(20);

fn script() -> Scenario {
    Scenario::new("memory")
        .rule(on_user(&[]).says("Noted."))
        .rule(on_user(&["purple"]).role("extractor").says("{\"memory_updates\": [{\"op\": \"add\", \"kind\": \"preference\", \"key\": \"favourite_colour\", \"content\": \"favourite colour is purple\", \"importance\": 0.8}]}"))
        .rule(on_user(&["garbage"]).role("extractor").says("this is not JSON at all"))
        .rule(on_user(&["tired"]).role("extractor").says("{\"memory_updates\": [{\"op\": \"add\", \"kind\": \"fact\", \"key\": \"current_mood\", \"content\": \"user is tired today\", \"importance\": 0.3}]}"))
        .rule(on_user(&[]).role("extractor").says("{\"memory_updates\": []}"))
}

fn add(kind: MemoryKind, key: &str, content: &str) -> MemoryUpdate {
    MemoryUpdate {
        op: UpdateOp::Add,
        kind,
        key: key.into(),
        content: content.into(),
        importance: 0.7,
        expiry_days: None,
        topics: Vec::new(),
    }
}

async fn write(bus: &dyn Bus, user: &str, update: MemoryUpdate) -> MemoryWriteReply {
    let req = Envelope::request(MemoryWriteRequest {
        user: user.into(),
        namespace: "default".into(),
        update,
        source: "test".into(),
    });
    rpc::request(bus, req.clone(), T).await.unwrap().body
}

async fn recall(bus: &dyn Bus, request: RecallRequest) -> Vec<String> {
    let req = Envelope::request(request);
    let reply: Envelope<RecallReply> = rpc::request(bus, req.clone(), T).await.unwrap();
    reply.body.hits.into_iter().map(|h| h.record.key).collect()
}

fn ask(user: &str, query: &str) -> RecallRequest {
    RecallRequest {
        user: user.into(),
        query: query.into(),
        limit: 5,
        ..RecallRequest::default()
    }
}

#[test]
fn write_recall_and_forget_subjects_are_durable_per_user_and_bilingual() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let bus = engine.bus.as_ref();
        let added = write(
            bus,
            "alice",
            add(MemoryKind::Constraint, "budget", "耳机预算是5000元"),
        )
        .await;
        assert_eq!(added.changes[0].op.as_str(), "added");
        write(
            bus,
            "alice",
            add(
                MemoryKind::Preference,
                "football_team",
                "supports Arsenal football club",
            ),
        )
        .await;

        assert_eq!(
            recall(bus, ask("alice", "我的耳机预算是多少？")).await,
            ["budget"]
        );
        assert_eq!(
            recall(bus, ask("alice", "which football club do I support?")).await,
            ["football_team"]
        );
        assert!(
            recall(bus, ask("bob", "我的耳机预算是多少？"))
                .await
                .is_empty(),
            "bob never sees alice's memories"
        );

        let mut facts_only = ask("alice", "耳机预算");
        facts_only.kinds = vec![MemoryKind::Fact];
        assert!(
            recall(bus, facts_only).await.is_empty(),
            "the budget is a constraint"
        );
        let mut other_ns = ask("alice", "耳机预算");
        other_ns.namespace = Some("work".into());
        assert!(recall(bus, other_ns).await.is_empty());

        let forget = Envelope::request(MemoryForgetRequest {
            user: "alice".into(),
            namespace: "default".into(),
            id: None,
            key: Some("budget".into()),
        });
        let reply: Envelope<MemoryWriteReply> = rpc::request(bus, forget.clone(), T).await.unwrap();
        assert_eq!(reply.body.changes[0].op.as_str(), "deleted");
        assert_eq!(reply.body.changes[0].key, "budget");
        assert!(recall(bus, ask("alice", "耳机预算")).await.is_empty());
    });
    // Reported writes are on disk: a fresh open sees them.
    let db = hermes::store::durability::Durable::from(sled::open(dir.path().join("db")).unwrap());
    let keys: Vec<String> = MemoryStore::open(&db)
        .unwrap()
        .list("alice")
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, ["football_team"]);
}

/// Queue an extraction job on the embedded bus of `data` with no engine running.
fn queue_job_offline(data: &Path, job: ExtractJob) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = hermes::store::durability::Durable::from(hermes::store::open(data).unwrap());
        let bus = bus::connect("embedded", Some(db.clone())).await.unwrap();
        let env = Envelope::new(kinds::EXTRACT_JOB, job);
        bus.durable_publish(subjects::MEMORY_EXTRACT, env.encode().unwrap())
            .await
            .unwrap();
        db.flush_async().await.unwrap();
    });
    rt.shutdown_timeout(Duration::from_secs(2));
}

#[test]
fn extraction_job_queued_before_a_crash_is_processed_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), &script());
    // The answer went out and the job was queued; then the process died before extracting.
    queue_job_offline(
        &config.engine.data_dir,
        ExtractJob {
            namespace: "default".into(),
            write: true,
            agent: "assistant".into(),
            session: "s1".into(),
            user: "carol".into(),
            turn_id: "t1".into(),
            message_id: "m1".into(),
            source_time: chrono::Utc::now(),
            transcript: vec![
                ChatMessage::user("remember that my favourite colour is purple"),
                ChatMessage::assistant("Noted."),
            ],
        },
    );
    with_engine(config, |engine| async move {
        let deadline = tokio::time::Instant::now() + T;
        loop {
            let keys = recall(engine.bus.as_ref(), ask("carol", "favourite colour")).await;
            if keys == ["favourite_colour"] {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the queued job was never processed"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

#[test]
fn a_turns_recall_holds_its_memories_until_the_turn_is_mined() {
    let dir = tempfile::tempdir().unwrap();
    let config = test_config(dir.path(), &script());
    let data = config.engine.data_dir.clone();
    with_engine(config, |engine| async move {
        let bus = engine.bus.as_ref();
        write(
            bus,
            "dora",
            add(MemoryKind::Fact, "home_city", "dora lives in lisbon"),
        )
        .await;
        for turn in ["t-open", "t-mined"] {
            let request = RecallRequest {
                task: Some(turn.into()),
                ..ask("dora", "where does dora live, lisbon?")
            };
            assert_eq!(recall(bus, request).await, ["home_city"]);
        }
        // t-mined finished: its extraction job arrives (and writes a memory of its own).
        let job = ExtractJob {
            namespace: "default".into(),
            write: true,
            agent: "assistant".into(),
            session: "s1".into(),
            user: "dora".into(),
            turn_id: "t-mined".into(),
            message_id: "m1".into(),
            source_time: chrono::Utc::now(),
            transcript: vec![
                ChatMessage::user("my favourite colour is purple"),
                ChatMessage::assistant("Noted."),
            ],
        };
        let env = Envelope::new(kinds::EXTRACT_JOB, job);
        bus.durable_publish(subjects::MEMORY_EXTRACT, env.encode().unwrap())
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + T;
        while recall(bus, ask("dora", "favourite colour")).await != ["favourite_colour"] {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the job was never mined"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The release follows the write within the same job.
        tokio::time::sleep(Duration::from_millis(500)).await;
    });
    let db = hermes::store::open(&data).unwrap();
    let id = MemoryStore::open(&hermes::store::durability::Durable::from(db.clone()))
        .unwrap()
        .list("dora")
        .unwrap()
        .into_iter()
        .find(|r| r.key == "home_city")
        .unwrap()
        .id;
    let refs = MemoryRefs::open(&db).unwrap();
    assert!(
        refs.is_referenced("dora", &id).unwrap(),
        "t-open still holds it"
    );
    assert_eq!(
        refs.release_task("t-mined").unwrap(),
        0,
        "released by its job"
    );
    assert_eq!(refs.release_task("t-open").unwrap(), 1);
    assert!(!refs.is_referenced("dora", &id).unwrap());
}

#[test]
fn invalid_extractor_output_is_reported_once_and_moods_are_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    with_engine(test_config(dir.path(), &script()), |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "dave")
            .await
            .unwrap();
        c.turn("here is some garbage", T, |_| {}).await.unwrap();
        let mut errors = Vec::new();
        let until = tokio::time::Instant::now() + Duration::from_secs(6);
        while tokio::time::Instant::now() < until {
            match c.next_event(Duration::from_millis(500)).await {
                Ok(Some(TurnEvent::Error { code, message, .. })) => errors.push((code, message)),
                Ok(Some(TurnEvent::MemoryWritten { .. })) => panic!("nothing should be written"),
                _ => {}
            }
        }
        // A redelivered job would report again after the 2 s retry delay.
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, "memory_extraction_invalid");
        assert!(errors[0].1.contains("twice"), "{}", errors[0].1);

        c.turn("I am so tired today", T, |_| {}).await.unwrap();
        let mut written = None;
        while let Ok(Some(e)) = c.next_event(T).await {
            if let TurnEvent::MemoryWritten { changes, .. } = e {
                written = Some(changes);
                break;
            }
        }
        assert_eq!(written, Some(Vec::new()), "a mood is not stored");
    });
}

#[test]
fn openai_embedder_reorders_normalises_authenticates_and_reports_errors() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let fake = FakeEmbeddings::start().await;
        let e = OpenAiEmbedder::new(&fake.base_url(), "bow", Some("sk-test".into()), 5).unwrap();
        let texts: Vec<String> = ["red apple", "green pear", "red red"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let v = e.embed(&texts).await.unwrap();
        assert_eq!(v.len(), 3);
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-5, "unit length");
        assert!(dot(&v[0], &v[2]) > dot(&v[0], &v[1]), "input order kept");
        assert_eq!(fake.authorizations()[0].as_deref(), Some("Bearer sk-test"));
        fake.fail_next(1);
        let err = e.embed(&texts).await.unwrap_err().to_string();
        assert!(
            err.contains("500") && err.contains("[memory.embedder]"),
            "{err}"
        );
    });
}

#[test]
fn engine_with_an_openai_embedder_embeds_writes_and_recalls_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fake = Arc::new(rt.block_on(FakeEmbeddings::start()));
    let mut config = test_config(dir.path(), &script());
    config.memory.embedder = EmbedderConfig::Openai {
        base_url: fake.base_url(),
        model: "bow".into(),
        api_key_env: None,
        timeout_secs: 5,
    };
    let seen = fake.clone();
    with_engine(config, |engine| async move {
        let bus = engine.bus.as_ref();
        write(
            bus,
            "erin",
            add(MemoryKind::Fact, "pet", "has a grey cat named Pixel"),
        )
        .await;
        assert_eq!(seen.inputs(), 1, "embedded when written");
        assert_eq!(recall(bus, ask("erin", "cat Pixel")).await, ["pet"]);
        assert_eq!(seen.inputs(), 2, "only the query is embedded at recall");
    });
    drop(rt);
}

/// An extractor model that never answers: the job is tried on every delivery the queue
/// allows, then dropped with an `error` event telling the session (not discarded in silence
/// by the queue). Found by the fault matrix's disk-full cell.
#[test]
fn an_extraction_failing_on_every_delivery_is_told_not_dropped_in_silence() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &script());
    config.models.extractor = hermes::config::ModelConfig::Openai(hermes::config::OpenAiConfig {
        // Nothing listens on port 1: every call is refused at once.
        base_url: Some("http://127.0.0.1:1/v1".into()),
        max_retries: 0,
        ..hermes::config::OpenAiConfig::from_env("unreachable-extractor")
    });
    with_engine(config, |engine| async move {
        let mut c = SessionClient::open(engine.bus.clone(), "assistant", "s1", "erin")
            .await
            .unwrap();
        c.turn("my favourite colour is purple", T, |_| {})
            .await
            .unwrap();
        let mut errors = Vec::new();
        // Five deliveries, two seconds apart.
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        while errors.is_empty() && tokio::time::Instant::now() < until {
            if let Ok(Some(TurnEvent::Error { code, message, .. })) =
                c.next_event(Duration::from_millis(500)).await
            {
                errors.push((code, message));
            }
        }
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, "memory_extraction_failed");
        assert!(errors[0].1.contains("5 attempts"), "{}", errors[0].1);
    });
}
