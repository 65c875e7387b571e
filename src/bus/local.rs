//! Message bodies handed over in-process as values.
//!
//! A publisher with a typed body ([`super::Bus::publish_local`]) lets the embedded bus give it
//! to in-process subscribers that asked for values ([`super::Bus::subscribe_local`]) as it is:
//! no encoding on one side, no decoding on the other. The bytes are made once, and only when
//! some listener needs them (a plain subscriber, a service, a capture); a networked bus always
//! sends the bytes.

use std::any::Any;
use std::fmt::Debug;

use bytes::Bytes;
use serde::Serialize;

use super::BusError;
use crate::protocol::envelope::Envelope;

/// A body that can travel as a value in-process and as bytes anywhere else.
pub trait LocalValue: Any + Debug + Send + Sync {
    /// The bytes a subscriber without the value reads.
    fn encode(&self) -> Result<Bytes, String>;

    /// The value, for a subscriber to downcast to the type it expects.
    fn as_any(&self) -> &dyn Any;
}

/// `body`'s bytes for a message on `subject`; a failure names the subject.
pub(crate) fn encode_for(subject: &str, body: &dyn LocalValue) -> Result<Bytes, BusError> {
    body.encode().map_err(|reason| BusError::Encode {
        subject: subject.to_string(),
        reason,
    })
}

impl<B: Serialize + Debug + Send + Sync + 'static> LocalValue for Envelope<B> {
    fn encode(&self) -> Result<Bytes, String> {
        Envelope::encode(self).map_err(|e| e.to_string())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TurnEvent;

    #[test]
    fn an_envelope_encodes_as_its_bytes_and_downcasts_to_itself() {
        let envelope = Envelope::event(TurnEvent::TurnStarted {
            turn_id: "t".into(),
            message_id: "m".into(),
        });
        let value: &dyn LocalValue = &envelope;
        assert_eq!(value.encode().unwrap(), envelope.encode().unwrap());
        let back = value.as_any().downcast_ref::<Envelope<TurnEvent>>();
        assert_eq!(back, Some(&envelope));
        assert!(value.as_any().downcast_ref::<Envelope<String>>().is_none());
    }
}
