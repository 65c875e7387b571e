//! The router's check that an inbound message is one its publisher may send
//! ([`crate::config::publishers`]): on `hermes.in.<agent>.<session>.<publisher>` the
//! envelope's `user` must be one that publisher may speak for, and only Hermes' own services
//! set `delegation` or `answer_to`; the short form `hermes.in.<agent>.<session>` names no
//! publisher and is refused when `bus.bind_user = "subject"`.
//!
//! A refusal is answered like any other (reply and `error` event) and audited on
//! `hermes.audit.bus_denied` with the publisher and the user it claimed. The check costs a
//! map lookup and a string comparison or two per message.

use super::check::{Arrival, Checked, Refusal, Sender};
use crate::config::publishers::{BindError, BindUser, Publisher};
use crate::config::BusConfig;
use crate::protocol::subjects::audit_kinds;

/// Whether `checked`, which arrived on `subject` naming `publisher`, may be taken.
pub(super) fn check(
    bus: &BusConfig,
    subject: &str,
    publisher: Option<&str>,
    checked: &Checked,
) -> Result<(), Refusal> {
    bound(bus, subject, publisher, checked).map_err(|e| Refusal {
        code: e.code(),
        message: e.to_string(),
        at: Some(checked.key.clone()),
        audit: audit_kinds::BUS_DENIED,
        sender: Some(Box::new(Sender {
            publisher: publisher.map(str::to_string),
            user: checked.user.clone(),
        })),
    })
}

fn bound(
    bus: &BusConfig,
    subject: &str,
    publisher: Option<&str>,
    checked: &Checked,
) -> Result<(), BindError> {
    let Some(name) = publisher else {
        return match bus.bind_user {
            BindUser::Off => Ok(()),
            BindUser::Subject => Err(BindError::Unbound {
                subject: subject.chars().take(200).collect(),
            }),
        };
    };
    let publisher = Publisher::of(&bus.publishers, name);
    publisher.check_user(&checked.user)?;
    if let Arrival::Message(envelope) = &checked.arrival {
        if envelope.body.delegation.is_some() {
            publisher.check_internal("delegation")?;
        }
        if envelope.body.answer_to.is_some() {
            publisher.check_internal("answer_to")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::publishers::PublisherConfig;
    use crate::protocol::envelope::Envelope;
    use crate::protocol::UserMessage;

    fn bus(bind_user: BindUser) -> BusConfig {
        let mut config = crate::config::Config::load(None).unwrap().bus;
        config.bind_user = bind_user;
        config.publishers.insert(
            "shop".into(),
            PublisherConfig {
                users: Some(vec!["cust-*".into()]),
                internal: false,
            },
        );
        config.publishers.insert(
            "hermes-session".into(),
            PublisherConfig {
                users: Some(vec!["*".into()]),
                internal: true,
            },
        );
        config
    }

    fn message(user: &str, answer_to: Option<&str>) -> Checked {
        let body = UserMessage {
            answer_to: answer_to.map(str::to_string),
            ..UserMessage::text("hello")
        };
        Checked {
            key: ("assistant".into(), "s1".into()),
            user: user.into(),
            arrival: Arrival::Message(Envelope::request(body).for_session(
                "assistant",
                "s1",
                Some(user),
            )),
        }
    }

    const SUBJECT: &str = "hermes.in.assistant.s1.shop";

    #[test]
    fn a_publisher_sends_only_as_its_users() {
        let config = bus(BindUser::Subject);
        assert!(check(&config, SUBJECT, Some("shop"), &message("cust-1", None)).is_ok());
        let refusal = check(&config, SUBJECT, Some("shop"), &message("u-1001", None)).unwrap_err();
        assert_eq!(refusal.code, "user_not_allowed");
        assert_eq!(refusal.audit, "bus_denied");
        assert_eq!(
            refusal.sender.as_deref(),
            Some(&Sender {
                publisher: Some("shop".into()),
                user: "u-1001".into()
            })
        );
        // Without an entry: the publisher's own name only.
        assert!(check(&config, SUBJECT, Some("alice"), &message("alice", None)).is_ok());
        assert!(check(&config, SUBJECT, Some("alice"), &message("bob", None)).is_err());
    }

    #[test]
    fn only_internal_publishers_set_answer_to_and_the_short_form_needs_bind_user_off() {
        let config = bus(BindUser::Subject);
        let answer_to = message("cust-1", Some("shop.orders.x.reply"));
        let refusal = check(&config, SUBJECT, Some("shop"), &answer_to).unwrap_err();
        assert_eq!(refusal.code, "internal_field");
        assert!(check(&config, SUBJECT, Some("hermes-session"), &answer_to).is_ok());
        let short = "hermes.in.assistant.s1";
        let refusal = check(&config, short, None, &message("cust-1", None)).unwrap_err();
        assert_eq!(refusal.code, "unbound_user");
        assert!(refusal.message.contains("config/nats/hermes.conf"));
        let off = bus(BindUser::Off);
        assert!(check(&off, short, None, &message("anyone", Some("x.y"))).is_ok());
        // A subject that names its publisher is held to it whatever bind_user says.
        assert!(check(&off, SUBJECT, Some("shop"), &message("u-1001", None)).is_err());
    }
}
