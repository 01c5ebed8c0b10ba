//! Durable storage on sled: interactions, notifications, a time index, the delivery outbox
//! and the answer capabilities of delivered notifications.
//!
//! The store decides nothing; it encodes records and makes them durable. sled writes are
//! durable only after a flush, so every change a reply reports goes through [`Store::commit`]
//! first. Commits are grouped: concurrent callers share one flush (group commit), which is
//! what lets thousands of answers per second stay durable on one disk.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;

use crate::model::{Interaction, Notification};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: sled::Error,
    },
    #[error("storage error: {0}")]
    Sled(#[from] sled::Error),
    #[error("the flush to disk did not finish: {0}")]
    FlushAborted(String),
    #[error("a stored record could not be decoded: {0}")]
    Corrupt(#[from] serde_json::Error),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The broker's database. Only the daemon opens it.
pub struct Store {
    db: sled::Db,
    interactions: sled::Tree,
    interactions_by_time: sled::Tree,
    notifications: sled::Tree,
    /// The delivery outbox of every channel (SPEC §11.2): id → entry, encoded by the broker.
    outbox: sled::Tree,
    /// Answer capabilities (SPEC §11.4): SHA-256 of a token → what it may answer.
    capabilities: sled::Tree,
    written: AtomicU64,
    flushed: AtomicU64,
    flush_lock: tokio::sync::Mutex<()>,
}

impl Store {
    /// Opens (creating) the database. Its folder is made private first: records hold
    /// prompts and nonces.
    pub fn open(path: &Path) -> Result<Store> {
        make_private_dir(path).map_err(|e| StoreError::Open {
            path: path.display().to_string(),
            source: e.into(),
        })?;
        let db = sled::Config::new()
            .path(path)
            .cache_capacity(8 * 1024 * 1024)
            // Every acknowledged change is flushed by `commit`; sled's own flusher would
            // only wake an idle broker twice a second to fsync nothing.
            .flush_every_ms(None)
            .open()
            .map_err(|source| StoreError::Open {
                path: path.display().to_string(),
                source,
            })?;
        Ok(Store {
            interactions: db.open_tree("interactions")?,
            interactions_by_time: db.open_tree("interactions_by_time")?,
            notifications: db.open_tree("notifications")?,
            outbox: db.open_tree("outbox")?,
            capabilities: db.open_tree("capabilities")?,
            db,
            written: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
            flush_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Writes an interaction (not yet durable: call [`Store::commit`] before replying).
    pub fn put_interaction(&self, i: &Interaction) -> Result<u64> {
        let old = self
            .interactions
            .insert(i.id.as_bytes(), serde_json::to_vec(i)?)?;
        if old.is_none() {
            self.interactions_by_time
                .insert(time_key(i.created_at.millis(), &i.id), &[])?;
        }
        Ok(self.note_write())
    }

    pub fn get_interaction(&self, id: &str) -> Result<Option<Interaction>> {
        decode_opt(self.interactions.get(id.as_bytes())?)
    }

    /// Every interaction, newest first, read lazily.
    pub fn interactions_newest_first(&self) -> impl Iterator<Item = Result<Interaction>> + '_ {
        self.interactions_by_time
            .iter()
            .rev()
            .filter_map(move |entry| {
                let (key, _) = match entry {
                    Ok(kv) => kv,
                    Err(e) => return Some(Err(e.into())),
                };
                let id = &key[8..];
                match self.interactions.get(id) {
                    Ok(Some(bytes)) => Some(decode(&bytes)),
                    Ok(None) => None,
                    Err(e) => Some(Err(e.into())),
                }
            })
    }

    pub fn all_interactions(&self) -> impl Iterator<Item = Result<Interaction>> + '_ {
        self.interactions.iter().values().map(|v| decode(&v?))
    }

    pub fn remove_interaction(&self, i: &Interaction) -> Result<u64> {
        self.interactions.remove(i.id.as_bytes())?;
        self.interactions_by_time
            .remove(time_key(i.created_at.millis(), &i.id))?;
        Ok(self.note_write())
    }

    pub fn put_notification(&self, n: &Notification) -> Result<u64> {
        self.notifications
            .insert(n.id.as_bytes(), serde_json::to_vec(n)?)?;
        Ok(self.note_write())
    }

    pub fn get_notification(&self, id: &str) -> Result<Option<Notification>> {
        decode_opt(self.notifications.get(id.as_bytes())?)
    }

    pub fn all_notifications(&self) -> impl Iterator<Item = Result<Notification>> + '_ {
        self.notifications.iter().values().map(|v| decode(&v?))
    }

    pub fn remove_notification(&self, id: &str) -> Result<u64> {
        self.notifications.remove(id.as_bytes())?;
        Ok(self.note_write())
    }

    /// Writes an outbox entry (durable after [`Store::commit`]).
    pub fn put_outbox<T: serde::Serialize>(&self, id: &str, entry: &T) -> Result<u64> {
        self.outbox
            .insert(id.as_bytes(), serde_json::to_vec(entry)?)?;
        Ok(self.note_write())
    }

    pub fn get_outbox<T: DeserializeOwned>(&self, id: &str) -> Result<Option<T>> {
        decode_opt(self.outbox.get(id.as_bytes())?)
    }

    pub fn remove_outbox(&self, id: &str) -> Result<u64> {
        self.outbox.remove(id.as_bytes())?;
        Ok(self.note_write())
    }

    /// Every outbox entry, in id order.
    pub fn outbox_entries<T: DeserializeOwned>(&self) -> Result<Vec<T>> {
        self.outbox.iter().values().map(|v| decode(&v?)).collect()
    }

    /// The outbox entries whose id starts with `prefix`, in id order.
    pub fn outbox_with_prefix<T: DeserializeOwned>(&self, prefix: &str) -> Result<Vec<T>> {
        self.outbox
            .scan_prefix(prefix.as_bytes())
            .values()
            .map(|v| decode(&v?))
            .collect()
    }

    pub fn outbox_len(&self) -> usize {
        self.outbox.len()
    }

    /// Stores a capability under its key (durable after [`Store::commit`]).
    pub fn put_capability<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<u64> {
        self.capabilities
            .insert(key.as_bytes(), serde_json::to_vec(value)?)?;
        Ok(self.note_write())
    }

    /// Removes and returns a capability: of two callers presenting the same one, exactly one
    /// gets it (sled's remove is atomic).
    pub fn take_capability<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let taken = decode_opt(self.capabilities.remove(key.as_bytes())?)?;
        self.note_write();
        Ok(taken)
    }

    /// Removes every capability `drop` picks.
    pub fn retain_capabilities<T: DeserializeOwned>(
        &self,
        mut drop: impl FnMut(&T) -> bool,
    ) -> Result<usize> {
        let mut removed = 0;
        for kv in self.capabilities.iter() {
            let (key, value) = kv?;
            // An entry that no longer decodes is of no use to anyone either.
            if decode::<T>(&value).map_or(true, |v| drop(&v)) {
                self.capabilities.remove(key)?;
                removed += 1;
            }
        }
        if removed > 0 {
            self.note_write();
        }
        Ok(removed)
    }

    fn note_write(&self) -> u64 {
        self.written.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The sequence number of the latest write; commit up to it to make everything durable.
    pub fn last_write(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Returns once every write numbered `seq` or lower is on disk. Callers that arrive
    /// while a flush runs wait for it and, if it did not cover them, share the next one.
    pub async fn commit(&self, seq: u64) -> Result<()> {
        if self.flushed.load(Ordering::SeqCst) >= seq {
            return Ok(());
        }
        let _guard = self.flush_lock.lock().await;
        if self.flushed.load(Ordering::SeqCst) >= seq {
            return Ok(());
        }
        let target = self.written.load(Ordering::SeqCst);
        // On tokio's blocking pool rather than sled's `flush_async`, whose own thread pool
        // and oneshot cost ~0.1 ms more per durable write (docs/BENCHMARKS.md).
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || db.flush())
            .await
            .map_err(|e| StoreError::FlushAborted(e.to_string()))??;
        self.flushed.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }

    /// Makes every write made so far durable.
    pub async fn barrier(&self) -> Result<()> {
        self.commit(self.last_write()).await
    }

    /// Flushes synchronously (shutdown path).
    pub fn flush_now(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }
}

fn make_private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn time_key(millis: u64, id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + id.len());
    key.extend_from_slice(&millis.to_be_bytes());
    key.extend_from_slice(id.as_bytes());
    key
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    Ok(serde_json::from_slice(bytes)?)
}

fn decode_opt<T: DeserializeOwned>(bytes: Option<sled::IVec>) -> Result<Option<T>> {
    bytes.map(|b| decode(&b)).transpose()
}
