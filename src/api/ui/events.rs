//! Server-sent events for the page: one frame per interaction change, carrying only the id
//! and the new status (the page then fetches the list), plus a comment heartbeat so a dead
//! connection is noticed at the next write instead of lingering forever.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use tokio::sync::{broadcast, mpsc};

use crate::broker::Event;
use crate::model::Timestamp;
use agentnotify_http::ResBody;

/// How often an idle stream sends a comment line.
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Frames buffered for a slow reader before its stream is closed (the page reconnects and
/// re-fetches, so nothing is lost).
const BUFFER: usize = 32;

/// Counts open streams, so an on-demand broker stays up while a page is watching.
#[derive(Default)]
pub struct StreamCounter {
    open: AtomicUsize,
    /// When the last stream closed (Unix millis; 0 = never).
    last_closed: AtomicU64,
}

impl StreamCounter {
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
    /// When the last stream closed, if one ever did.
    pub fn last_closed(&self) -> Option<Timestamp> {
        match self.last_closed.load(Ordering::SeqCst) {
            0 => None,
            n => Some(Timestamp(n)),
        }
    }
}

struct OpenStream(Arc<StreamCounter>);

impl OpenStream {
    fn new(counter: Arc<StreamCounter>) -> OpenStream {
        counter.open.fetch_add(1, Ordering::SeqCst);
        OpenStream(counter)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0
            .last_closed
            .store(Timestamp::now().millis(), Ordering::SeqCst);
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
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

/// Starts forwarding broker events; returns the body to stream to the page.
pub fn stream(
    mut events: broadcast::Receiver<Event>,
    counter: Arc<StreamCounter>,
    heartbeat: Duration,
    until: tokio::time::Instant,
) -> ResBody {
    let (tx, rx) = mpsc::channel::<Bytes>(BUFFER);
    let guard = OpenStream::new(counter);
    tokio::spawn(async move {
        let _guard = guard;
        // `retry` sets the browser's reconnect delay; `ready` tells the page to fetch.
        if tx
            .send(Bytes::from_static(
                b"retry: 2000\n\nevent: ready\ndata: {}\n\n",
            ))
            .await
            .is_err()
        {
            return;
        }
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        loop {
            let frame = tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(until) => return,
                _ = beat.tick() => Bytes::from_static(b": keep-alive\n\n"),
                ev = events.recv() => match ev {
                    Ok(ev) if ev.topic == "interaction" => {
                        let data = serde_json::json!({"id": ev.id, "status": ev.status});
                        Bytes::from(format!("event: interaction\ndata: {data}\n\n"))
                    }
                    Ok(_) => continue,
                    // Missed some: the page re-fetches everything.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        Bytes::from_static(b"event: ready\ndata: {}\n\n")
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            };
            // A full buffer means the reader stalled: close, and let it reconnect.
            if tx.try_send(frame).is_err() {
                return;
            }
        }
    });
    ChannelBody(rx).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn next_text(body: &mut ResBody) -> String {
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("a frame in time")
            .expect("the stream is open")
            .unwrap();
        String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn forwards_interaction_changes_and_beats_and_ends_when_the_reader_goes() {
        let (tx, rx) = broadcast::channel(8);
        let counter = Arc::new(StreamCounter::default());
        let far = tokio::time::Instant::now() + Duration::from_secs(3600);
        let mut body = stream(rx, Arc::clone(&counter), Duration::from_millis(50), far);
        assert_eq!(counter.open(), 1);
        assert!(next_text(&mut body).await.contains("event: ready"));

        tx.send(Event {
            topic: "notification",
            id: "n1".into(),
            status: "active",
        })
        .unwrap();
        tx.send(Event {
            topic: "interaction",
            id: "abc".into(),
            status: "answered",
        })
        .unwrap();
        let frame = next_text(&mut body).await;
        assert_eq!(
            frame, "event: interaction\ndata: {\"id\":\"abc\",\"status\":\"answered\"}\n\n",
            "notifications are not forwarded; interactions are, as id and status only"
        );
        assert_eq!(next_text(&mut body).await, ": keep-alive\n\n");

        // The page went away: the forwarding task notices and ends.
        drop(body);
        tokio::time::timeout(Duration::from_secs(5), async {
            while counter.open() > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the stream task ends once its reader is gone");
        assert!(counter.last_closed().is_some());
    }

    #[tokio::test]
    async fn the_stream_ends_with_the_session() {
        let (_tx, rx) = broadcast::channel::<Event>(8);
        let counter = Arc::new(StreamCounter::default());
        let until = tokio::time::Instant::now() + Duration::from_millis(100);
        let mut body = stream(rx, counter, Duration::from_secs(3600), until);
        assert!(next_text(&mut body).await.contains("event: ready"));
        let end = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("the stream ends at the session's deadline");
        assert!(end.is_none());
    }
}
