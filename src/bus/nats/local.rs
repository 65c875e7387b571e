//! Services of this process, answered in-process when this process asks for them.
//!
//! A typed request ([`crate::bus::rpc::request`]) whose exact subject a service of this very
//! process serves goes straight to that handler, as on the embedded bus: no round trip
//! through the server (one hop fewer on the hot path), and nothing to lose in flight when a
//! NATS node restarts. Other processes still share the queue group's load over NATS; a
//! request for a subject served only elsewhere, or by a wildcard service, goes over NATS.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::bus::Handler;

/// The exact subjects this process serves, and their handlers.
#[derive(Default)]
pub struct LocalServices {
    handlers: Mutex<HashMap<String, Arc<dyn Handler>>>,
}

impl LocalServices {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn Handler>>> {
        self.handlers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answer `subject` here with `handler` until the returned guard drops; none for a
    /// wildcard pattern.
    pub fn register(self: &Arc<Self>, subject: &str, handler: Arc<dyn Handler>) -> Option<Local> {
        if subject.split('.').any(|token| token == "*" || token == ">") {
            return None;
        }
        self.lock().insert(subject.to_string(), handler.clone());
        Some(Local {
            services: self.clone(),
            subject: subject.to_string(),
            handler,
        })
    }

    /// The handler of this process serving `subject`, if any.
    pub fn get(&self, subject: &str) -> Option<Arc<dyn Handler>> {
        self.lock().get(subject).cloned()
    }
}

/// Keeps one registration; dropping it stops answering in-process (unless another handler
/// took the subject since).
pub struct Local {
    services: Arc<LocalServices>,
    subject: String,
    handler: Arc<dyn Handler>,
}

impl Drop for Local {
    fn drop(&mut self) {
        let mut handlers = self.services.lock();
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
    fn exact_subjects_are_local_while_served_and_wildcards_never() {
        let services = Arc::new(LocalServices::default());
        assert!(services.register("hermes.in.>", Arc::new(Echo)).is_none());
        assert!(services.get("hermes.in.a.b").is_none());
        let guard = services.register("hermes.plan", Arc::new(Echo)).unwrap();
        assert!(services.get("hermes.plan").is_some());
        drop(guard);
        assert!(services.get("hermes.plan").is_none());
    }
}
