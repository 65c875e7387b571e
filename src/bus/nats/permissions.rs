//! What nats-server refused this connection: a publish or a subscription its user's
//! permissions do not allow (config/nats/hermes.conf gives each role its subjects).
//!
//! The server reports a refusal asynchronously (`-ERR 'Permissions Violation for …'`), so a
//! refused subscription looks like a quiet one to the code that made it. Every refusal is
//! logged once per subject, naming the subject, the user and the configuration to look at;
//! refused subscriptions are kept, so a process can fail at start ([`Violations::denied`])
//! instead of serving nothing.

use std::collections::HashSet;
use std::sync::Mutex;

use async_nats::{Event, ServerError};

/// Where the shipped permissions live.
pub const PERMISSIONS_FILE: &str = "config/nats/hermes.conf";
/// Distinct refusals logged per connection; past this they are counted only.
const MAX_LOGGED: usize = 256;

/// What the server refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub operation: Operation,
    pub subject: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Publish,
    Subscribe,
}

impl Operation {
    pub fn verb(self) -> &'static str {
        match self {
            Operation::Publish => "publish on",
            Operation::Subscribe => "subscribe to",
        }
    }
}

/// The refusals of one connection.
pub struct Violations {
    /// Who the connection is, for messages (`user `hermes-planner``).
    who: String,
    subscriptions: Mutex<Vec<Denial>>,
    logged: Mutex<HashSet<(Operation, String)>>,
}

impl Violations {
    pub fn new(who: String) -> Self {
        Self {
            who,
            subscriptions: Mutex::new(Vec::new()),
            logged: Mutex::new(HashSet::new()),
        }
    }

    pub fn who(&self) -> &str {
        &self.who
    }

    /// Note a connection event; permission refusals are logged and kept.
    pub fn observe(&self, event: &Event) {
        let Event::ServerError(ServerError::Other(text)) = event else {
            return;
        };
        let Some(denial) = parse(text) else {
            return;
        };
        let first = {
            let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
            logged.len() < MAX_LOGGED && logged.insert((denial.operation, denial.subject.clone()))
        };
        if first {
            tracing::error!(
                user = %self.who,
                subject = %denial.subject,
                "{}",
                explain(&self.who, &denial)
            );
        }
        if denial.operation == Operation::Subscribe {
            self.subscriptions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(denial);
        }
    }

    /// Why a request on `subject` cannot have been answered, when the server said so: it
    /// refused the publish, or the subscription to this connection's reply inbox.
    pub fn refused_request(&self, subject: &str) -> Option<Denial> {
        let logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.contains(&(Operation::Publish, subject.to_string())) {
            return Some(Denial {
                operation: Operation::Publish,
                subject: subject.to_string(),
            });
        }
        logged
            .iter()
            .find(|(op, s)| *op == Operation::Subscribe && s.starts_with("_INBOX"))
            .map(|(operation, subject)| Denial {
                operation: *operation,
                subject: subject.clone(),
            })
    }

    /// Every refusal the server reported so far (publishes and subscriptions), in order of
    /// subject.
    pub fn all(&self) -> Vec<Denial> {
        let logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<Denial> = logged
            .iter()
            .map(|(operation, subject)| Denial {
                operation: *operation,
                subject: subject.clone(),
            })
            .collect();
        all.sort_by(|a, b| a.subject.cmp(&b.subject));
        all
    }

    /// The subscriptions the server refused so far.
    pub fn denied(&self) -> Vec<Denial> {
        self.subscriptions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What a refusal means and what to do, in one sentence.
pub fn explain(who: &str, denial: &Denial) -> String {
    format!(
        "nats-server does not let {who} {} `{}`: run this process with the credential of the \
         role that needs this subject, or grant it to this user's role ({PERMISSIONS_FILE} \
         lists each role's subjects)",
        denial.operation.verb(),
        denial.subject
    )
}

/// The refusal in a server error's text, if it is one:
/// `Permissions Violation for Publish to "x"`, `… for Publish with Reply of "x"`,
/// `… for Subscription to "x"` (optionally `using queue "q"`).
pub fn parse(text: &str) -> Option<Denial> {
    let rest = text.trim().strip_prefix("Permissions Violation for ")?;
    let (operation, rest) = if let Some(rest) = rest.strip_prefix("Subscription to ") {
        (Operation::Subscribe, rest)
    } else if let Some(rest) = rest.strip_prefix("Publish with Reply of ") {
        (Operation::Publish, rest)
    } else if let Some(rest) = rest.strip_prefix("Publish to ") {
        (Operation::Publish, rest)
    } else {
        return None;
    };
    let subject = rest.trim().strip_prefix('"')?.split('"').next()?;
    Some(Denial {
        operation,
        subject: subject.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_refusals_are_read_and_kept_for_subscriptions() {
        assert_eq!(
            parse(r#"Permissions Violation for Publish to "hermes.plan""#),
            Some(Denial {
                operation: Operation::Publish,
                subject: "hermes.plan".into()
            })
        );
        assert_eq!(
            parse(
                r#"Permissions Violation for Subscription to "hermes.tool.x" using queue "tool""#
            ),
            Some(Denial {
                operation: Operation::Subscribe,
                subject: "hermes.tool.x".into()
            })
        );
        assert_eq!(
            parse(r#"Permissions Violation for Publish with Reply of "_INBOX.a.b""#)
                .map(|d| d.subject),
            Some("_INBOX.a.b".into())
        );
        assert_eq!(parse("Authorization Violation"), None);

        let violations = Violations::new("user `hermes-planner`".into());
        let event = |text: &str| Event::ServerError(ServerError::Other(text.into()));
        violations.observe(&event(
            r#"Permissions Violation for Publish to "hermes.plan""#,
        ));
        assert!(violations.denied().is_empty(), "publishes are logged only");
        violations.observe(&event(
            r#"Permissions Violation for Subscription to "hermes.tool.x""#,
        ));
        let denied = violations.denied();
        assert_eq!(denied.len(), 1);
        assert_eq!(
            violations
                .refused_request("hermes.plan")
                .map(|d| d.operation),
            Some(Operation::Publish)
        );
        assert_eq!(violations.refused_request("hermes.memory.recall"), None);
        violations.observe(&event(
            r#"Permissions Violation for Subscription to "_INBOX.x.*""#,
        ));
        assert_eq!(
            violations
                .refused_request("hermes.memory.recall")
                .map(|d| d.subject),
            Some("_INBOX.x.*".into())
        );
        let text = explain(violations.who(), &denied[0]);
        assert!(text.contains("user `hermes-planner`"), "{text}");
        assert!(text.contains("`hermes.tool.x`"), "{text}");
        assert!(text.contains(PERMISSIONS_FILE), "{text}");
    }
}
