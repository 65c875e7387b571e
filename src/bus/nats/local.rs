//! Services of this process, answered in-process when this process asks for them.
//!
//! A typed request ([`crate::bus::rpc::request`]) whose exact subject a service of this very
//! process serves goes straight to that handler, as on the embedded bus: no round trip
//! through the server (one hop fewer on the hot path), and nothing to lose in flight when a
//! NATS node restarts. Other processes still share the queue group's load over NATS; a
//! request for a subject served only elsewhere, or by a wildcard service, goes over NATS —
//! but for the session router's `hermes.in.>` ([`routes_anywhere`]): every copy of it routes
//! every message alike (into its session's partition inbox), so a message this process sends
//! is routed here, and the answer the session sends later reaches this process's own
//! in-process reply inbox ([`super::local_reply`]), from whichever process owns the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::bus::pattern::{has_wildcard, matches};
use crate::bus::Handler;
use crate::protocol::subjects;

/// The exact subjects this process serves and their handlers, and the wildcard services any
/// copy of which answers alike.
#[derive(Default)]
pub struct LocalServices {
    handlers: Mutex<HashMap<String, Arc<dyn Handler>>>,
    routers: Mutex<Vec<(String, Arc<dyn Handler>)>>,
}

/// A wildcard service whose copies all answer every subject alike, so any of them may take a
/// request: the session router, which only stores a message in its session's partition
/// inbox (the session's owner answers it, wherever it runs). A wildcard tool or MCP service
/// is not: a more specific service elsewhere may be the one meant.
pub fn routes_anywhere(pattern: &str, group: &str) -> bool {
    pattern == subjects::INBOUND_ALL && group == subjects::groups::SESSION
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LocalServices {
    /// Answer `subject` here with `handler` until the returned guard drops: an exact subject,
    /// or a wildcard pattern that [`routes_anywhere`] in `group`; none for another wildcard.
    pub fn register(
        self: &Arc<Self>,
        subject: &str,
        group: &str,
        handler: Arc<dyn Handler>,
    ) -> Option<Local> {
        let wildcard = has_wildcard(subject);
        if wildcard && !routes_anywhere(subject, group) {
            return None;
        }
        if wildcard {
            lock(&self.routers).push((subject.to_string(), handler.clone()));
        } else {
            lock(&self.handlers).insert(subject.to_string(), handler.clone());
        }
        Some(Local {
            services: self.clone(),
            subject: subject.to_string(),
            wildcard,
            handler,
        })
    }

    /// The handler of this process serving exactly `subject`, if any (typed requests).
    pub fn get(&self, subject: &str) -> Option<Arc<dyn Handler>> {
        lock(&self.handlers).get(subject).cloned()
    }

    /// The router of this process whose pattern `subject` matches, if any.
    pub fn router(&self, subject: &str) -> Option<Arc<dyn Handler>> {
        lock(&self.routers)
            .iter()
            .find(|(pattern, _)| matches(pattern, subject))
            .map(|(_, handler)| handler.clone())
    }
}

/// Keeps one registration; dropping it stops answering in-process (unless another handler
/// took the subject since).
pub struct Local {
    services: Arc<LocalServices>,
    subject: String,
    wildcard: bool,
    handler: Arc<dyn Handler>,
}

impl Drop for Local {
    fn drop(&mut self) {
        if self.wildcard {
            let mut routers = lock(&self.services.routers);
            if let Some(i) = routers
                .iter()
                .position(|(p, h)| *p == self.subject && Arc::ptr_eq(h, &self.handler))
            {
                routers.remove(i);
            }
            return;
        }
        let mut handlers = lock(&self.services.handlers);
        if handlers
            .get(&self.subject)
            .is_some_and(|h| Arc::ptr_eq(h, &self.handler))
        {
            handlers.remove(&self.subject);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::Message;
    use async_trait::async_trait;
    use bytes::Bytes;

    struct Echo;

    #[async_trait]
    impl Handler for Echo {
        async fn handle(&self, message: Message) -> Option<Bytes> {
            Some(message.payload)
        }
    }

    #[test]
    fn exact_subjects_are_local_while_served_and_other_wildcards_never() {
        let services = Arc::new(LocalServices::default());
        assert!(services
            .register("hermes.tool.*", "tool", Arc::new(Echo))
            .is_none());
        assert!(services.router("hermes.tool.add").is_none());
        assert!(services
            .register("hermes.in.>", "planner", Arc::new(Echo))
            .is_none());
        let guard = services
            .register("hermes.plan", "planner", Arc::new(Echo))
            .unwrap();
        assert!(services.get("hermes.plan").is_some());
        drop(guard);
        assert!(services.get("hermes.plan").is_none());
    }

    #[test]
    fn the_session_router_takes_the_messages_this_process_sends_while_it_serves() {
        let services = Arc::new(LocalServices::default());
        let guard = services
            .register(
                subjects::INBOUND_ALL,
                subjects::groups::SESSION,
                Arc::new(Echo),
            )
            .unwrap();
        assert!(services.router("hermes.in.assistant.s1").is_some());
        assert!(services.router("hermes.out.assistant.s1").is_none());
        assert!(
            services.get("hermes.in.assistant.s1").is_none(),
            "not a typed service"
        );
        drop(guard);
        assert!(services.router("hermes.in.assistant.s1").is_none());
    }
}
