//! What makes the Relay live rather than polled (SPEC §12.2): an in-memory feed of changes
//! that long-polls wait on, and the device's event stream (server-sent events).
//!
//! The feed is a broadcast channel: every waiter sees every change and keeps those for it.
//! A stream whose reader falls behind is closed rather than buffered without bound; the
//! client reconnects and gets a full snapshot, so nothing is lost.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agentnotify_http::ResBody;
use agentnotify_relay_proto::wire::{AnswerResult, Envelope};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use tokio::sync::{broadcast, mpsc};

/// How often an idle stream sends a `heartbeat` event.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(15);
/// Frames buffered for one slow reader before its stream is closed.
const BUFFER: usize = 64;
/// Changes kept for waiters that are busy for a moment.
pub(crate) const FEED_CAPACITY: usize = 4096;

/// One change the Relay made, as waiters need to hear it.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// An answer for this installation was stored.
    Answer { installation: String },
    /// A device of this installation registered or was removed.
    Devices { installation: String },
    /// An envelope for this device was stored or replaced.
    Envelope {
        device: String,
        envelope: Arc<Envelope>,
    },
    /// A question was withdrawn from this device.
    Withdrawn { device: String, event_id: String },
    /// The broker's verdict on one of this device's answers.
    Verdict {
        device: String,
        result: Arc<AnswerResult>,
    },
    /// This device was removed.
    DeviceRemoved { device: String },
}

pub(crate) type Feed = broadcast::Sender<Change>;

/// Waits until `pred` holds for a change on `rx`, or `wait` runs out; true if it held.
/// A lagged receiver counts as "something happened" (the caller re-reads the store).
pub(crate) async fn wait_for(
    rx: &mut broadcast::Receiver<Change>,
    wait: Duration,
    mut pred: impl FnMut(&Change) -> bool,
) -> bool {
    let until = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(until, rx.recv()).await {
            Err(_) => return false,
            Ok(Ok(c)) if pred(&c) => return true,
            Ok(Ok(_)) => {}
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => return true,
            Ok(Err(broadcast::error::RecvError::Closed)) => return false,
        }
    }
}

/// One server-sent event: `event: NAME` and one `data:` line of JSON.
pub(crate) fn frame(name: &str, data: &impl serde::Serialize) -> Bytes {
    let json = serde_json::to_string(data).expect("event data serialises");
    Bytes::from(format!("event: {name}\ndata: {json}\n\n"))
}

/// A response body fed by a channel; ends when the forwarding task ends.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// The device's stream: `snapshot` (the current envelopes, then `ready`), then its changes
/// from `changes` (subscribed before the snapshot was read, so none falls in between) and a
/// heartbeat.
pub(crate) fn device_stream(
    device: String,
    snapshot: Vec<Envelope>,
    mut changes: broadcast::Receiver<Change>,
    heartbeat: Duration,
) -> ResBody {
    let (tx, rx) = mpsc::channel::<Bytes>(BUFFER);
    tokio::spawn(async move {
        let n = snapshot.len();
        for e in snapshot {
            if tx.send(frame("envelope", &e)).await.is_err() {
                return;
            }
        }
        if tx
            .send(frame("ready", &serde_json::json!({ "envelopes": n })))
            .await
            .is_err()
        {
            return;
        }
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        loop {
            let (bytes, last) = tokio::select! {
                _ = tx.closed() => return,
                _ = beat.tick() => (frame("heartbeat", &serde_json::json!({})), false),
                c = changes.recv() => match c {
                    Ok(Change::Envelope { device: d, envelope }) if d == device => {
                        (frame("envelope", &*envelope), false)
                    }
                    Ok(Change::Withdrawn { device: d, event_id }) if d == device => {
                        (frame("withdrawn", &serde_json::json!({ "event_id": event_id })), false)
                    }
                    Ok(Change::Verdict { device: d, result }) if d == device => {
                        (frame("verdict", &*result), false)
                    }
                    Ok(Change::DeviceRemoved { device: d }) if d == device => {
                        (frame("revoked", &serde_json::json!({})), true)
                    }
                    Ok(_) => continue,
                    // This task fell behind the feed: end the stream; the client
                    // reconnects and gets a fresh snapshot.
                    Err(_) => return,
                },
            };
            // A full buffer means the reader stalled: close, and let it reconnect.
            if tx.try_send(bytes).is_err() || last {
                return;
            }
        }
    });
    ChannelBody(rx).boxed()
}
