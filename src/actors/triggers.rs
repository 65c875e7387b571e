//! Triggers: events on any NATS subject become agent turns (`[[triggers]]`).
//!
//! The trigger subjects are captured durably ([`crate::bus::Bus::capture`]: on NATS a
//! JetStream work-queue stream, so an event published while Hermes is down is handled when it
//! starts, and a repeated `Nats-Msg-Id` is dropped). For each event the matching trigger's
//! templates build the session, the user and the prompt; the message goes to
//! `hermes.in.<agent>.<session>` like any user message and the event is acknowledged once the
//! session stored it. Its id is derived from the event's deduplication key, so a session
//! recognises an event it already took. The answer is published on the trigger's
//! `reply_subject` as well as on the session's `hermes.out…`.
//!
//! An event that does not fit (a missing field, an invalid id, a refused message) is audited on
//! `hermes.audit.trigger` and acknowledged: it is never retried forever and never stops the
//! service. A session busy with another turn gets the event again a little later.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tracing::Instrument;

use crate::bus::retry::{self, Repeat};
use crate::bus::rpc::RpcError;
use crate::bus::{pattern, BusError, CaptureOptions, DurableMessage, DurableOptions, SharedBus};
use crate::config::publishers::Publisher;
use crate::config::triggers::{RenderError, Template};
use crate::config::{Config, TriggerConfig};
use crate::protocol::envelope::{Envelope, EnvelopeError};
use crate::protocol::refusal::Refusal;
use crate::protocol::{subjects, UserMessage};
use crate::telemetry::spans;

/// The durable queue the trigger subjects are captured into (stream `HERMES_TRIGGERS`).
pub const CAPTURE: &str = "hermes.triggers";
/// A repeated `Nats-Msg-Id` within this window never arrives twice.
const DEDUPE_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// When a session is busy with another turn, the event comes back after this long.
const BUSY_RETRY: Duration = Duration::from_secs(3);
/// Deliveries of one event before it is given up (with a warning): ten minutes of retries.
const MAX_DELIVER: u64 = 200;

/// One trigger with its templates parsed.
struct Compiled {
    config: TriggerConfig,
    session: Template,
    user: Template,
    prompt: Template,
    dedupe: Option<Template>,
    reply: Option<Template>,
}

/// The trigger service of one process.
pub struct Triggers {
    bus: SharedBus,
    config: Arc<Config>,
    triggers: Vec<Compiled>,
}

/// What became of one event.
#[derive(Debug, PartialEq, Eq)]
enum Handled {
    /// The session stored the message.
    Accepted,
    /// Refused for good (audited).
    Refused(String),
    /// Not now: deliver it again later.
    Later(String),
}

impl Triggers {
    /// The configured triggers; `None` when there are none.
    pub fn new(bus: SharedBus, config: Arc<Config>) -> Option<Self> {
        let triggers: Vec<Compiled> = config
            .triggers
            .iter()
            .filter_map(|t| {
                // The configuration was checked at load: these parse.
                let parse = |text: &str| Template::parse(text).ok();
                Some(Compiled {
                    session: parse(&t.session)?,
                    user: parse(&t.user)?,
                    prompt: parse(&t.prompt)?,
                    dedupe: t.dedupe.as_deref().and_then(parse),
                    reply: t.reply_subject.as_deref().and_then(parse),
                    config: t.clone(),
                })
            })
            .collect();
        (!triggers.is_empty()).then_some(Self {
            bus,
            config,
            triggers,
        })
    }

    /// Capture the trigger subjects and handle their events until the bus closes. Call on
    /// the I/O runtime.
    pub async fn run(self) -> Result<tokio::task::JoinHandle<()>, BusError> {
        let subjects: Vec<String> = self
            .triggers
            .iter()
            .map(|t| t.config.subject.clone())
            .collect();
        let options = CaptureOptions {
            durable: DurableOptions {
                ack_wait: Duration::from_secs(self.config.engine.request_timeout_secs * 3),
                // A session busy with a long turn gets the event again every few seconds
                // for up to ten minutes.
                max_deliver: MAX_DELIVER,
                ..Default::default()
            },
            dedupe_window: DEDUPE_WINDOW,
        };
        let mut events = self.bus.capture(CAPTURE, &subjects, options).await?;
        tracing::info!(subjects = ?subjects, "triggers listening");
        Ok(tokio::spawn(async move {
            while let Some(item) = events.next().await {
                match item {
                    Ok(event) => {
                        // An event published with a trace context starts its turn in that
                        // trace.
                        let span = spans::process_message(CAPTURE, event.traceparent.as_deref());
                        self.settle(event).instrument(span).await
                    }
                    Err(e) => tracing::warn!(error = %e, "trigger event not readable"),
                }
            }
        }))
    }

    async fn settle(&self, event: DurableMessage) {
        let subject = event.subject.clone().unwrap_or_default();
        let settled = match self.handle(&event).await {
            Handled::Accepted => event.ack().await,
            Handled::Later(reason) => {
                tracing::info!(subject, reason, "trigger event handled later");
                event.nak(Some(BUSY_RETRY)).await
            }
            Handled::Refused(reason) => {
                tracing::warn!(subject, reason, "trigger event refused");
                self.audit(&event, &reason).await;
                event.ack().await
            }
        };
        if let Err(e) = settled {
            tracing::warn!(subject, error = %e, "trigger event not settled; it comes again");
        }
    }

    async fn handle(&self, event: &DurableMessage) -> Handled {
        let subject = event.subject.as_deref().unwrap_or_default();
        let Some(trigger) = self
            .triggers
            .iter()
            .find(|t| pattern::matches(&t.config.subject, subject))
        else {
            return Handled::Refused(format!("no trigger matches `{subject}`"));
        };
        let envelope = match message(trigger, event, &self.config) {
            Ok(envelope) => envelope,
            Err(reason) => return Handled::Refused(reason),
        };
        let timeout = Duration::from_secs(self.config.engine.request_timeout_secs);
        match retry::request(self.bus.as_ref(), envelope, timeout, Repeat::OnSilence).await {
            Ok(_) => Handled::Accepted,
            Err(e) => handled(e),
        }
    }

    async fn audit(&self, event: &DurableMessage, reason: &str) {
        let record = Envelope::new(
            "audit.trigger",
            json!({
                "subject": event.subject,
                "msg_id": event.msg_id,
                "bytes": event.payload.len(),
                "error": reason,
            }),
        );
        if let (Ok(subject), Ok(bytes)) = (subjects::audit("trigger"), record.encode()) {
            if let Err(e) = self.bus.publish(&subject, bytes).await {
                tracing::warn!(error = %e, "trigger audit record not published");
            }
        }
    }
}

/// What a session's refusal (or the bus's failure) means for the event: a session busy with
/// a turn or a bus that did not deliver gets it again later; anything else refused it.
fn handled(error: RpcError) -> Handled {
    match error {
        RpcError::Envelope(EnvelopeError::Answered { code, message, .. })
            if Refusal::from_code(&code).is_some_and(Refusal::until_the_turn_ends) =>
        {
            Handled::Later(format!("{code}: {message}"))
        }
        RpcError::Bus(e) => Handled::Later(e.to_string()),
        e => Handled::Refused(format!("the session refused the event: {e}")),
    }
}

/// The user message an event becomes under `trigger`, or why it cannot become one (a user
/// the trigger's publisher may not speak for among the reasons).
fn message(
    trigger: &Compiled,
    event: &DurableMessage,
    config: &Config,
) -> Result<Envelope<UserMessage>, String> {
    let max_chars = config.engine.max_message_chars;
    let subject = event.subject.as_deref().unwrap_or_default();
    let payload: Option<Value> = serde_json::from_slice(&event.payload).ok();
    let name = &trigger.config.name;
    let render = |what: &str, template: &Template| {
        template
            .render(subject, payload.as_ref())
            .map_err(|e: RenderError| format!("trigger `{name}`: the {what} template: {e}"))
    };
    let session = render("session", &trigger.session)?;
    subjects::check_id("session", &session).map_err(|e| format!("trigger `{name}`: {e}"))?;
    let user = render("user", &trigger.user)?;
    if user.trim().is_empty() || user.chars().count() > subjects::MAX_ID_LEN {
        return Err(format!(
            "trigger `{name}`: the user `{user}` is empty or longer than {} characters",
            subjects::MAX_ID_LEN
        ));
    }
    if let Some(publisher) = &trigger.config.publisher {
        Publisher::of(&config.bus.publishers, publisher)
            .check_user(&user)
            .map_err(|e| format!("trigger `{name}`: {} ({e})", e.code()))?;
    }
    let prompt = render("prompt", &trigger.prompt)?;
    if prompt.trim().is_empty() || prompt.chars().count() > max_chars {
        return Err(format!(
            "trigger `{name}`: the prompt is empty or longer than {max_chars} characters \
             (engine.max_message_chars)"
        ));
    }
    let answer_to = match &trigger.reply {
        Some(t) => {
            let to = render("reply_subject", t)?;
            pattern::validate(&to, false)
                .map_err(|e| format!("trigger `{name}`: reply subject `{to}`: {e}"))?;
            Some(to)
        }
        None => None,
    };
    let key = match &trigger.dedupe {
        Some(t) => Some(render("dedupe", t)?),
        None => event.msg_id.clone(),
    };
    let body = UserMessage {
        answer_to,
        trigger: Some(name.clone()),
        ..UserMessage::text(prompt)
    };
    let mut envelope =
        Envelope::request(body).for_session(&trigger.config.agent, &session, Some(&user));
    if let Some(key) = key {
        // The same event always becomes the same message: its session takes it once.
        let id = uuid::Uuid::new_v5(
            &uuid::Uuid::NAMESPACE_OID,
            format!("{name}\0{key}").as_bytes(),
        );
        envelope.id = id.to_string();
    }
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_busy_with_a_turn_gets_the_event_later_and_other_refusals_refuse_it() {
        let answered = |refusal: Refusal| {
            handled(RpcError::Envelope(EnvelopeError::Answered {
                kind: "user.accepted".into(),
                code: refusal.code().into(),
                message: "m".into(),
            }))
        };
        for busy in [
            Refusal::Busy,
            Refusal::AwaitingJob,
            Refusal::AwaitingConfirmation,
        ] {
            assert!(matches!(answered(busy), Handled::Later(_)), "{busy:?}");
        }
        assert!(matches!(answered(Refusal::WrongUser), Handled::Refused(_)));
    }

    struct NoAck;

    #[async_trait::async_trait]
    impl crate::bus::Acker for NoAck {
        async fn ack(&self) -> Result<(), BusError> {
            Ok(())
        }
        async fn nak(&self, _: Option<Duration>) -> Result<(), BusError> {
            Ok(())
        }
        async fn in_progress(&self) -> Result<(), BusError> {
            Ok(())
        }
    }

    fn compiled(dedupe: Option<&str>) -> Compiled {
        let config = TriggerConfig {
            name: "late".into(),
            subject: "shop.orders.*.delayed".into(),
            agent: "assistant".into(),
            session: "order-{subject.2}".into(),
            user: "{payload.user}".into(),
            prompt: "Order {subject.2} is {payload.days} days late".into(),
            dedupe: dedupe.map(str::to_string),
            reply_subject: Some("shop.orders.{subject.2}.reply".into()),
            publisher: None,
        };
        Compiled {
            session: Template::parse(&config.session).unwrap(),
            user: Template::parse(&config.user).unwrap(),
            prompt: Template::parse(&config.prompt).unwrap(),
            dedupe: config
                .dedupe
                .as_deref()
                .map(|t| Template::parse(t).unwrap()),
            reply: Some(Template::parse(config.reply_subject.as_deref().unwrap()).unwrap()),
            config,
        }
    }

    fn config(max_message_chars: usize) -> Config {
        let mut config = Config::load(None).unwrap();
        config.engine.max_message_chars = max_message_chars;
        config
    }

    fn event(payload: &str, msg_id: Option<&str>) -> DurableMessage {
        DurableMessage::new(payload.as_bytes().to_vec().into(), 1, Box::new(NoAck))
            .with_origin("shop.orders.A1.delayed".into(), msg_id.map(str::to_string))
    }

    #[test]
    fn an_event_becomes_a_message_of_its_session_and_user() {
        let e = message(
            &compiled(None),
            &event(r#"{"user":"u-1","days":2}"#, Some("m1")),
            &config(1000),
        )
        .unwrap();
        assert_eq!(e.agent.as_deref(), Some("assistant"));
        assert_eq!(e.session.as_deref(), Some("order-A1"));
        assert_eq!(e.user.as_deref(), Some("u-1"));
        assert_eq!(e.body.text, "Order A1 is 2 days late");
        assert_eq!(e.body.answer_to.as_deref(), Some("shop.orders.A1.reply"));
        let again = message(
            &compiled(None),
            &event(r#"{"user":"u-1","days":2}"#, Some("m1")),
            &config(1000),
        )
        .unwrap();
        assert_eq!(e.id, again.id, "one event id, one message id");
    }

    #[test]
    fn a_payload_field_can_be_the_deduplication_key() {
        let t = compiled(Some("{payload.event_id}"));
        let a = message(
            &t,
            &event(r#"{"user":"u","days":1,"event_id":"e9"}"#, None),
            &config(1000),
        )
        .unwrap();
        let b = message(
            &t,
            &event(r#"{"user":"u","days":3,"event_id":"e9"}"#, None),
            &config(1000),
        )
        .unwrap();
        assert_eq!(a.id, b.id);
    }

    #[test]
    fn an_event_that_does_not_fit_is_refused_with_the_reason() {
        let t = compiled(None);
        let err = message(&t, &event("not json", None), &config(1000)).unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
        let err = message(&t, &event(r#"{"days":1}"#, None), &config(1000)).unwrap_err();
        assert!(err.contains("no field `user`"), "{err}");
        let err = message(&t, &event(r#"{"user":"u","days":1}"#, None), &config(5)).unwrap_err();
        assert!(err.contains("max_message_chars"), "{err}");
    }

    #[test]
    fn an_event_naming_a_user_its_publisher_may_not_speak_for_is_refused() {
        let mut t = compiled(None);
        t.config.publisher = Some("shop".into());
        let mut config = config(1000);
        config.bus.publishers.insert(
            "shop".into(),
            crate::config::publishers::PublisherConfig {
                users: Some(vec!["cust-*".into()]),
                internal: false,
            },
        );
        let ok = message(&t, &event(r#"{"user":"cust-7","days":1}"#, None), &config);
        assert_eq!(ok.unwrap().user.as_deref(), Some("cust-7"));
        let err = message(&t, &event(r#"{"user":"u-1001","days":1}"#, None), &config).unwrap_err();
        assert!(err.contains("user_not_allowed"), "{err}");
        assert!(
            err.contains("`u-1001`") && err.contains("[bus.publishers.shop]"),
            "{err}"
        );
    }
}
