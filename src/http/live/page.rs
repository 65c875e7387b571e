//! The page itself and its event stream: the HTML (one file with its script and styles, no
//! external assets, so it works offline and behind any proxy) and the `text/event-stream`
//! body that sends each new snapshot as one `data:` line.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use hyper::body::Frame;

use super::Snapshots;

/// The status page.
pub const HTML: &str = include_str!("status_page.html");

/// A comment line sent when nothing changed, so proxies keep the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The event stream: the current snapshot at once, then every new one.
pub fn event_stream(
    snapshots: Snapshots,
) -> impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static {
    futures::stream::unfold((snapshots, true), |(mut snapshots, first)| async move {
        if !first {
            match tokio::time::timeout(KEEP_ALIVE, snapshots.changed()).await {
                Ok(Ok(())) => {}
                // The feed ended: the stream ends and the browser reconnects.
                Ok(Err(_)) => return None,
                Err(_) => {
                    return Some((Bytes::from_static(b": keep-alive\n\n"), (snapshots, false)))
                }
            }
        }
        let current = snapshots.borrow_and_update().clone();
        let chunk = match current {
            Some(json) => Bytes::from(format!("data: {json}\n\n")),
            None => Bytes::from_static(b": starting\n\n"),
        };
        Some((chunk, (snapshots, false)))
    })
    .map(|chunk| Ok(Frame::data(chunk)))
}
