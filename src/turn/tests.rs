//! The turn without a bus: scripted ports, a real sled store in a temporary directory.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use chrono::Utc;
use serde_json::json;

use super::fake::FakePorts;
use super::inbound::{self, Inbound};
use super::{run_turn, Awaited, TurnEnv, TurnOutcome};
use crate::config::Config;
use crate::context::tokens::TokenCounter;
use crate::llm::{Role, ToolCall};
use crate::protocol::envelope::Envelope;
use crate::protocol::{
    Confirmation, PlanReply, PlanRequest, ToolDefinition, ToolEffect, ToolMode, ToolRisk,
    TurnEvent, UserMessage,
};
use crate::store::durability::{Durable, Mode};
use crate::store::sessions::{SessionMeta, SessionStore, StoredMessage};
use crate::store::tasks::{TaskState, TurnPhase};
use crate::tools::{ToolError, ToolErrorCode};

fn tokens() -> TokenCounter {
    static TOKENS: OnceLock<TokenCounter> = OnceLock::new();
    TOKENS
        .get_or_init(|| TokenCounter::for_model("gpt-4o-mini").unwrap())
        .clone()
}

/// A session of one user with its store, driven by hand.
pub(crate) struct Session {
    pub(crate) env: TurnEnv,
    pub(crate) db: Durable,
    pub(crate) ports: Arc<FakePorts>,
    pub(crate) meta: SessionMeta,
    pub(crate) task: TaskState,
    pub(crate) log: Vec<StoredMessage>,
    _dir: tempfile::TempDir,
}

impl Session {
    pub(crate) fn new(ports: FakePorts) -> Self {
        Self::with_config(ports, Config::embedded().unwrap())
    }

    pub(crate) fn with_config(ports: FakePorts, config: Config) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Durable::new(crate::store::open(dir.path()).unwrap(), Mode::Sync);
        let ports = Arc::new(ports);
        let env = TurnEnv {
            ports: ports.clone(),
            config: Arc::new(config),
            store: SessionStore::open(&db).unwrap(),
            tokens: tokens(),
            cancel: Arc::default(),
            ack: Default::default(),
            prefetched: Default::default(),
            first_write: Default::default(),
            inbox_item: Default::default(),
            tool_tokens: Default::default(),
            ack_flush_within: crate::turn::ack::ACK_FLUSH_WITHIN,
        };
        let meta = SessionMeta {
            agent: "assistant".into(),
            session: "s1".into(),
            user: "u1".into(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
            next_seq: 0,
            log_seq: 0,
            handoffs: Vec::new(),
            set_aside: Vec::new(),
        };
        Self {
            env,
            db,
            ports,
            meta,
            task: TaskState::default(),
            log: Vec::new(),
            _dir: dir,
        }
    }

    /// A session whose store writes through the replicated `log` (as with `--bus nats://`).
    pub(crate) fn on_log(
        ports: FakePorts,
        log: Arc<dyn crate::store::replica::SessionLog>,
    ) -> Self {
        Self::on_log_with(ports, log, Config::embedded().unwrap())
    }

    /// [`Self::on_log`] with `config`.
    pub(crate) fn on_log_with(
        ports: FakePorts,
        log: Arc<dyn crate::store::replica::SessionLog>,
        config: Config,
    ) -> Self {
        let mut s = Self::with_config(ports, config);
        s.env.store = s.env.store.clone().with_log(log);
        s
    }

    /// Accept `text` (as the router would hand it over) and run the turn.
    pub(crate) async fn say(&mut self, text: &str) -> TurnOutcome {
        self.accept(text).await;
        self.resume().await
    }

    /// Accept `text` and store it, without running the turn.
    pub(crate) async fn accept(&mut self, text: &str) {
        let message = self.message(text);
        self.accept_message(&message).await;
    }

    /// `text` from the session's user, as the router hands it over.
    pub(crate) fn message(&self, text: &str) -> Inbound<UserMessage> {
        Inbound {
            envelope: Envelope::request(UserMessage::text(text)),
            user: self.meta.user.clone(),
            reply: Some("_INBOX.test".into()),
        }
    }

    /// Accept `message` and store it, without running the turn.
    pub(crate) async fn accept_message(&mut self, message: &Inbound<UserMessage>) {
        let stored = inbound::accept(&self.env, &mut self.meta, &mut self.task, message)
            .await
            .stored()
            .expect("accepted");
        self.log.push(stored);
    }

    /// Run the turn in progress from where its state stands, as after a start.
    pub(crate) async fn resume(&mut self) -> TurnOutcome {
        self.resume_knowing(Awaited::AskAll).await
    }

    /// Run the waiting turn as a live session actor does when it heard one job's end.
    pub(crate) async fn resume_heard(&mut self) -> TurnOutcome {
        self.resume_knowing(Awaited::Heard).await
    }

    async fn resume_knowing(&mut self, awaited: Awaited) -> TurnOutcome {
        let log = Arc::new(self.log.clone());
        let outcome = run_turn(&self.env, &mut self.meta, &mut self.task, log, awaited).await;
        self.log.extend(outcome.messages.iter().cloned());
        outcome
    }

    pub(crate) async fn decide(&mut self, approve: bool) -> bool {
        let decision = Inbound {
            envelope: Envelope::request(Confirmation {
                approve,
                call_id: None,
                content: None,
            }),
            user: self.meta.user.clone(),
            reply: None,
        };
        inbound::decide(&self.env, &mut self.meta, &mut self.task, &decision).await
    }

    /// Reload the session from the store, as a restarted process would.
    pub(crate) fn reload(&mut self) {
        let (meta, log, task) = self
            .env
            .store
            .load(&self.meta.agent, &self.meta.session)
            .unwrap();
        self.meta = meta.unwrap();
        self.log = log;
        self.task = task;
    }

    pub(crate) fn phase(&self) -> TurnPhase {
        self.task.turn.as_ref().map(|t| t.phase).unwrap()
    }

    pub(crate) fn answer(&self) -> Option<String> {
        self.ports.seen().events.iter().rev().find_map(|e| match e {
            TurnEvent::Answer { text, .. } => Some(text.clone()),
            _ => None,
        })
    }
}

pub(crate) fn tool(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: format!("{name} things"),
        input_schema: json!({"type": "object"}),
        timeout_secs: 30,
        mode: ToolMode::Sync,
        effect: ToolEffect::Read,
        risk: ToolRisk::Low,
        scenes: Vec::new(),
        source: Default::default(),
    }
}

pub(crate) fn calls(name: &str, arguments: serde_json::Value) -> PlanReply {
    PlanReply {
        text: String::new(),
        tool_calls: vec![ToolCall {
            id: format!("call-{name}"),
            name: name.into(),
            arguments,
        }],
        usage: None,
        model: "fake".into(),
        parts: Vec::new(),
        reasoning: String::new(),
    }
}

pub(crate) fn says(text: &str) -> PlanReply {
    PlanReply {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: None,
        model: "fake".into(),
        parts: Vec::new(),
        reasoning: String::new(),
    }
}

pub(crate) fn last_is_user(request: &PlanRequest) -> bool {
    request
        .messages
        .last()
        .is_some_and(|m| m.role == Role::User)
}

/// A planner that calls `name` once, then answers with what the tool said.
pub(crate) fn call_then_answer(name: &'static str) -> FakePorts {
    FakePorts::new(move |r| {
        if last_is_user(r) {
            calls(name, json!({"x": 1}))
        } else {
            let result = r
                .messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default();
            says(&format!("done: {result}"))
        }
    })
}

#[tokio::test]
async fn a_tool_loop_answers_and_queues_the_extraction() {
    let ports = call_then_answer("add").tool(tool("add"), |_| Ok(json!({"result": 3})));
    let mut s = Session::new(ports);
    let outcome = s.say("add one and two").await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert!(s.answer().unwrap().contains("result: 3"));
    let seen = s.ports.seen();
    assert_eq!(seen.calls.len(), 1);
    assert_eq!(seen.extractions.len(), 1);
    assert_eq!(seen.extractions[0].transcript.len(), 2);
    assert_eq!(seen.replies.len(), 1, "the message was acknowledged");
    drop(seen);
    assert!(s.task.turn.as_ref().unwrap().extraction_queued);
}

#[tokio::test]
async fn a_sessions_record_is_made_by_its_first_message_and_brought_up_to_date_by_each_answer() {
    let ports = call_then_answer("add").tool(tool("add"), |_| Ok(json!({"result": 3})));
    let mut s = Session::new(ports);
    let on_disk = |s: &Session| s.env.store.meta("assistant", "s1").unwrap();
    s.accept("add one and two").await;
    let created = on_disk(&s).expect("the first message creates the session's record");
    assert_eq!(created.user, "u1");
    s.resume().await;
    assert_eq!(
        on_disk(&s).unwrap().next_seq,
        4,
        "the answer writes the record"
    );

    // A later message only moves the sequence: a process restarted before its answer still
    // counts it, and the turn goes on from there.
    s.accept("add two and three").await;
    s.reload();
    assert_eq!(s.meta.next_seq, 5);
    assert_eq!(s.meta.user, "u1");
    let outcome = s.resume().await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let seqs: Vec<u64> = s.log.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (0..8).collect::<Vec<u64>>());
    assert_eq!(on_disk(&s).unwrap().next_seq, 8);
    assert!(s.task.turn.as_ref().unwrap().extraction_queued);
    s.reload();
    assert!(
        s.task.turn.as_ref().unwrap().extraction_queued,
        "the note is stored"
    );
}

#[tokio::test]
async fn a_decision_sent_again_gets_the_same_acknowledgement_and_runs_nothing_twice() {
    let mut risky = tool("cancel_order");
    risky.risk = ToolRisk::High;
    let ports = call_then_answer("cancel_order").tool(risky, |_| Ok(json!({"cancelled": true})));
    let mut s = Session::new(ports);
    s.say("cancel my order").await;
    let decision = |reply: &str| Inbound {
        envelope: Envelope::request(Confirmation {
            approve: true,
            call_id: None,
            content: None,
        }),
        user: "u1".to_string(),
        reply: Some(reply.to_string()),
    };
    let first = decision("_INBOX.first");
    assert!(inbound::decide(&s.env, &mut s.meta, &mut s.task, &first).await);
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    let mut again = first.clone();
    again.reply = Some("_INBOX.again".into());
    assert!(
        !inbound::decide(&s.env, &mut s.meta, &mut s.task, &again).await,
        "nothing to resume"
    );
    let another = decision("_INBOX.another");
    assert!(!inbound::decide(&s.env, &mut s.meta, &mut s.task, &another).await);
    let seen = s.ports.seen();
    assert_eq!(seen.calls.len(), 1, "the approved call ran once");
    let answer = |inbox: &str| -> serde_json::Value {
        let (_, payload) = seen.replies.iter().find(|(to, _)| to == inbox).unwrap();
        serde_json::from_slice(payload).unwrap()
    };
    let (first, again) = (answer("_INBOX.first"), answer("_INBOX.again"));
    assert_eq!(again["kind"], "confirmation.accepted", "{again}");
    assert_eq!(again["body"], first["body"]);
    assert_eq!(
        answer("_INBOX.another")["kind"],
        "error",
        "a new decision after the turn ended finds nothing to confirm"
    );
}

#[tokio::test]
async fn a_high_risk_call_waits_for_approval_then_runs_confirmed() {
    let mut risky = tool("cancel_order");
    risky.risk = ToolRisk::High;
    let ports =
        call_then_answer("cancel_order").tool(risky, |r| Ok(json!({"cancelled": r.confirmed})));
    let mut s = Session::new(ports);
    s.say("cancel my order").await;
    assert_eq!(s.phase(), TurnPhase::WaitingUser);
    assert!(
        s.ports.seen().calls.is_empty(),
        "nothing runs before the user decides"
    );
    assert!(s.ports.seen().events.iter().any(
        |e| matches!(e, TurnEvent::ConfirmationRequired { name, .. } if name == "cancel_order")
    ));
    assert!(s.decide(true).await);
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    let seen = s.ports.seen();
    assert_eq!(seen.calls.len(), 1);
    assert!(
        seen.calls[0].0.confirmed,
        "an approved call goes out confirmed"
    );
}

#[tokio::test]
async fn a_declined_call_never_runs_and_the_model_hears_why() {
    let mut risky = tool("cancel_order");
    risky.risk = ToolRisk::High;
    let ports = call_then_answer("cancel_order").tool(risky, |_| Ok(json!({})));
    let mut s = Session::new(ports);
    s.say("cancel my order").await;
    assert!(s.decide(false).await);
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert!(s.ports.seen().calls.is_empty());
    assert!(s.answer().unwrap().contains("declined_by_user"));
}

#[tokio::test]
async fn an_async_job_pauses_the_turn_until_its_completion_wakes_it() {
    let mut report = tool("generate_report");
    report.mode = ToolMode::Async;
    let ports = call_then_answer("generate_report").tool(report, |_| {
        Ok(json!({"job_id": "job-7", "status": "submitted"}))
    });
    let mut s = Session::new(ports);
    s.say("write the report").await;
    assert_eq!(s.phase(), TurnPhase::WaitingJob);
    assert!(s
        .ports
        .seen()
        .events
        .iter()
        .any(|e| matches!(e, TurnEvent::JobWaiting { job_id, .. } if job_id == "job-7")));
    // The job's final event, as the session actor records it.
    let event = crate::protocol::JobEvent {
        job_id: "job-7".into(),
        tool: "generate_report".into(),
        call_id: "call-generate_report".into(),
        agent: None,
        session: None,
        user: None,
        turn_id: None,
        status: crate::tools::jobs::JobStatus::Done,
        progress: None,
        result: Some(json!({"pages": 12})),
        error: None,
    };
    let turn = s.task.unfinished_turn_mut().unwrap();
    let job = turn.jobs.iter_mut().find(|j| j.job_id == "job-7").unwrap();
    let result = super::finished_by(job, &event).unwrap();
    job.result = Some((&result).into());
    s.resume().await;
    assert_eq!(s.phase(), TurnPhase::Answered);
    assert!(s.answer().unwrap().contains("pages"), "{:?}", s.answer());
}

#[tokio::test]
/// The fake names every reply's call `call-lookup`, as Ollama numbers calls per reply: each step
/// is still a new call.
async fn three_failures_of_one_tool_make_the_turn_ask_the_user() {
    let ports = FakePorts::new(|r| {
        if r.messages.iter().filter(|m| m.role == Role::Tool).count() < 5 {
            calls("lookup", json!({"id": "x"}))
        } else {
            says("gave up")
        }
    })
    .tool(tool("lookup"), |_| {
        Err(ToolError::new(ToolErrorCode::ExecutionFailed, "no such id"))
    });
    let mut s = Session::new(ports);
    s.say("find x").await;
    assert_eq!(
        s.ports.seen().calls.len(),
        3,
        "the guard stops the fourth try"
    );
    assert!(s.answer().unwrap().contains("failed each time"));
}

#[tokio::test]
async fn each_tool_is_waited_for_its_own_timeout_plus_a_margin() {
    let mut slow = tool("slow_worker");
    slow.timeout_secs = 120;
    let ports = call_then_answer("slow_worker").tool(slow, |_| Ok(json!({"ok": true})));
    let mut s = Session::new(ports);
    s.say("run it").await;
    let seen = s.ports.seen();
    assert_eq!(seen.calls[0].1, Duration::from_secs(125));
}

#[actix_rt::test]
async fn an_agent_with_an_empty_tool_list_is_shown_no_tool_at_all() {
    let ports = FakePorts::new(|_| says("ok"))
        .tool(tool("order_lookup"), |_| Ok(json!({})))
        .tool(tool("session_search"), |_| Ok(json!({})));
    let mut config = Config::embedded().unwrap();
    config.agents.get_mut("assistant").unwrap().tools = Some(Vec::new());
    let mut s = Session::with_config(ports, config);
    s.say("where is my order").await;
    assert!(s.ports.seen().plans[0].tools.is_empty());
}

#[actix_rt::test]
async fn an_agents_tool_list_names_what_it_sees_with_session_search() {
    let ports = FakePorts::new(|_| says("ok"))
        .tool(tool("order_lookup"), |_| Ok(json!({})))
        .tool(tool("add"), |_| Ok(json!({})))
        .tool(tool("session_search"), |_| Ok(json!({})));
    let mut config = Config::embedded().unwrap();
    config.agents.get_mut("assistant").unwrap().tools = Some(vec!["add".into()]);
    let mut s = Session::with_config(ports, config);
    s.say("what is 1 + 1").await;
    let seen = s.ports.seen();
    let mut names: Vec<&str> = seen.plans[0]
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["add", "session_search"]);
}

#[tokio::test]
async fn an_agents_scene_limits_the_tools_the_model_sees() {
    let mut shop = tool("order_lookup");
    shop.scenes = vec!["shop".into()];
    let mut math = tool("add");
    math.scenes = vec!["math".into()];
    let ports = FakePorts::new(|_| says("ok"))
        .tool(shop, |_| Ok(json!({})))
        .tool(math, |_| Ok(json!({})));
    let mut config = Config::embedded().unwrap();
    config.agents.get_mut("assistant").unwrap().scene = Some("shop".into());
    let mut s = Session::with_config(ports, config);
    s.say("where is my order").await;
    let seen = s.ports.seen();
    let names: Vec<&str> = seen.plans[0]
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, vec!["order_lookup"]);
}

#[test]
fn a_cancellation_reads_cancelled_once_whatever_its_reason_says() {
    let child = super::TurnError::Cancelled("cancelled with hermes send --cancel".into());
    assert_eq!(child.to_string(), "cancelled with hermes send --cancel");
    let bare = super::TurnError::Cancelled("the budget ran out".into());
    assert_eq!(bare.to_string(), "cancelled: the budget ran out");
}
