//! The broker state machine in-process on a real sled store, for the timing rules that
//! the public TTL floor (30 s) and lease grace (15 s) would make slow through the daemon.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentnotify::broker::{Broker, BrokerConfig, InteractionFilter};
use agentnotify::model::{AnswerSubmission, InteractionRequest, Status, Timestamp};
use agentnotify::store::Store;
use serde_json::json;

fn broker(dir: &std::path::Path, lease_grace: Duration) -> Arc<Broker> {
    let store = Store::open(&dir.join("broker.sled")).unwrap();
    Broker::open(store, BrokerConfig { lease_grace }).unwrap()
}

fn request(prompt: &str, ttl_seconds: u32, lease: bool) -> InteractionRequest {
    let mut r =
        InteractionRequest::from_json(&json!({"prompt": prompt, "owner_lease": lease})).unwrap();
    // Below the API's 30 s floor on purpose: the rule under test is the same.
    r.ttl_seconds = ttl_seconds;
    r
}

#[tokio::test]
async fn a_wait_that_outlives_the_deadline_returns_expired_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), Duration::from_secs(15));
    let (q, _) = b.request(request("expires", 1, false)).await.unwrap();
    let started = Instant::now();
    let done = b.wait(&q.id, Duration::from_secs(60), false).await.unwrap();
    assert_eq!(done.status, Status::Expired);
    // Woken by the deadline itself, not by the 60 s wait timeout.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(Timestamp::now() >= q.expires_at);
}

#[tokio::test]
async fn expiry_is_swept_on_reads_and_the_reaper_persists_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), Duration::from_secs(15));
    let reaper = tokio::spawn(Arc::clone(&b).run_reaper());
    let (q, _) = b.request(request("reaped", 1, false)).await.unwrap();
    let mut events = b.subscribe();
    // The reaper announces the expiry without anyone asking.
    loop {
        let e = events.recv().await.unwrap();
        if e.id == q.id {
            assert_eq!(e.status, "expired");
            break;
        }
    }
    let list = b
        .list(&InteractionFilter {
            status: Some(Status::Pending),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(list.is_empty());
    reaper.abort();
    let _ = reaper.await;
    drop(b);
    // Durable: a new broker over the same store sees it expired. (A settle task of the
    // aborted reaper may hold the store for a moment; sled's file lock says when it is free.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let store = loop {
        match Store::open(&dir.path().join("broker.sled")) {
            Ok(store) => break store,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::task::yield_now().await;
            }
            Err(e) => panic!("the store never reopened: {e}"),
        }
    };
    let b = Broker::open(store, BrokerConfig::default()).unwrap();
    assert_eq!(b.get(&q.id).await.unwrap().status, Status::Expired);
}

#[tokio::test]
async fn an_owner_lease_cancels_a_question_nobody_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let grace = Duration::from_millis(400);
    let b = broker(dir.path(), grace);
    tokio::spawn(Arc::clone(&b).run_reaper());
    let (kept, _) = b
        .request(request("owner keeps waiting", 600, true))
        .await
        .unwrap();
    let (left, _) = b.request(request("owner gone", 600, true)).await.unwrap();
    let (plain, _) = b.request(request("no lease", 600, false)).await.unwrap();
    // The owner of `kept` waits in short slices, like the hook does.
    let waiter = {
        let b = Arc::clone(&b);
        let id = kept.id.clone();
        tokio::spawn(async move {
            for _ in 0..8 {
                let r = b.wait(&id, Duration::from_millis(200), true).await.unwrap();
                if r.status != Status::Pending {
                    return r.status;
                }
            }
            Status::Pending
        })
    };
    let gone = b
        .wait(&left.id, Duration::from_secs(1), true)
        .await
        .unwrap();
    // This wait itself kept it alive while in flight; it lapses `grace` after the wait started.
    let lapsed = b
        .wait(&left.id, Duration::from_secs(5), false)
        .await
        .unwrap();
    assert!(gone.status == Status::Pending || gone.status == Status::Cancelled);
    assert_eq!(lapsed.status, Status::Cancelled);
    assert_eq!(
        waiter.await.unwrap(),
        Status::Pending,
        "a waited-on lease must not lapse"
    );
    assert_eq!(b.get(&plain.id).await.unwrap().status, Status::Pending);
}

/// One approval never runs two calls: an identical keyed request gets a question of its own
/// while the first one's owner still holds it, and shares it once that owner is gone.
#[tokio::test]
async fn identical_requests_share_a_question_only_once_its_owner_stopped_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), Duration::from_secs(15));
    let mut keyed = request("keyed", 600, true);
    keyed.key = Some("k".into());
    let (first, created) = b.request(keyed.clone()).await.unwrap();
    assert!(created);
    // Asked again before the first owner even started waiting: its own question.
    let (second, created) = b.request(keyed.clone()).await.unwrap();
    assert!(
        created,
        "an identical call waiting at the same time shares a question"
    );
    assert_ne!(second.id, first.id);
    let answer = AnswerSubmission::from_json(&json!({
        "response_id": "r1", "request_digest": first.request_digest, "nonce": first.nonce,
        "choice_id": "allow-once", "source": "cli"}))
    .unwrap();
    assert_eq!(
        b.respond(&first.id, answer).await.unwrap().status,
        Status::Answered
    );
    assert_eq!(b.get(&second.id).await.unwrap().status, Status::Pending);

    // Between two wait slices the owner still holds its question.
    let slice = b
        .wait(&second.id, Duration::from_millis(50), true)
        .await
        .unwrap();
    assert_eq!(slice.status, Status::Pending);
    let (third, created) = b.request(keyed.clone()).await.unwrap();
    assert!(created && third.id != second.id, "held between slices");

    // The owner vanished mid-wait (its connection dropped the wait): a retry of the same call
    // takes its question and its lease over.
    let abandoned = tokio::time::timeout(
        Duration::from_millis(100),
        b.wait(&second.id, Duration::from_secs(60), true),
    )
    .await;
    assert!(abandoned.is_err(), "the wait was still parked when dropped");
    let (retry, created) = b.request(keyed).await.unwrap();
    assert!(!created);
    assert_eq!(retry.id, second.id);
    assert_eq!(b.get(&third.id).await.unwrap().status, Status::Pending);
}

#[tokio::test]
async fn prune_removes_only_old_terminal_records() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), Duration::from_secs(15));
    let (done, _) = b.request(request("done", 600, false)).await.unwrap();
    b.cancel(&done.id).await.unwrap();
    let (open, _) = b.request(request("open", 600, false)).await.unwrap();
    // A cutoff in the past prunes nothing.
    let pruned = b
        .prune(Timestamp::now().minus(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(pruned.interactions, 0);
    let pruned = b
        .prune(Timestamp::now().plus(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(pruned.interactions, 1);
    assert!(b.get(&done.id).await.is_err());
    assert_eq!(b.get(&open.id).await.unwrap().status, Status::Pending);
}

#[tokio::test]
async fn a_leased_question_never_waited_for_is_cancelled_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), Duration::from_millis(300));
    tokio::spawn(Arc::clone(&b).run_reaper());
    let mut events = b.subscribe();
    let (q, _) = b
        .request(request("owner died before waiting", 600, true))
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the reaper never cancelled it")
            .unwrap();
        if e.id == q.id && e.status == "cancelled" {
            break;
        }
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}
