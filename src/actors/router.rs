//! The session router: the registry of live Session actors and the two bus services that feed
//! them — every inbound message (`hermes.in.>`, queue `session`: user messages and
//! confirmations) and async jobs' final events (`hermes.job.*`, queue `session`), which wake the
//! session whose turn waits on that job.
//!
//! The services run where a message arrives (in the publisher's task on the embedded bus): they
//! check the message and hand it straight to the session's mailbox. Session actors are spread
//! over `engine.session_arbiters` arbiters by a stable hash of `<agent>.<session>`, started (and
//! reloaded from sled) on demand and stopped after `engine.session_idle_secs` idle.
//!
//! On a partitioned deployment (NATS, [`crate::bus::cluster`]) the two services are the
//! gateway: a checked message or job event is stored in its session's partition inbox, and
//! the router runs the sessions of the partitions the cluster gives this process, from their
//! inbox items ([`SessionRouter::serve`]). A session's messages thus reach one process at a
//! time, in order, and move with its partition when that process dies.
//!
//! Bad input — malformed or oversized envelopes, invalid ids, unknown agents, empty or
//! too-long texts — is answered with an error (reply and `error` event) and audited on
//! `hermes.audit.bad_input`; it never reaches a session and never stops an actor. A message
//! its publisher may not send (`hermes.in.<agent>.<session>.<publisher>` naming a user that
//! publisher may not speak for, see [`binding`]) is refused the same way and audited on
//! `hermes.audit.bus_denied`.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use actix::prelude::*;
use async_trait::async_trait;
use bytes::Bytes;

use super::session::{CancelTurn, Decide, Deliver, JobFinished, Retire, SessionActor, Wake};
use super::settle::Settle;
use crate::bus::cluster::{Cluster, OwnedItem};
use crate::bus::{BusError, Handler, Message as BusMessage, Serving, SharedBus};
use crate::protocol::envelope::{error_envelope, Envelope};
use crate::protocol::subjects;
use crate::protocol::JobEvent;
use crate::turn::inbound::Inbound;
use crate::turn::TurnEnv;

mod binding;
mod check;

use check::{refuse, Arrival, Checked};

/// A session's key: agent and session id.
pub type SessionKey = (String, String);

/// A live session actor and what the router knows of its work.
struct Live {
    addr: Addr<SessionActor>,
    /// Its turn's cancel flag: set the moment a `user.cancel` arrives, so a running turn
    /// stops at its next step instead of after its last.
    cancel: Arc<AtomicBool>,
    /// Messages delivered (or a resume started) whose turn has not reported done.
    in_flight: usize,
    last_active: Instant,
}

/// The registry of live session actors; clones share it.
#[derive(Clone)]
pub struct SessionRouter {
    inner: Arc<Inner>,
}

struct Inner {
    env: TurnEnv,
    bus: SharedBus,
    arbiters: Vec<ArbiterHandle>,
    live: Mutex<HashMap<SessionKey, Live>>,
    /// Session partitions, when sessions are shared by several processes.
    cluster: Option<Arc<dyn Cluster>>,
}

/// How often idle session actors are looked for.
const EVICT_EVERY: Duration = Duration::from_secs(5);

impl SessionRouter {
    /// A router placing session actors on `arbiters` (at least one).
    /// Sessions are partitioned when the bus has a cluster and the store replicates to it.
    pub fn new(env: TurnEnv, bus: SharedBus, arbiters: Vec<ArbiterHandle>) -> Self {
        let cluster = bus.cluster().filter(|_| env.store.is_replicated());
        Self {
            inner: Arc::new(Inner {
                env,
                bus,
                arbiters,
                live: Mutex::new(HashMap::new()),
                cluster,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<SessionKey, Live>> {
        // Every update is one insert/remove/field write: a poisoned lock is still consistent.
        self.inner.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serve `hermes.in.>` and `hermes.job.*` (queue `session`), evict idle actors, and resume
    /// the turns a crash interrupted. Call on a tokio runtime (the I/O runtime).
    pub async fn serve(&self, bus: &SharedBus) -> Result<Vec<Serving>, BusError> {
        let group = subjects::groups::SESSION;
        let serving = vec![
            bus.serve(
                subjects::INBOUND_ALL,
                group,
                Arc::new(InboundService(self.clone())),
            )
            .await?,
            bus.serve(subjects::JOB_ALL, group, Arc::new(JobEvents(self.clone())))
                .await?,
        ];
        let router = self.clone();
        let idle = Duration::from_secs(self.inner.env.config.engine.session_idle_secs);
        let every = EVICT_EVERY.min(idle / 2).max(Duration::from_millis(100));
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                if weak.strong_count() == 0 {
                    return;
                }
                router.evict_idle();
            }
        });
        match &self.inner.cluster {
            // The turns a dead owner left are items it never settled: they come back.
            Some(cluster) => {
                self.own_partitions(cluster.clone()).await?;
                let router = self.clone();
                tokio::spawn(async move { router.heal_cached().await });
            }
            None => self.resume_interrupted().await,
        }
        Ok(serving)
    }

    /// Re-seed the replicated logs this process' cache is ahead of (see
    /// [`crate::store::sessions::SessionStore::heal_cached`]) and resume the turns of those
    /// sessions: their inbox items went with the old JetStream store. Another owner's actor
    /// for one of them would be fenced by its log, so a session never forks.
    async fn heal_cached(&self) {
        match self.inner.env.store.heal_cached().await {
            Ok(keys) => {
                for (agent, session, waits_for_job) in keys {
                    tracing::warn!(%agent, %session, "session's log was re-seeded from this process' cache and has a turn to finish; resuming it here");
                    // A turn waiting for a job looks at the job again: its final event may
                    // have gone with the old store.
                    self.with_actor((agent, session), |addr| {
                        if waits_for_job {
                            addr.do_send(Wake);
                        }
                    });
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "could not check the cached sessions against the replicated log; each is checked when its next message comes")
            }
        }
    }

    /// Run the sessions of the partitions the cluster gives this process.
    async fn own_partitions(&self, cluster: Arc<dyn Cluster>) -> Result<(), BusError> {
        let mut items = cluster.own_partitions().await?;
        let ack_wait = cluster.options().ack_wait;
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            // Dropping `items` when the router is gone stops the pulls (and hands this
            // process's partitions on) even when no item arrives any more.
            let mut alive = tokio::time::interval(Duration::from_millis(500));
            loop {
                let item = tokio::select! {
                    item = items.next() => item,
                    _ = alive.tick() => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        continue;
                    }
                };
                let Some(item) = item else { return };
                let Some(inner) = weak.upgrade() else { return };
                let router = SessionRouter { inner };
                match item {
                    Ok(item) => router.take(item, ack_wait).await,
                    Err(e) => tracing::warn!(error = %e, "unreadable session inbox item skipped"),
                }
            }
        });
        Ok(())
    }

    /// Hand one inbox item to its session. The envelope is decoded once, here.
    async fn take(&self, item: OwnedItem, ack_wait: Duration) {
        let settle = Settle::new(item.acker.clone(), ack_wait, item.delivery)
            .stored_ago(item.age)
            .at(item.seq);
        let max = self.inner.env.config.engine.max_envelope_bytes;
        let raw = match Envelope::decode(&item.payload, max) {
            Ok(raw) => raw,
            Err(e) => {
                tracing::warn!(agent = %item.agent, session = %item.session, error = %e, "unreadable session inbox item dropped");
                settle.ack();
                return;
            }
        };
        if raw.kind.starts_with("job.") {
            match JobEvent::from_envelope(raw) {
                Ok(event) => {
                    let event = event.body;
                    self.with_actor((item.agent, item.session), |addr| {
                        addr.do_send(JobFinished {
                            event,
                            settle: Some(settle),
                        })
                    });
                }
                Err(e) => {
                    tracing::warn!(agent = %item.agent, session = %item.session, error = %e, "unreadable job event in a session inbox dropped");
                    settle.ack();
                }
            }
            return;
        }
        match check::check_envelope(
            &self.inner.env.config,
            item.agent.clone(),
            item.session.clone(),
            raw,
        ) {
            Ok(checked) => self.deliver(
                checked,
                item.reply,
                Some(settle),
                item.delivery > 1 || item.repeat,
                item.traceparent,
            ),
            Err(refusal) => {
                // Checked at the gateway; the configuration changed since (an agent removed).
                settle.ack();
                if let Ok(subject) = subjects::inbound(&item.agent, &item.session) {
                    let message = BusMessage::new(subject, item.reply, item.payload);
                    refuse(&self.inner.bus, &message, &refusal).await;
                }
            }
        }
    }

    /// Give a checked message to its session's actor; `traceparent` is the context of the span
    /// that received it (the turn's span continues that trace).
    fn deliver(
        &self,
        checked: Checked,
        reply: Option<String>,
        settle: Option<Settle>,
        redelivered: bool,
        traceparent: Option<String>,
    ) {
        let user = checked.user;
        if matches!(checked.arrival, Arrival::Cancel(_)) {
            if let Some(live) = self.lock().get(&checked.key) {
                live.cancel.store(true, Ordering::Release);
            }
        }
        self.with_actor(checked.key, |addr| match checked.arrival {
            Arrival::Message(envelope) => addr.do_send(Deliver {
                inbound: Inbound {
                    envelope,
                    user,
                    reply,
                },
                settle,
                redelivered,
                traceparent,
            }),
            Arrival::Confirmation(envelope) => addr.do_send(Decide {
                inbound: Inbound {
                    envelope,
                    user,
                    reply,
                },
                settle,
            }),
            Arrival::Cancel(envelope) => addr.do_send(CancelTurn {
                inbound: Inbound {
                    envelope,
                    user,
                    reply,
                },
                settle,
            }),
        });
    }

    /// Start the actors of sessions whose turn a crash interrupted; each resumes its turn.
    async fn resume_interrupted(&self) {
        let store = self.inner.env.store.clone();
        match tokio::task::spawn_blocking(move || store.unfinished()).await {
            Ok(Ok(keys)) => {
                for key in keys {
                    tracing::info!(agent = %key.0, session = %key.1, "session has an interrupted turn; resuming");
                    self.with_actor(key, |_| ());
                }
            }
            Ok(Err(e)) => tracing::error!(error = %e, "cannot look for interrupted turns"),
            Err(e) => tracing::error!(error = %e, "interrupted-turn scan crashed"),
        }
    }

    /// Run `f` with the live actor of `key` (started and reloaded from sled if needed) and
    /// count one more message in flight for it.
    fn with_actor<T>(&self, key: SessionKey, f: impl FnOnce(&Addr<SessionActor>) -> T) -> T {
        let mut live = self.lock();
        let before = live.len();
        let entry = live.entry(key.clone()).or_insert_with(|| {
            let (addr, cancel) = self.start_actor(&key);
            crate::telemetry::metrics::sessions_live(before + 1);
            Live {
                addr,
                cancel,
                in_flight: 0,
                last_active: Instant::now(),
            }
        });
        if !entry.addr.connected() {
            (entry.addr, entry.cancel) = self.start_actor(&key);
            entry.in_flight = 0;
        }
        entry.in_flight += 1;
        entry.last_active = Instant::now();
        f(&entry.addr)
    }

    fn start_actor(&self, key: &SessionKey) -> (Addr<SessionActor>, Arc<AtomicBool>) {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let arbiters = &self.inner.arbiters;
        let arbiter = &arbiters[(hasher.finish() as usize) % arbiters.len().max(1)];
        let env = self.inner.env.for_one_session();
        let cancel = env.cancel.clone();
        let actor = SessionActor::new(env, key.0.clone(), key.1.clone(), self.clone());
        (SessionActor::start_in_arbiter(arbiter, |_| actor), cancel)
    }

    /// Look at `key`'s waiting turn again at `at` (a delegated agent's deadline), starting its
    /// actor if it went idle.
    pub fn wake_at(&self, key: SessionKey, at: chrono::DateTime<chrono::Utc>) {
        let wait = (at - chrono::Utc::now())
            .to_std()
            .unwrap_or_default()
            .saturating_add(Duration::from_millis(50));
        let weak = Arc::downgrade(&self.inner);
        actix::spawn(async move {
            tokio::time::sleep(wait).await;
            let Some(inner) = weak.upgrade() else { return };
            let router = SessionRouter { inner };
            router.with_actor(key, |addr| addr.do_send(Wake));
        });
    }

    /// A session's turn ended (or its message was refused): it may go idle.
    pub fn done(&self, key: &SessionKey) {
        if let Some(live) = self.lock().get_mut(key) {
            live.in_flight = live.in_flight.saturating_sub(1);
            live.last_active = Instant::now();
        }
    }

    /// Session actors in memory now.
    pub fn live(&self) -> usize {
        self.lock().len()
    }

    /// Stop actors that have been idle longer than `engine.session_idle_secs`.
    fn evict_idle(&self) {
        let idle = Duration::from_secs(self.inner.env.config.engine.session_idle_secs);
        let mut live = self.lock();
        live.retain(|_, live| {
            let keep = live.in_flight > 0 || live.last_active.elapsed() < idle;
            if !keep {
                live.addr.do_send(Retire);
            }
            keep
        });
        crate::telemetry::metrics::sessions_live(live.len());
    }
}

/// The `hermes.in.>` service.
struct InboundService(SessionRouter);

#[async_trait]
impl Handler for InboundService {
    /// A checked message goes to its session's mailbox; the actor acknowledges it once it is
    /// persisted. A refused one is answered here.
    async fn handle(&self, msg: BusMessage) -> Option<Bytes> {
        let router = &self.0;
        match check::check(&router.inner.env.config, &msg) {
            Ok(checked) => match &router.inner.cluster {
                Some(cluster) => {
                    let (agent, session) = &checked.key;
                    let id = checked.envelope_id();
                    match cluster
                        .enqueue(
                            agent,
                            session,
                            msg.payload.clone(),
                            msg.reply.as_deref(),
                            id,
                        )
                        .await
                    {
                        Ok(()) => None,
                        Err(e) => {
                            tracing::error!(agent, session, error = %e, "inbound message not stored in its partition inbox");
                            error_envelope(
                                "unavailable",
                                format!("message not stored: {e}; send it again"),
                            )
                            .encode()
                            .ok()
                        }
                    }
                }
                None => {
                    let traceparent = crate::telemetry::trace_context::current();
                    router.deliver(checked, msg.reply, None, false, traceparent);
                    None
                }
            },
            Err(refusal) => {
                tracing::warn!(subject = %msg.subject, code = refusal.code, error = %refusal.message, "inbound message refused");
                refuse(&router.inner.bus, &msg, &refusal).await
            }
        }
    }
}

/// The `hermes.job.*` service: a job's final event wakes the session whose turn waits on it.
struct JobEvents(SessionRouter);

#[async_trait]
impl Handler for JobEvents {
    async fn handle(&self, msg: BusMessage) -> Option<Bytes> {
        let router = &self.0;
        let max = router.inner.env.config.engine.max_envelope_bytes;
        let envelope = match Envelope::decode(&msg.payload, max).and_then(JobEvent::from_envelope) {
            Ok(env) => env,
            Err(e) => {
                tracing::warn!(subject = %msg.subject, error = %e, "unreadable job event ignored");
                return None;
            }
        };
        let event = &envelope.body;
        if !event.status.is_final() || event.turn_id.is_none() {
            return None;
        }
        let (Some(agent), Some(session)) = (event.agent.clone(), event.session.clone()) else {
            return None;
        };
        if router.inner.env.config.agent(&agent).is_err() {
            return None;
        }
        if let Some(cluster) = &router.inner.cluster {
            // Through the session's partition inbox, so the job wakes the owner of the turn.
            let id = envelope.id.clone();
            if let Err(e) = cluster
                .enqueue(&agent, &session, msg.payload.clone(), None, &id)
                .await
            {
                tracing::error!(agent, session, error = %e, "job event not stored in its session's partition inbox; the turn asks for the job's state when it resumes");
            }
            return None;
        }
        let event = envelope.body;
        router.with_actor((agent, session), |addr| {
            addr.do_send(JobFinished {
                event,
                settle: None,
            })
        });
        None
    }
}
