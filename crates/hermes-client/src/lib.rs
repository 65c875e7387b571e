//! Talk to a Hermes agent engine from Rust: send a message to a session and follow its turn's
//! events as a typed stream ([`session`]), confirm or deny a waiting call, cancel a turn,
//! publish events for triggers ([`triggers`]), recall, write and forget memories
//! ([`memory`]), and serve a tool as a worker ([`worker`]).
//!
//! Every message is a [`hermes_protocol`] envelope on a Hermes subject. The bus is a
//! [`Transport`]: NATS through [`nats::Nats`] (async-nats), or the engine's in-process bus,
//! which `hermes send` and `hermes chat` hand over when they run the engine themselves.
//!
//! ```no_run
//! # async fn run() -> Result<(), hermes_client::ClientError> {
//! use std::time::Duration;
//! let hermes = hermes_client::Hermes::connect("nats://127.0.0.1:4222", &Default::default()).await?;
//! let mut chat = hermes.session("assistant", "s1", "u-1").await?;
//! let turn = chat.turn("What time is it?", Duration::from_secs(60), |_| {}).await?;
//! println!("{}", turn.answer.unwrap_or_default());
//! # Ok(()) }
//! ```

pub mod error;
pub mod memory;
pub mod nats;
pub mod session;
pub mod transport;
pub mod triggers;
pub mod worker;

use std::sync::Arc;
use std::time::Duration;

use hermes_protocol::envelope::Envelope;
use hermes_protocol::request::Request;

pub use error::ClientError;
pub use hermes_protocol as protocol;
pub use memory::MemoryClient;
pub use nats::ConnectOptions;
pub use session::{event_turn, PendingCall, SessionClient, TurnTrace};
pub use transport::{Inbox, Incoming, Transport, TransportError};
pub use triggers::Reply;
pub use worker::ToolWorker;

/// Largest reply a request accepts (the bus limit applies before this).
const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

/// A connection to a Hermes deployment and what can be done over it. Cheap to clone.
#[derive(Clone)]
pub struct Hermes {
    transport: Arc<dyn Transport>,
    publisher: Option<String>,
    reader: Option<String>,
}

impl Hermes {
    /// Connect to the NATS server Hermes runs on. With a user, messages to sessions are sent
    /// as that identity (`hermes.in.<agent>.<session>.<user>`) and only its events are read
    /// (`hermes.out.<agent>.<session>.<user>`), as the least-privilege config allows.
    pub async fn connect(url: &str, options: &ConnectOptions) -> Result<Self, ClientError> {
        let transport = nats::Nats::connect(url, options).await?;
        let identity = options.user.as_ref().map(|(user, _)| user.clone());
        Ok(Self::over(Arc::new(transport))
            .as_publisher(identity.clone())
            .reading(identity))
    }

    /// Talk over `transport`, with no bus identity and every reader's events.
    pub fn over(transport: Arc<dyn Transport>) -> Self {
        Self {
            transport,
            publisher: None,
            reader: None,
        }
    }

    /// Send messages to sessions as `publisher` (the connection's identity on the bus).
    pub fn as_publisher(mut self, publisher: Option<String>) -> Self {
        self.publisher = publisher;
        self
    }

    /// Follow the turn events for `reader` only (none: every reader's, `hermes.out.….*`).
    pub fn reading(mut self, reader: Option<String>) -> Self {
        self.reader = reader;
        self
    }

    /// The bus this client talks over.
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    /// Send a typed request to its subject and return the typed reply.
    pub async fn request<R: Request>(
        &self,
        request: Envelope<R>,
        timeout: Duration,
    ) -> Result<Envelope<R::Reply>, ClientError> {
        let subject = R::subject_from(&request, self.publisher.as_deref())?;
        let reply = self
            .transport
            .request(&subject, request.encode()?, timeout)
            .await?;
        Ok(Envelope::decode_reply(&reply, MAX_REPLY_BYTES)?)
    }
}
