//! A real [`SessionActor`] for a turn harness's session, under a real router: for tests of
//! what the actor adds around the turn.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::SessionActor;
use crate::actors::router::SessionRouter;
use crate::bus::embedded::EmbeddedBus;
use crate::store::durability::{Durable, Mode};
use crate::turn::tests::Session;

/// Start a session actor for `copy`'s session, as a router would: it loads the session from
/// `copy`'s store now. Returns once it has, with the directory of the router's bus.
pub(super) async fn start_actor(copy: &Session) -> (Addr<SessionActor>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Durable::new(crate::store::open(dir.path()).unwrap(), Mode::Sync);
    let bus = Arc::new(EmbeddedBus::open(db).unwrap());
    let env = copy.env.for_one_session();
    let router = SessionRouter::new(env.for_one_session(), bus, vec![Arbiter::current()]);
    let (agent, session) = (copy.meta.agent.clone(), copy.meta.session.clone());
    let actor = SessionActor::new(env, agent, session, router).start();
    // Loading reads an in-memory log or a sled tree: well within this.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (actor, dir)
}
