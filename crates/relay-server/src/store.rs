//! The reference Relay's durable state: one sled database with a tree per record kind.
//! Tokens are stored only as SHA-256 hashes; every change is flushed by [`RelayServer::commit`]
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
}

impl From<StoreFail> for ApiError {
    fn from(e: StoreFail) -> ApiError {
        tracing::error!(error = %e, "relay storage failure");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the relay could not store the change; nothing was changed",
        )
    }
}

/// The Relay's durable state.
pub struct RelayServer {
    pub(crate) db: sled::Db,
    /// sha256(token) → [`Principal`]; tokens themselves are never stored.
    pub(crate) tokens: sled::Tree,
    pub(crate) installations: sled::Tree,
    pub(crate) devices: sled::Tree,
    /// device id → sha256(its token), so removing a device removes its token.
    pub(crate) device_tokens: sled::Tree,
    /// sha256(pairing token) → [`PairingRecord`]: single-use, short-lived codes.
    pub(crate) pairings: sled::Tree,
    /// device id → its Web Push subscription (`push::Subscription`).
    pub(crate) push_subscriptions: sled::Tree,
    /// device ‖ 0 ‖ event id → [`Envelope`].
    pub(crate) envelopes: sled::Tree,
    /// installation ‖ 0 ‖ seq (big endian) → [`AnswerRecord`].
    pub(crate) answers: sled::Tree,
    /// installation ‖ 0 ‖ response id → seq.
    pub(crate) answer_ids: sled::Tree,
    /// installation ‖ 0 ‖ interaction id → accepted response id.
    pub(crate) answered: sled::Tree,
    /// installation ‖ 0 ‖ interaction id → when the desktop withdrew it (RFC 3339).
    pub(crate) withdrawn: sled::Tree,
    /// Serialises read-check-write sequences; a reference server needs no more.
    pub(crate) write: tokio::sync::Mutex<()>,
    /// Changes, for long-polls and device streams (in memory: a restart ends every wait,
    /// and clients re-read on reconnect).
    pub(crate) feed: crate::live::Feed,
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

pub(crate) fn get<T: serde::de::DeserializeOwned>(
    tree: &sled::Tree,
    key: &[u8],
) -> Result<Option<T>, StoreFail> {
    Ok(match tree.get(key)? {
        Some(v) => Some(serde_json::from_slice(&v)?),
        None => None,
    })
}

pub(crate) fn put<T: Serialize>(tree: &sled::Tree, key: &[u8], value: &T) -> Result<(), StoreFail> {
    tree.insert(key, serde_json::to_vec(value)?)?;
    Ok(())
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

impl RelayServer {
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
            // Every acknowledged change is flushed by `commit`; sled's own flusher would
            // only wake an idle Relay to fsync nothing.
            .flush_every_ms(None)
            .open()
            .map_err(fail)?;
        let tree = |name: &str| db.open_tree(name).map_err(fail);
        Ok(Arc::new(RelayServer {
            tokens: tree("tokens")?,
            installations: tree("installations")?,
            devices: tree("devices")?,
            device_tokens: tree("device_tokens")?,
            pairings: tree("pairings")?,
            push_subscriptions: tree("push_subscriptions")?,
            envelopes: tree("envelopes")?,
            answers: tree("answers")?,
            answer_ids: tree("answer_ids")?,
            answered: tree("answered")?,
            withdrawn: tree("withdrawn")?,
            db,
            write: tokio::sync::Mutex::new(()),
            feed: tokio::sync::broadcast::channel(crate::live::FEED_CAPACITY).0,
        }))
    }

    /// Tells every waiter of a change (after it is durable).
    pub(crate) fn announce(&self, change: crate::live::Change) {
        let _ = self.feed.send(change);
    }

    /// The device's envelopes that have not expired.
    pub(crate) fn live_envelopes(&self, device_id: &str) -> Result<Vec<Envelope>, StoreFail> {
        let now = Timestamp::now();
        let mut out = Vec::new();
        for entry in self.envelopes.scan_prefix(key2(device_id, b"")) {
            let (_, v) = entry?;
            let e: Envelope = serde_json::from_slice(&v)?;
            if Timestamp::parse_rfc3339(&e.expires_at).is_some_and(|t| t > now) {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Flushes every change so far to disk; a reply that reports a change waits for it.
    /// On tokio's blocking pool, as the broker's store does, rather than sled's
    /// `flush_async`, whose own thread pool adds a hop per write.
    pub(crate) async fn commit(&self) -> Result<(), StoreFail> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || db.flush())
            .await
            .map_err(|e| StoreFail::Sled(sled::Error::ReportableBug(e.to_string())))??;
        Ok(())
    }

    pub(crate) fn principal(&self, req: &Request<Incoming>) -> Result<Principal, ApiError> {
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
        get::<Principal>(&self.tokens, sha256_hex(token.as_bytes()).as_bytes())?
            .ok_or_else(unauthorized)
    }

    pub(crate) fn installation(&self, req: &Request<Incoming>) -> Result<String, ApiError> {
        let p = self.principal(req)?;
        if p.kind != "installation" {
            return Err(forbidden(
                "wrong_token_kind",
                "this route takes an installation token, not a device token",
            ));
        }
        Ok(p.id)
    }

    pub(crate) fn device(&self, req: &Request<Incoming>) -> Result<DeviceInfo, ApiError> {
        let p = self.principal(req)?;
        if p.kind != "device" {
            return Err(forbidden(
                "wrong_token_kind",
                "this route takes a device token, not an installation token",
            ));
        }
        let device = get::<DeviceInfo>(&self.devices, p.id.as_bytes())?.ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "unknown device: it was removed; pair it again",
            )
        })?;
        self.touch(&device)?;
        Ok(device)
    }

    /// Records when a device was last seen, to the minute. Not flushed on its own (it rides
    /// along the next commit), and never re-creates a device removed meanwhile.
    fn touch(&self, device: &DeviceInfo) -> Result<(), StoreFail> {
        let now = Timestamp::now();
        let fresh = device
            .last_seen_at
            .as_deref()
            .and_then(Timestamp::parse_rfc3339)
            .is_some_and(|t| t.plus(Duration::from_secs(60)) > now);
        if fresh {
            return Ok(());
        }
        let seen = now.to_rfc3339();
        self.devices
            .fetch_and_update(device.device_id.as_bytes(), |old| {
                let mut d: DeviceInfo = serde_json::from_slice(old?).ok()?;
                d.last_seen_at = Some(seen.clone());
                serde_json::to_vec(&d).ok()
            })?;
        Ok(())
    }

    pub(crate) fn mint_token(&self, kind: &str, id: &str) -> Result<String, StoreFail> {
        let token = random_b64url(32);
        let hash = sha256_hex(token.as_bytes());
        put(
            &self.tokens,
            hash.as_bytes(),
            &Principal {
                kind: kind.into(),
                id: id.into(),
            },
        )?;
        if kind == "device" {
            self.device_tokens.insert(id.as_bytes(), hash.as_bytes())?;
        }
        Ok(token)
    }

    /// Removes a device with its token and envelopes. Returns whether it existed.
    pub(crate) fn remove_device(&self, device_id: &str) -> Result<bool, StoreFail> {
        let existed = self.devices.remove(device_id.as_bytes())?.is_some();
        self.push_subscriptions.remove(device_id.as_bytes())?;
        if let Some(hash) = self.device_tokens.remove(device_id.as_bytes())? {
            self.tokens.remove(hash)?;
        }
        for key in self.envelopes.scan_prefix(key2(device_id, b"")).keys() {
            self.envelopes.remove(key?)?;
        }
        Ok(existed)
    }

    /// Drops envelopes well past expiry, answers past retention, and pairings a day past
    /// their expiry (kept that long so a late try hears "expired", not "unknown").
    pub fn prune(&self, now: Timestamp) -> Result<(), sled::Error> {
        for entry in self.pairings.iter() {
            let (k, v) = entry?;
            let stale = serde_json::from_slice::<PairingRecord>(&v).map_or(true, |p| {
                p.expires_at.plus(Duration::from_secs(86_400)) < now
            });
            if stale {
                self.pairings.remove(k)?;
            }
        }
        for entry in self.envelopes.iter() {
            let (k, v) = entry?;
            let expired = serde_json::from_slice::<Envelope>(&v)
                .ok()
                .and_then(|e| Timestamp::parse_rfc3339(&e.expires_at))
                .is_none_or(|t| t.plus(EXPIRED_GRACE) < now);
            if expired {
                self.envelopes.remove(k)?;
            }
        }
        for entry in self.withdrawn.iter() {
            let (k, v) = entry?;
            let old = std::str::from_utf8(&v)
                .ok()
                .and_then(|v| v.rsplit(' ').next())
                .and_then(Timestamp::parse_rfc3339)
                .is_none_or(|t| t.plus(ANSWER_RETENTION) < now);
            if old {
                self.withdrawn.remove(k)?;
            }
        }
        for entry in self.answers.iter() {
            let (k, v) = entry?;
            if let Ok(rec) = serde_json::from_slice::<AnswerRecord>(&v) {
                if rec.received.plus(ANSWER_RETENTION) < now {
                    self.answers.remove(k)?;
                    let inst = &rec.answer.installation_id;
                    self.answer_ids
                        .remove(key2(inst, rec.answer.response_id.as_bytes()))?;
                }
            }
        }
        Ok(())
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
