//! The Relay's two stores behind one small interface: named ordered maps of bytes ("trees"),
//! read directly and changed inside a [`Write`], one writer at a time.
//!
//! sled is the zero-setup default for one box; PostgreSQL (`--database`, [`crate::pg`])
//! lets many processes share one state. Both keep the same trees with the same keys, so the
//! handlers are written once and the two stores cannot drift apart.

use crate::live::Change;
use crate::store::StoreFail;

/// One kind of record. The name is the sled tree and the `tree` column in PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tree {
    /// sha256(token) → `Principal`; tokens themselves are never stored.
    Tokens,
    Installations,
    Devices,
    /// device id → sha256(its token), so removing a device removes its token.
    DeviceTokens,
    /// sha256(pairing token) → `PairingRecord`: single-use, short-lived codes.
    Pairings,
    /// device id → its Web Push subscription.
    PushSubscriptions,
    /// device ‖ 0 ‖ event id → `Envelope`.
    Envelopes,
    /// installation ‖ 0 ‖ seq (big endian) → `AnswerRecord`.
    Answers,
    /// installation ‖ 0 ‖ response id → seq.
    AnswerIds,
    /// installation ‖ 0 ‖ interaction id → accepted response id.
    Answered,
    /// installation ‖ 0 ‖ interaction id → "reason RFC3339" of the desktop's withdrawal.
    Withdrawn,
    /// Relay-wide settings shared by every process (the VAPID key with PostgreSQL).
    Meta,
    /// installation ‖ 0 ‖ device id → empty: an installation's devices without a scan of
    /// every installation's ([`crate::index`]).
    InstallationDevices,
    /// installation ‖ 0 ‖ sha256(event id) ‖ device id → empty: the devices holding an
    /// envelope, so a withdrawal touches only them ([`crate::index`]).
    Recipients,
}

pub(crate) const TREES: [Tree; 14] = [
    Tree::Tokens,
    Tree::Installations,
    Tree::Devices,
    Tree::DeviceTokens,
    Tree::Pairings,
    Tree::PushSubscriptions,
    Tree::Envelopes,
    Tree::Answers,
    Tree::AnswerIds,
    Tree::Answered,
    Tree::Withdrawn,
    Tree::Meta,
    Tree::InstallationDevices,
    Tree::Recipients,
];

impl Tree {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tree::Tokens => "tokens",
            Tree::Installations => "installations",
            Tree::Devices => "devices",
            Tree::DeviceTokens => "device_tokens",
            Tree::Pairings => "pairings",
            Tree::PushSubscriptions => "push_subscriptions",
            Tree::Envelopes => "envelopes",
            Tree::Answers => "answers",
            Tree::AnswerIds => "answer_ids",
            Tree::Answered => "answered",
            Tree::Withdrawn => "withdrawn",
            Tree::Meta => "meta",
            Tree::InstallationDevices => "installation_devices",
            Tree::Recipients => "recipients",
        }
    }
}

pub(crate) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The first key after every key that starts with `prefix` (None: no such key).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The sled store: one database, a tree per record kind, a process-wide write lock.
pub(crate) struct Sled {
    pub(crate) db: sled::Db,
    trees: Vec<sled::Tree>,
    /// Serialises read-check-write sequences; one process owns the database.
    write: tokio::sync::Mutex<()>,
}

impl Sled {
    pub(crate) fn open(db: sled::Db) -> Result<Sled, sled::Error> {
        let trees = TREES
            .iter()
            .map(|t| db.open_tree(t.name()))
            .collect::<Result<_, _>>()?;
        Ok(Sled {
            db,
            trees,
            write: tokio::sync::Mutex::new(()),
        })
    }

    fn tree(&self, t: Tree) -> &sled::Tree {
        &self.trees[TREES
            .iter()
            .position(|x| *x == t)
            .expect("every tree is opened")]
    }

    fn scan(&self, t: Tree, prefix: &[u8]) -> Result<Pairs, StoreFail> {
        let mut out = Vec::new();
        for entry in self.tree(t).scan_prefix(prefix) {
            let (k, v) = entry?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }
}

/// What a write may change, and so which other writers it waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// One installation's records and its devices': waits only for writers of the same
    /// installation (every contract rule that needs atomicity lies within one).
    Installation(&'a str),
    /// Anything: waits for every writer, and they for it (pruning, indexing, Relay-wide
    /// settings).
    Relay,
}

/// Where the Relay keeps its state.
pub(crate) enum Kv {
    Sled(Sled),
    Pg(crate::pg::Pg),
}

impl Kv {
    pub(crate) async fn get(&self, t: Tree, key: &[u8]) -> Result<Option<Vec<u8>>, StoreFail> {
        match self {
            Kv::Sled(s) => Ok(s.tree(t).get(key)?.map(|v| v.to_vec())),
            Kv::Pg(p) => crate::pg::select(&p.client().await?, t, key).await,
        }
    }

    /// Every pair whose key starts with `prefix`, in key order.
    pub(crate) async fn scan(&self, t: Tree, prefix: &[u8]) -> Result<Pairs, StoreFail> {
        match self {
            Kv::Sled(s) => s.scan(t, prefix),
            Kv::Pg(p) => crate::pg::select_prefix(&p.client().await?, t, prefix).await,
        }
    }

    /// Up to `limit` pairs from `start` to `end` (both included), in key order.
    pub(crate) async fn range(
        &self,
        t: Tree,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Pairs, StoreFail> {
        match self {
            Kv::Sled(s) => {
                let mut out = Vec::new();
                for entry in s.tree(t).range(start.to_vec()..=end.to_vec()).take(limit) {
                    let (k, v) = entry?;
                    out.push((k.to_vec(), v.to_vec()));
                }
                Ok(out)
            }
            Kv::Pg(p) => p.range(t, start, end, limit).await,
        }
    }

    /// Replaces the value of `key` if it still exists, outside any write: for bookkeeping
    /// that may lose a race (a device's "last seen"), never re-creating a removed record.
    pub(crate) async fn replace_existing(
        &self,
        t: Tree,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StoreFail> {
        match self {
            Kv::Sled(s) => {
                s.tree(t)
                    .fetch_and_update(key, |old| old.map(|_| value.to_vec()))?;
                Ok(())
            }
            Kv::Pg(p) => p.replace_existing(t, key, value).await,
        }
    }

    /// Starts a change: waits until no other writer (in any process) whose scope overlaps
    /// `scope` is between its reads and its commit. sled has one process and one writer at
    /// a time whatever the scope.
    pub(crate) async fn write(&self, scope: Scope<'_>) -> Result<Write<'_>, StoreFail> {
        Ok(match self {
            Kv::Sled(s) => Write::Sled {
                kv: s,
                _guard: s.write.lock().await,
                changes: Vec::new(),
            },
            Kv::Pg(p) => Write::Pg(Box::new(p.write(scope).await?)),
        })
    }
}

/// One change in progress: its reads see every earlier change, its writes become durable
/// (and its announcements are heard) at [`Write::commit`], or never.
pub(crate) enum Write<'a> {
    Sled {
        kv: &'a Sled,
        _guard: tokio::sync::MutexGuard<'a, ()>,
        changes: Vec<Change>,
    },
    /// Boxed: a pooled connection is much larger than the sled variant.
    Pg(Box<crate::pg::PgWrite>),
}

impl Write<'_> {
    pub(crate) async fn get(&mut self, t: Tree, key: &[u8]) -> Result<Option<Vec<u8>>, StoreFail> {
        match self {
            Write::Sled { kv, .. } => Ok(kv.tree(t).get(key)?.map(|v| v.to_vec())),
            Write::Pg(w) => w.get(t, key).await,
        }
    }

    pub(crate) async fn scan(&mut self, t: Tree, prefix: &[u8]) -> Result<Pairs, StoreFail> {
        match self {
            Write::Sled { kv, .. } => kv.scan(t, prefix),
            Write::Pg(w) => w.scan(t, prefix).await,
        }
    }

    pub(crate) async fn put(&mut self, t: Tree, key: &[u8], value: &[u8]) -> Result<(), StoreFail> {
        match self {
            Write::Sled { kv, .. } => {
                kv.tree(t).insert(key, value)?;
                Ok(())
            }
            Write::Pg(w) => w.put(t, key, value).await,
        }
    }

    /// Removes `key`; returns its value if it was there.
    pub(crate) async fn remove(
        &mut self,
        t: Tree,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreFail> {
        match self {
            Write::Sled { kv, .. } => Ok(kv.tree(t).remove(key)?.map(|v| v.to_vec())),
            Write::Pg(w) => w.remove(t, key).await,
        }
    }

    /// The next answer sequence number (starting at 1: cursor 0 means "from the beginning").
    /// Taken inside the write, so numbers become visible in the order they were handed out
    /// and a reader's cursor never skips one committed later.
    pub(crate) async fn next_seq(&mut self) -> Result<u64, StoreFail> {
        match self {
            Write::Sled { kv, .. } => Ok(kv.db.generate_id()? + 1),
            Write::Pg(w) => w.next_seq().await,
        }
    }

    /// Tells every waiter (of every process) about `change` once this write commits.
    pub(crate) async fn announce(&mut self, change: Change) -> Result<(), StoreFail> {
        match self {
            Write::Sled { changes, .. } => {
                changes.push(change);
                Ok(())
            }
            Write::Pg(w) => w.announce(change).await,
        }
    }

    /// Makes the change durable, then lets its announcements out.
    pub(crate) async fn commit(self, server: &crate::RelayServer) -> Result<(), StoreFail> {
        let changes = match self {
            Write::Sled { kv, changes, .. } => {
                let db = kv.db.clone();
                // On tokio's blocking pool, as the broker's store does, rather than sled's
                // `flush_async`, whose own thread pool adds a hop per write.
                tokio::task::spawn_blocking(move || db.flush())
                    .await
                    .map_err(|e| StoreFail::Sled(sled::Error::ReportableBug(e.to_string())))??;
                for c in &changes {
                    let _ = server.feed.send(c.clone());
                }
                changes
            }
            Write::Pg(w) => (*w).commit().await?,
        };
        // This process's own changes: the push sender rings doorbells only for these, so
        // one change rings once however many processes hear of it.
        for c in changes {
            let _ = server.local.send(c);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_first_key_past_the_prefix() {
        assert_eq!(prefix_end(b"ab\0"), Some(b"ab\x01".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }
}
