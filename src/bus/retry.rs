//! Requests that ride out a moment of a NATS deployment without responders or a lost reply.
//!
//! While a NATS node restarts, a request can find no responder (the serving processes'
//! interest is moving to another node) or vanish in flight (it was routed through the node
//! that went down, or its reply was). Core NATS request/reply does not redeliver, so the
//! caller does:
//! - **no responders** means nobody received the request: it is sent again, with a growing
//!   pause, for up to [`NO_RESPONDERS_PATIENCE`] (or the request's own timeout, if shorter);
//! - **no reply in time** may mean the request ran: it is sent once more only when running it
//!   twice is harmless ([`Repeat::OnSilence`]: reads, planning, executor tools), or when the
//!   receiver deduplicates it ([`Repeat::OnSilenceWaiting`]: executor `write` calls, whose copy
//!   the executor holds until the first execution's outcome is recorded).
//!
//! On the embedded bus nothing is lost in flight, so requests there are sent once.

use std::time::{Duration, Instant};

use super::rpc::{self, RpcError};
use super::{Bus, BusError};
use crate::protocol::envelope::Envelope;
use crate::protocol::request::Request;

/// How long a request keeps trying while nobody serves its subject.
pub const NO_RESPONDERS_PATIENCE: Duration = Duration::from_secs(8);
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// Whether a request that got no reply in time may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Running it twice is harmless: send it once more.
    OnSilence,
    /// The receiver deduplicates it: send it once more and wait this long for the copy's
    /// reply, which may come only once the first execution settled.
    OnSilenceWaiting(Duration),
    /// It may have taken effect: report the silence instead.
    Never,
}

/// [`rpc::request`], sent again as the module doc says.
pub async fn request<R: Request + Clone>(
    bus: &dyn Bus,
    envelope: Envelope<R>,
    timeout: Duration,
    repeat: Repeat,
) -> Result<Envelope<R::Reply>, RpcError> {
    if bus.backend().single_process() {
        return rpc::request(bus, envelope, timeout).await;
    }
    let patience_ends = Instant::now() + NO_RESPONDERS_PATIENCE.min(timeout);
    let mut pause = FIRST_PAUSE;
    let mut silences_left = u8::from(repeat != Repeat::Never);
    let mut timeout = timeout;
    loop {
        match rpc::request(bus, envelope.clone(), timeout).await {
            Err(RpcError::Bus(BusError::NoResponders { subject })) => {
                if Instant::now() + pause > patience_ends {
                    return Err(BusError::NoResponders { subject }.into());
                }
                tracing::debug!(%subject, ?pause, "no responders yet; sending again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
            Err(RpcError::Bus(BusError::Timeout { subject, after })) if silences_left > 0 => {
                silences_left -= 1;
                if let Repeat::OnSilenceWaiting(copy_wait) = repeat {
                    timeout = copy_wait;
                }
                tracing::warn!(%subject, ?after, "no reply in time; the request may have been lost, sending it once more");
            }
            other => return other,
        }
    }
}
