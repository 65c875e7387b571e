//! Typed services: a [`Service`] answers one [`Request`] type; [`typed`] wraps it into a bus
//! [`Handler`] that decodes the request, calls the service and encodes its reply in the
//! request's trace — or an `error` envelope with the service's code and message.

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::{Handler, LocalMessage, Message};
use crate::protocol::envelope::{error_envelope, Envelope};
use crate::protocol::request::{Reply, Request};

/// Why a service could not answer, as the `error` envelope says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError {
    pub code: &'static str,
    pub message: String,
}

impl ServiceError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// Answers requests of type `R`.
#[async_trait]
pub trait Service<R: Request>: Send + Sync + 'static {
    async fn call(&self, request: Envelope<R>) -> Result<R::Reply, ServiceError>;
}

/// A [`Handler`] for `R` requests, answered by `service`; requests over `max_bytes` are refused.
pub fn typed<R: Request, S: Service<R>>(service: Arc<S>, max_bytes: usize) -> Arc<dyn Handler> {
    Arc::new(Typed {
        service,
        max_bytes,
        _request: PhantomData::<fn() -> R>,
    })
}

struct Typed<R, S> {
    service: Arc<S>,
    max_bytes: usize,
    _request: PhantomData<fn() -> R>,
}

#[async_trait]
impl<R: Request, S: Service<R>> Handler for Typed<R, S> {
    async fn handle(&self, message: Message) -> Option<Bytes> {
        let request = match Envelope::<R>::decode_request(&message.payload, self.max_bytes) {
            Ok(r) => r,
            Err(e) => return error_bytes("bad_request", e.to_string()),
        };
        let trace = request.trace_id.clone();
        let (agent, session) = (request.agent.clone(), request.session.clone());
        match self.service.call(request).await {
            Ok(body) => {
                let mut reply = Envelope::new(<R::Reply as Reply>::KIND, body).in_trace(&trace);
                reply.agent = agent;
                reply.session = session;
                encode(&reply)
            }
            Err(e) => error_bytes(e.code, e.message),
        }
    }

    async fn handle_local(&self, request: LocalMessage) -> Result<LocalMessage, LocalMessage> {
        let request = request.downcast::<Envelope<R>>()?;
        let (trace, agent, session) = (
            request.trace_id.clone(),
            request.agent.clone(),
            request.session.clone(),
        );
        let answer: LocalAnswer<R> = self.service.call(*request).await.map(|body| {
            let mut reply = Envelope::new(<R::Reply as Reply>::KIND, body).in_trace(&trace);
            reply.agent = agent;
            reply.session = session;
            reply
        });
        Ok(Box::new(answer))
    }
}

/// What a typed handler answers in-process: the reply envelope or the service's error.
pub type LocalAnswer<R> = Result<Envelope<<R as Request>::Reply>, ServiceError>;

/// An envelope's bytes; an encoding failure becomes an `error` envelope.
pub fn encode<B: serde::Serialize>(envelope: &Envelope<B>) -> Option<Bytes> {
    match envelope.encode() {
        Ok(b) => Some(b),
        Err(e) => error_bytes("encode_failed", e.to_string()),
    }
}

/// An encoded `error` envelope.
pub fn error_bytes(code: &str, message: impl Into<String>) -> Option<Bytes> {
    error_envelope(code, message).encode().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{RecallReply, RecallRequest};

    struct Recall;

    #[async_trait]
    impl Service<RecallRequest> for Recall {
        async fn call(
            &self,
            request: Envelope<RecallRequest>,
        ) -> Result<RecallReply, ServiceError> {
            if request.body.user == "nobody" {
                return Err(ServiceError::new("unknown_user", "no such user"));
            }
            Ok(RecallReply::default())
        }
    }

    fn message(body: RecallRequest) -> Message {
        Message {
            subject: "hermes.memory.recall".into(),
            reply: None,
            payload: Envelope::request(body).encode().unwrap(),
            traceparent: None,
            local: None,
        }
    }

    #[tokio::test]
    async fn typed_service_answers_in_the_trace_or_with_an_error_envelope() {
        let handler = typed(Arc::new(Recall), 1024);
        let request = RecallRequest {
            user: "u".into(),
            ..RecallRequest::default()
        };
        let sent = Envelope::request(request.clone());
        let reply = handler
            .handle(Message {
                subject: "hermes.memory.recall".into(),
                reply: None,
                payload: sent.encode().unwrap(),
                traceparent: None,
                local: None,
            })
            .await
            .unwrap();
        let back = Envelope::<RecallReply>::decode_reply(&reply, 1024).unwrap();
        assert_eq!(back.trace_id, sent.trace_id);

        let refused = handler
            .handle(message(RecallRequest {
                user: "nobody".into(),
                ..RecallRequest::default()
            }))
            .await
            .unwrap();
        let err = Envelope::decode(&refused, 1024).unwrap();
        assert_eq!(err.kind, "error");
        assert_eq!(err.body["code"], "unknown_user");

        let garbage = Message {
            subject: "x".into(),
            reply: None,
            payload: Bytes::from_static(b"{nope"),
            traceparent: None,
            local: None,
        };
        let err = Envelope::decode(&handler.handle(garbage).await.unwrap(), 1024).unwrap();
        assert_eq!(err.body["code"], "bad_request");
    }
}
