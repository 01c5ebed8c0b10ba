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
    /// Changes may have been missed (the database's notifications were lost for a while):
    /// long-polls re-read, streams end so their clients reconnect for a snapshot.
    Resync,
}

pub(crate) type Feed = broadcast::Sender<Change>;

/// The devices this process holds streams for, counted. With PostgreSQL every process hears
/// of every envelope, by key; it reads one back only when it holds a stream for its device,
/// instead of every process reading every envelope.
///
/// Nothing is missed: a stream is counted before it subscribes to the feed, and subscribes
/// before it reads its snapshot. An envelope whose notice came before the count is in that
/// snapshot, since the notice follows the commit.
#[derive(Debug, Default)]
pub(crate) struct Held(std::sync::Mutex<std::collections::HashMap<String, usize>>);

impl Held {
    /// Counts a stream for `device` until the returned guard is dropped.
    pub(crate) fn hold(self: &Arc<Self>, device: &str) -> Holding {
        *self
            .0
            .lock()
            .expect("not poisoned")
            .entry(device.to_string())
            .or_default() += 1;
        Holding {
            held: Arc::clone(self),
            device: device.to_string(),
        }
    }

    pub(crate) fn holds(&self, device: &str) -> bool {
        self.0.lock().expect("not poisoned").contains_key(device)
    }
}

/// One counted stream of [`Held`].
#[derive(Debug)]
pub(crate) struct Holding {
    held: Arc<Held>,
    device: String,
}

impl Drop for Holding {
    fn drop(&mut self) {
        let mut map = self.held.0.lock().expect("not poisoned");
        if let Some(n) = map.get_mut(&self.device) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.device);
            }
        }
    }
}

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
            Ok(Ok(Change::Resync)) => return true,
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
/// heartbeat. `holding` counts it in [`Held`] while it lasts.
pub(crate) fn device_stream(
    device: String,
    snapshot: Vec<Envelope>,
    mut changes: broadcast::Receiver<Change>,
    heartbeat: Duration,
    holding: Holding,
) -> ResBody {
    let (tx, rx) = mpsc::channel::<Bytes>(BUFFER);
    tokio::spawn(async move {
        let _holding = holding;
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
                    Ok(Change::Resync) => return,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(i: usize) -> Arc<Envelope> {
        Arc::new(Envelope {
            installation_id: "i".into(),
            device_id: "d".into(),
            event_id: format!("interaction:{i}"),
            key_id: "k".into(),
            expires_at: "2030-01-01T00:00:00Z".into(),
            sealed: "x".repeat(1000),
            signature: Some("s".into()),
            stored_at: None,
        })
    }

    /// Back-pressure: a reader that stops reading is cut off once its buffer is full,
    /// instead of the Relay buffering without bound; it reconnects for a fresh snapshot.
    #[tokio::test]
    async fn a_stalled_reader_is_cut_off_not_buffered() {
        let (feed, _) = broadcast::channel(FEED_CAPACITY);
        let held = Arc::new(Held::default());
        let body = device_stream(
            "d".into(),
            vec![],
            feed.subscribe(),
            HEARTBEAT,
            held.hold("d"),
        );
        for i in 0..500 {
            // Fails once the stream has given up on its reader (nobody listens any more).
            let _ = feed.send(Change::Envelope {
                device: "d".into(),
                envelope: envelope(i),
            });
            tokio::task::yield_now().await;
        }
        let all = tokio::time::timeout(Duration::from_secs(10), body.collect())
            .await
            .expect("the stream of a stalled reader was never closed")
            .unwrap()
            .to_bytes();
        let frames = String::from_utf8_lossy(&all).matches("event: ").count();
        assert!(
            frames <= BUFFER + 1,
            "{frames} frames buffered for a reader that never read"
        );
    }

    /// A device is held while any of its streams lasts, and no longer after the last ends.
    #[test]
    fn a_device_is_held_while_one_of_its_streams_lasts() {
        let held = Arc::new(Held::default());
        let (a, b) = (held.hold("d"), held.hold("d"));
        assert!(held.holds("d") && !held.holds("e"));
        drop(a);
        assert!(held.holds("d"));
        drop(b);
        assert!(!held.holds("d"));
    }

    /// Only this device's changes reach its stream; `revoked` ends it.
    #[tokio::test]
    async fn a_stream_carries_its_own_device_and_ends_when_revoked() {
        let (feed, _) = broadcast::channel(FEED_CAPACITY);
        let held = Arc::new(Held::default());
        let body = device_stream(
            "d".into(),
            vec![(*envelope(0)).clone()],
            feed.subscribe(),
            HEARTBEAT,
            held.hold("d"),
        );
        let send = |c| feed.send(c).unwrap();
        send(Change::Envelope {
            device: "other".into(),
            envelope: envelope(1),
        });
        send(Change::Withdrawn {
            device: "d".into(),
            event_id: "interaction:0".into(),
        });
        send(Change::DeviceRemoved { device: "d".into() });
        let all = tokio::time::timeout(Duration::from_secs(10), body.collect())
            .await
            .unwrap()
            .unwrap()
            .to_bytes();
        let text = String::from_utf8_lossy(&all);
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect();
        assert_eq!(
            names,
            ["envelope", "ready", "withdrawn", "revoked"],
            "{text}"
        );
        assert!(!text.contains("interaction:1"));
    }
}
