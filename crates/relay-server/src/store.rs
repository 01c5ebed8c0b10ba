//! The reference Relay's durable state: its records, on either store of [`crate::kv`].
//! Tokens are stored only as SHA-256 hashes; every change is committed (flushed, with sled)
//! before the reply that reports it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentnotify_http::ApiError;
use agentnotify_model::secret::random_b64url;
use agentnotify_model::Timestamp;
use agentnotify_relay_proto::wire::{AnswerPost, AnswerResult, DeviceInfo, Envelope};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hyper::body::Incoming;
use hyper::{header, Request, StatusCode};
use serde::{Deserialize, Serialize};

use crate::handlers::forbidden;
use crate::kv::{Kv, Scope, Tree, Write};

/// Expired envelopes are kept this long, so a late answer is told "expired", not "unknown".
pub(crate) const EXPIRED_GRACE: Duration = Duration::from_secs(3600);
/// Answers are kept this long after they arrive.
pub(crate) const ANSWER_RETENTION: Duration = Duration::from_secs(7 * 86_400);

#[derive(Debug, thiserror::Error)]
pub enum RelayServerError {
    #[error("cannot open the relay store at {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: sled::Error,
    },
    #[error("cannot read or create the VAPID key {path}: {source}")]
    Vapid {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The PostgreSQL store could not be reached, migrated or listened to (the reason; never
    /// the URL, which may hold a password).
    #[error("{0}")]
    Database(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreFail {
    #[error("relay storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("a stored relay record could not be decoded: {0}")]
    Decode(#[from] serde_json::Error),
    /// The database is down, restarting or out of connections: worth a retry.
    #[error("the relay database is unavailable: {0}")]
    Unavailable(String),
}

/// Seconds a client is told to wait when the database is unavailable.
const UNAVAILABLE_RETRY_AFTER: u64 = 1;

impl From<StoreFail> for ApiError {
    fn from(e: StoreFail) -> ApiError {
        if let StoreFail::Unavailable(_) = e {
            tracing::warn!(error = %e, "relay database unavailable");
            let mut err = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "the relay's database is unavailable for a moment; nothing was changed, retry",
            );
            err.retry_after = Some(UNAVAILABLE_RETRY_AFTER);
            return err;
        }
        tracing::error!(error = %e, "relay storage failure");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the relay could not store the change; nothing was changed",
        )
    }
}

/// The Relay's durable state, and the feeds that tell waiters of its changes.
pub struct RelayServer {
    /// sled (one process) or PostgreSQL (any number of processes).
    pub(crate) kv: Kv,
    /// Every change, of every process, for long-polls and device streams (in memory: a
    /// restart ends every wait, and clients re-read on reconnect).
    pub(crate) feed: crate::live::Feed,
    /// Only the changes this process made (the push sender's feed).
    pub(crate) local: crate::live::Feed,
    /// The devices this process holds streams for.
    pub(crate) held: Arc<crate::live::Held>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Principal {
    /// `installation` or `device`.
    pub(crate) kind: String,
    pub(crate) id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct InstallationRecord {
    pub(crate) id: String,
    pub(crate) pairing_token_sha256: String,
    pub(crate) created_at: Timestamp,
}

/// One pairing code as the Relay knows it: only its token's hash, its expiry, and who used it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PairingRecord {
    pub(crate) installation_id: String,
    pub(crate) pairing_id: String,
    pub(crate) expires_at: Timestamp,
    pub(crate) used_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AnswerRecord {
    pub(crate) seq: u64,
    pub(crate) body_sha256: String,
    pub(crate) answer: AnswerPost,
    pub(crate) result: AnswerResult,
    pub(crate) received: Timestamp,
}

pub(crate) fn key2(a: &str, b: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(a.len() + 1 + b.len());
    k.extend_from_slice(a.as_bytes());
    k.push(0);
    k.extend_from_slice(b);
    k
}

pub(crate) use agentnotify_model::digest::hex_sha256 as sha256_hex;

pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    v: Option<Vec<u8>>,
) -> Result<Option<T>, StoreFail> {
    Ok(match v {
        Some(v) => Some(serde_json::from_slice(&v)?),
        None => None,
    })
}

pub(crate) fn json<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreFail> {
    Ok(serde_json::to_vec(value)?)
}

pub(crate) fn encode_cursor(seq: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("c1:{seq}"))
}

pub(crate) fn decode_cursor(s: &str) -> Option<u64> {
    let raw = URL_SAFE_NO_PAD.decode(s.trim()).ok()?;
    std::str::from_utf8(&raw)
        .ok()?
        .strip_prefix("c1:")?
        .parse()
        .ok()
}

fn feeds() -> (crate::live::Feed, crate::live::Feed) {
    (
        tokio::sync::broadcast::channel(crate::live::FEED_CAPACITY).0,
        tokio::sync::broadcast::channel(crate::live::FEED_CAPACITY).0,
    )
}

impl RelayServer {
    /// The sled store in `dir` (made 0700).
    pub fn open(dir: &Path) -> Result<Arc<RelayServer>, RelayServerError> {
        let fail = |source| RelayServerError::Open {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| fail(e.into()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        let db = sled::Config::new()
            .path(dir.join("relay.sled"))
            .cache_capacity(8 * 1024 * 1024)
            // Every acknowledged change is flushed by its commit; sled's own flusher would
            // only wake an idle Relay to fsync nothing.
            .flush_every_ms(None)
            .open()
            .map_err(fail)?;
        let (feed, local) = feeds();
        Ok(Arc::new(RelayServer {
            kv: Kv::Sled(crate::kv::Sled::open(db).map_err(fail)?),
            feed,
            local,
            held: Arc::default(),
        }))
    }

    /// The PostgreSQL store at `url`, migrated, with its change listener running.
    pub async fn open_postgres(url: &str) -> Result<Arc<RelayServer>, RelayServerError> {
        let pg = crate::pg::Pg::connect(url)
            .await
            .map_err(RelayServerError::Database)?;
        let config = pg.listener();
        let (feed, local) = feeds();
        let server = Arc::new(RelayServer {
            kv: Kv::Pg(pg),
            feed,
            local,
            held: Arc::default(),
        });
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(crate::pg::listen(Arc::clone(&server), config, ready_tx));
        ready_rx
            .await
            .unwrap_or_else(|_| Err("the change listener stopped".into()))
            .map_err(RelayServerError::Database)?;
        Ok(server)
    }

    /// Reads one record.
    pub(crate) async fn get<T: serde::de::DeserializeOwned>(
        &self,
        t: Tree,
        key: &[u8],
    ) -> Result<Option<T>, StoreFail> {
        decode(self.kv.get(t, key).await?)
    }

    /// Every record of a tree whose key starts with `prefix`.
    pub(crate) async fn values<T: serde::de::DeserializeOwned>(
        &self,
        t: Tree,
        prefix: &[u8],
    ) -> Result<Vec<T>, StoreFail> {
        let mut out = Vec::new();
        for (_, v) in self.kv.scan(t, prefix).await? {
            out.push(serde_json::from_slice(&v)?);
        }
        Ok(out)
    }

    pub(crate) async fn write(&self, scope: Scope<'_>) -> Result<Write<'_>, StoreFail> {
        self.kv.write(scope).await
    }

    /// The device's envelopes that have not expired.
    pub(crate) async fn live_envelopes(&self, device_id: &str) -> Result<Vec<Envelope>, StoreFail> {
        let now = Timestamp::now();
        let all: Vec<Envelope> = self.values(Tree::Envelopes, &key2(device_id, b"")).await?;
        Ok(all
            .into_iter()
            .filter(|e| Timestamp::parse_rfc3339(&e.expires_at).is_some_and(|t| t > now))
            .collect())
    }

    pub(crate) async fn principal(&self, req: &Request<Incoming>) -> Result<Principal, ApiError> {
        let unauthorized = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or unknown bearer token",
            )
        };
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(unauthorized)?;
        self.get::<Principal>(Tree::Tokens, sha256_hex(token.as_bytes()).as_bytes())
            .await?
            .ok_or_else(unauthorized)
    }

    pub(crate) async fn installation(&self, req: &Request<Incoming>) -> Result<String, ApiError> {
        let p = self.principal(req).await?;
        if p.kind != "installation" {
            return Err(forbidden(
                "wrong_token_kind",
                "this route takes an installation token, not a device token",
            ));
        }
        Ok(p.id)
    }

    pub(crate) async fn device(&self, req: &Request<Incoming>) -> Result<DeviceInfo, ApiError> {
        let p = self.principal(req).await?;
        if p.kind != "device" {
            return Err(forbidden(
                "wrong_token_kind",
                "this route takes a device token, not an installation token",
            ));
        }
        let device = self
            .get::<DeviceInfo>(Tree::Devices, p.id.as_bytes())
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "unknown device: it was removed; pair it again",
                )
            })?;
        self.touch(&device).await?;
        Ok(device)
    }

    /// Records when a device was last seen, to the minute. Not flushed on its own (with
    /// sled it rides along the next commit), and never re-creates a device removed meanwhile.
    async fn touch(&self, device: &DeviceInfo) -> Result<(), StoreFail> {
        let now = Timestamp::now();
        let fresh = device
            .last_seen_at
            .as_deref()
            .and_then(Timestamp::parse_rfc3339)
            .is_some_and(|t| t.plus(Duration::from_secs(60)) > now);
        if fresh {
            return Ok(());
        }
        let mut d = device.clone();
        d.last_seen_at = Some(now.to_rfc3339());
        self.kv
            .replace_existing(Tree::Devices, d.device_id.as_bytes(), &json(&d)?)
            .await
    }

    /// Drops envelopes well past expiry, answers past retention, and pairings a day past
    /// their expiry (kept that long so a late try hears "expired", not "unknown").
    pub(crate) async fn prune(&self, now: Timestamp) -> Result<usize, StoreFail> {
        let day = Duration::from_secs(86_400);
        let pairings = self
            .prune_tree(Tree::Pairings, |v| {
                serde_json::from_slice::<PairingRecord>(v)
                    .map_or(true, |p| p.expires_at.plus(day) < now)
            })
            .await?;
        let envelopes = self
            .prune_tree(Tree::Envelopes, |v| {
                serde_json::from_slice::<Envelope>(v)
                    .ok()
                    .and_then(|e| Timestamp::parse_rfc3339(&e.expires_at))
                    .is_none_or(|t| t.plus(EXPIRED_GRACE) < now)
            })
            .await?;
        let withdrawn = self
            .prune_tree(Tree::Withdrawn, |v| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|v| v.rsplit(' ').next())
                    .and_then(Timestamp::parse_rfc3339)
                    .is_none_or(|t| t.plus(ANSWER_RETENTION) < now)
            })
            .await?;
        let answers = self
            .prune_tree(Tree::Answers, |v| {
                serde_json::from_slice::<AnswerRecord>(v)
                    .is_ok_and(|rec| rec.received.plus(ANSWER_RETENTION) < now)
            })
            .await?;
        Ok(pairings + envelopes + withdrawn + answers)
    }

    /// Removes the records of `t` that `stale` finds stale. They are found by reading pages
    /// outside the write lock, and removed in small writes that check each one again, so
    /// pruning a large store never holds up the Relay's writers for long.
    async fn prune_tree(&self, t: Tree, stale: impl Fn(&[u8]) -> bool) -> Result<usize, StoreFail> {
        let end = [u8::MAX; MAX_KEY_LEN];
        let mut start = Vec::new();
        let mut removed = 0;
        loop {
            let page = self.kv.range(t, &start, &end, PRUNE_PAGE).await?;
            let Some((last, _)) = page.last() else {
                return Ok(removed);
            };
            start = last.clone();
            start.push(0);
            let keys: Vec<&Vec<u8>> = page
                .iter()
                .filter(|(_, v)| stale(v))
                .map(|(k, _)| k)
                .collect();
            if !keys.is_empty() {
                let mut w = self.write(Scope::Relay).await?;
                for key in keys {
                    if let Some(v) = w.get(t, key).await? {
                        if stale(&v) {
                            w.remove_record(t, key, &v).await?;
                            removed += 1;
                        }
                    }
                }
                w.commit(self).await?;
            }
            if page.len() < PRUNE_PAGE {
                return Ok(removed);
            }
        }
    }
}

/// Records read, and at most removed in one write, per pruning step.
const PRUNE_PAGE: usize = 500;
/// Longer than any key the Relay makes (ids, a separator, an event id of at most 200
/// characters), so a range up to this many 0xff bytes reaches the end of a tree.
const MAX_KEY_LEN: usize = 1024;

impl Write<'_> {
    pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
        &mut self,
        t: Tree,
        key: &[u8],
    ) -> Result<Option<T>, StoreFail> {
        decode(self.get(t, key).await?)
    }

    pub(crate) async fn put_json<T: Serialize>(
        &mut self,
        t: Tree,
        key: &[u8],
        value: &T,
    ) -> Result<(), StoreFail> {
        self.put(t, key, &json(value)?).await
    }

    pub(crate) async fn mint_token(&mut self, kind: &str, id: &str) -> Result<String, StoreFail> {
        let token = random_b64url(32);
        let hash = sha256_hex(token.as_bytes());
        self.put_json(
            Tree::Tokens,
            hash.as_bytes(),
            &Principal {
                kind: kind.into(),
                id: id.into(),
            },
        )
        .await?;
        if kind == "device" {
            self.put(Tree::DeviceTokens, id.as_bytes(), hash.as_bytes())
                .await?;
        }
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_opaque_and_checked() {
        assert_eq!(decode_cursor(&encode_cursor(42)), Some(42));
        assert_eq!(decode_cursor("42"), None);
        assert_eq!(decode_cursor("!!"), None);
    }
}
