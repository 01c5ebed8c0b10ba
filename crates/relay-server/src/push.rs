//! Web Push (SPEC §12.3): the Relay's VAPID key, each device's push subscription, and the
//! sender that rings a device's doorbell when a question arrives or is withdrawn.
//!
//! A push carries a doorbell only — `{"type": "question"|"withdrawn", "event_id"}` — so the
//! push service never sees a prompt, a choice or a nonce; the phone fetches the sealed
//! envelope from the Relay itself. RFC 8291 `aes128gcm` and RFC 8292 VAPID come from the
//! pure-Rust `web-push-native`; the request goes out through reqwest (rustls).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentnotify_model::Timestamp;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use web_push_native::jwt_simple::algorithms::{ECDSAP256KeyPairLike, ES256KeyPair};
use web_push_native::{p256, Auth, WebPushBuilder};

use crate::kv::{Scope, Tree};
use crate::live::Change;
use crate::store::{RelayServer, StoreFail};

/// The `sub` claim of every VAPID token unless `--vapid-subject` says otherwise.
pub const DEFAULT_SUBJECT: &str = "mailto:admin@localhost";
/// Tries per push: the first, then retries after 1 s, 2 s and 4 s (or `Retry-After`).
const ATTEMPTS: u32 = 4;
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The Relay's VAPID key pair, made on first start and kept 0600 in the data folder.
pub struct Vapid {
    key: ES256KeyPair,
    subject: String,
}

impl Vapid {
    pub fn load_or_create(dir: &Path, subject: &str) -> std::io::Result<Vapid> {
        let path = dir.join("vapid.key");
        let key = match std::fs::read_to_string(&path) {
            Ok(text) => URL_SAFE_NO_PAD
                .decode(text.trim())
                .ok()
                .and_then(|raw| ES256KeyPair::from_bytes(&raw).ok())
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{} is not a VAPID key", path.display()),
                    )
                })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = ES256KeyPair::generate();
                write_private(&path, URL_SAFE_NO_PAD.encode(key.to_bytes()).as_bytes())?;
                key
            }
            Err(e) => return Err(e),
        };
        Ok(Vapid {
            key,
            subject: subject.to_string(),
        })
    }

    /// The key every process of a PostgreSQL-backed Relay shares (a subscription is bound to
    /// it): made by whichever process starts first, kept in the database's `meta` tree.
    pub(crate) async fn shared(server: &RelayServer, subject: &str) -> Result<Vapid, StoreFail> {
        let mut w = server.write(Scope::Relay).await?;
        let raw = match w.get(Tree::Meta, b"vapid_key").await? {
            Some(raw) => raw,
            None => {
                let raw = ES256KeyPair::generate().to_bytes();
                w.put(Tree::Meta, b"vapid_key", &raw).await?;
                raw
            }
        };
        w.commit(server).await?;
        let key = ES256KeyPair::from_bytes(&raw)
            .map_err(|_| StoreFail::Unavailable("the stored VAPID key is not a key".into()))?;
        Ok(Vapid {
            key,
            subject: subject.to_string(),
        })
    }

    /// The `applicationServerKey`: the uncompressed P-256 public point, base64url.
    pub fn public_key(&self) -> String {
        let point = self.key.key_pair().public_key().to_bytes_uncompressed();
        URL_SAFE_NO_PAD.encode(point)
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// A device's push subscription (`PushSubscription.toJSON()` without `expirationTime`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Subscription {
    pub(crate) endpoint: String,
    pub(crate) keys: SubscriptionKeys,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SubscriptionKeys {
    pub(crate) p256dh: String,
    pub(crate) auth: String,
}

impl Subscription {
    /// Checks the subscription can be pushed to; the message names the bad field.
    pub(crate) fn check(&self, allow_http: bool) -> Result<(), String> {
        let uri: http::Uri = self
            .endpoint
            .parse()
            .map_err(|_| "endpoint must be an absolute URL".to_string())?;
        match uri.scheme_str() {
            Some("https") => {}
            Some("http") if allow_http => {}
            _ => return Err("endpoint must be an https:// URL".into()),
        }
        if uri.host().is_none() || self.endpoint.len() > 2048 {
            return Err("endpoint must be an absolute URL of at most 2048 characters".into());
        }
        self.ua_key()
            .map_err(|_| "keys.p256dh must be an uncompressed P-256 point (65 bytes, base64url)")?;
        self.auth()
            .map_err(|_| "keys.auth must be 16 bytes of base64url".to_string())?;
        Ok(())
    }
    fn ua_key(&self) -> Result<p256::PublicKey, ()> {
        let raw = URL_SAFE_NO_PAD
            .decode(self.keys.p256dh.trim_end_matches('='))
            .map_err(|_| ())?;
        p256::PublicKey::from_sec1_bytes(&raw).map_err(|_| ())
    }
    fn auth(&self) -> Result<Auth, ()> {
        let raw = URL_SAFE_NO_PAD
            .decode(self.keys.auth.trim_end_matches('='))
            .map_err(|_| ())?;
        <[u8; 16]>::try_from(raw).map(Auth::from).map_err(|_| ())
    }
}

/// What a doorbell says: a kind and an event id, nothing else.
#[derive(Debug, Clone, Serialize)]
struct Doorbell<'a> {
    r#type: &'a str,
    event_id: &'a str,
}

/// Background task: one push per new envelope and per withdrawal of a subscribed device.
pub(crate) async fn run_sender(server: Arc<RelayServer>, vapid: Arc<Vapid>) {
    let http = agentnotify_relay_proto::tls::relay_client("https://push.invalid")
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(15))
        .build()
        .expect("an HTTP client builds");
    // This process's own changes only: with many processes, each change rings once.
    let mut feed = server.local.subscribe();
    loop {
        let (device, kind, event_id, expires) = match feed.recv().await {
            Ok(Change::Envelope { device, envelope }) => (
                device,
                "question",
                envelope.event_id.clone(),
                Timestamp::parse_rfc3339(&envelope.expires_at),
            ),
            Ok(Change::Withdrawn { device, event_id }) => (device, "withdrawn", event_id, None),
            Ok(_) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "push sender fell behind; some doorbells were not sent"
                );
                continue;
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        let sub: Option<Subscription> =
            match server.get(Tree::PushSubscriptions, device.as_bytes()).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "push subscriptions unreadable");
                    continue;
                }
            };
        let Some(sub) = sub else { continue };
        // A withdrawal lives as long as the question could have; a question until it expires.
        let ttl = expires
            .map(|t| Timestamp::now().until(t))
            .unwrap_or(Duration::from_secs(3600));
        let body = serde_json::to_vec(&Doorbell {
            r#type: kind,
            event_id: &event_id,
        })
        .expect("a doorbell serialises");
        let (server, vapid, http) = (Arc::clone(&server), Arc::clone(&vapid), http.clone());
        tokio::spawn(async move {
            deliver(&server, &vapid, &http, &device, &sub, &event_id, ttl, body).await;
        });
    }
}

/// The `Topic` of a push: a hash of the event id (at most 32 URL-safe characters), so a
/// withdrawal replaces a question the push service has not delivered yet.
fn topic(event_id: &str) -> String {
    let mut t = URL_SAFE_NO_PAD.encode(Sha256::digest(event_id.as_bytes()));
    t.truncate(32);
    t
}

/// Sends one push, retrying 429 and 5xx with backoff; 404 and 410 drop the subscription.
#[allow(clippy::too_many_arguments)]
async fn deliver(
    server: &RelayServer,
    vapid: &Vapid,
    http: &reqwest::Client,
    device: &str,
    sub: &Subscription,
    event_id: &str,
    ttl: Duration,
    body: Vec<u8>,
) {
    let (Ok(ua), Ok(auth), Ok(endpoint)) =
        (sub.ua_key(), sub.auth(), sub.endpoint.parse::<http::Uri>())
    else {
        return;
    };
    let mut wait = Duration::from_secs(1);
    for attempt in 1..=ATTEMPTS {
        let built = WebPushBuilder::new(endpoint.clone(), ua, auth)
            .with_valid_duration(ttl)
            .with_vapid(&vapid.key, &vapid.subject)
            .build(body.clone());
        let req = match built {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(device, error = %e, "could not build a push");
                return;
            }
        };
        let (parts, payload) = req.into_parts();
        let mut out = http.post(sub.endpoint.as_str()).body(payload);
        for (k, v) in &parts.headers {
            out = out.header(k.as_str(), v.as_bytes());
        }
        out = out
            .header("Urgency", "high")
            .header("Topic", topic(event_id));
        let status = match out.send().await {
            Ok(res) => {
                let s = res.status().as_u16();
                if let Some(after) = res
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                {
                    wait = Duration::from_secs(after).min(MAX_RETRY_AFTER);
                }
                Some(s)
            }
            Err(e) => {
                tracing::debug!(device, error = %e, "push service unreachable");
                None
            }
        };
        match status {
            Some(200..=299) => {
                tracing::info!(device, attempt, "push sent");
                return;
            }
            Some(404 | 410) => {
                tracing::info!(device, "push subscription gone; dropped");
                if let Err(e) = drop_subscription(server, device, sub).await {
                    tracing::error!(error = %e, "could not drop a push subscription");
                }
                return;
            }
            Some(429 | 500..=599) | None if attempt < ATTEMPTS => {
                tracing::info!(
                    device,
                    attempt,
                    status,
                    retry_in_ms = wait.as_millis() as u64,
                    "push failed; will retry"
                );
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_RETRY_AFTER);
            }
            other => {
                tracing::warn!(device, status = other, "push refused; not retried");
                return;
            }
        }
    }
}

/// Removes `sub` for `device`, unless the device has subscribed anew meanwhile.
async fn drop_subscription(
    server: &RelayServer,
    device: &str,
    sub: &Subscription,
) -> Result<(), StoreFail> {
    let mut w = server.write(Scope::Relay).await?;
    let current: Option<Subscription> = w
        .get_json(Tree::PushSubscriptions, device.as_bytes())
        .await?;
    if current.as_ref() == Some(sub) {
        w.remove(Tree::PushSubscriptions, device.as_bytes()).await?;
        w.commit(server).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_are_checked_field_by_field() {
        let ua = p256::SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
        let point = ua.public_key().to_sec1_bytes();
        let good = Subscription {
            endpoint: "https://push.example.net/x".into(),
            keys: SubscriptionKeys {
                p256dh: URL_SAFE_NO_PAD.encode(&point),
                auth: URL_SAFE_NO_PAD.encode([7u8; 16]),
            },
        };
        assert_eq!(good.check(false), Ok(()));
        let http = Subscription {
            endpoint: "http://127.0.0.1:1/x".into(),
            ..good.clone()
        };
        assert!(http.check(false).unwrap_err().contains("https"));
        assert_eq!(http.check(true), Ok(()));
        let mut bad = good.clone();
        bad.keys.auth = "short".into();
        assert!(bad.check(false).unwrap_err().contains("keys.auth"));
        bad = good.clone();
        bad.keys.p256dh = URL_SAFE_NO_PAD.encode([4u8; 65]);
        assert!(bad.check(false).unwrap_err().contains("keys.p256dh"));
        assert_eq!(topic("interaction:abc").len(), 32);
    }
}
