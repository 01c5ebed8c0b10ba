//! The PostgreSQL store (`relay serve --database postgres://…`, SPEC §14): the trees of
//! [`crate::kv`] as rows of one table, a pool of connections, embedded migrations, and the
//! `LISTEN/NOTIFY` feed that wakes long-polls and streams in every process.
//!
//! tokio-postgres with deadpool: plain runtime queries (no database needed to build), the
//! asynchronous notifications `LISTEN` needs, and far fewer dependencies than sqlx.
//!
//! Every write takes transaction-scoped advisory locks first: writers of one installation, in
//! all processes, run one after another, as the sled store's write lock makes every writer
//! do in one process, so "first answer wins" and "an accepted answer withdraws the question"
//! are decided by the database. Writers of different installations run side by side; a
//! Relay-wide write (pruning, indexing) waits for all of them and they for it.

use std::sync::Arc;
use std::time::Duration;

use agentnotify_relay_proto::wire::AnswerResult;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use serde::{Deserialize, Serialize};
use tokio_postgres::config::SslMode;
use tokio_postgres::{AsyncMessage, NoTls};

use sha2::Digest;

use crate::kv::{prefix_end, Pairs, Scope, Tree};
use crate::live::Change;
use crate::store::{key2, StoreFail};

/// The channel every process listens on.
const CHANNEL: &str = "agentnotify_relay";
/// Advisory lock keys (arbitrary, fixed): Relay-wide writes hold the write lock alone, an
/// installation's writes share it and hold their installation's lock alone; migrations
/// have their own.
const WRITE_LOCK: i64 = 0x6167_6e74_7772;
const MIGRATE_LOCK: i64 = 0x6167_6e74_6d67;
/// The first half of an installation's two-part lock key (a key space apart from the
/// 64-bit keys above); the second half is from the installation id's SHA-256. Two
/// installations sharing a half only wait for each other.
const INSTALLATION_LOCKS: i32 = 0x6167_6e74;
/// Connections per process.
const POOL_SIZE: usize = 16;
/// How long a request waits for a connection (or to make one) before it hears 503.
const POOL_WAIT: Duration = Duration::from_secs(5);

/// The schema, one step per version. Applied in order at start, each in its own
/// transaction, under an advisory lock: running twice, or two processes at once, is safe.
const MIGRATIONS: &[(i32, &str)] = &[(
    1,
    "CREATE TABLE relay_kv (
         tree  text  NOT NULL,
         key   bytea NOT NULL,
         value bytea NOT NULL,
         PRIMARY KEY (tree, key)
     );
     CREATE SEQUENCE relay_answer_seq AS bigint START 1;",
)];

/// The connection pool and what is needed to open the listener's own connection.
pub(crate) struct Pg {
    pool: Pool,
    config: tokio_postgres::Config,
    tls: DbTls,
}

/// How the Relay talks to its database, from the URL's `sslmode`: `require` is TLS with the
/// server's certificate verified against the system's CA store (`SSL_CERT_FILE` for a
/// private CA), stricter than libpq's `require`, which checks nothing; anything else is
/// plain TCP. An unverified TLS guards against nobody able to change the traffic, so the
/// Relay offers none.
#[derive(Clone)]
pub(crate) enum DbTls {
    Plain,
    Verified(tokio_postgres_rustls::MakeRustlsConnect),
}

impl DbTls {
    fn for_config(config: &tokio_postgres::Config) -> Result<DbTls, String> {
        if config.get_ssl_mode() != SslMode::Require {
            return Ok(DbTls::Plain);
        }
        let tls = agentnotify_relay_proto::tls::verifying_config().ok_or(
            "sslmode=require, but this machine trusts no CA certificate (set SSL_CERT_FILE to \
             the CA that signed the database's certificate)",
        )?;
        Ok(DbTls::Verified(
            tokio_postgres_rustls::MakeRustlsConnect::new(tls),
        ))
    }

    fn pool(&self, config: tokio_postgres::Config) -> deadpool_postgres::PoolBuilder {
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match self {
            DbTls::Plain => Manager::from_config(config, NoTls, manager_config),
            DbTls::Verified(tls) => Manager::from_config(config, tls.clone(), manager_config),
        };
        Pool::builder(manager)
    }
}

/// Store errors of PostgreSQL: the database is down, restarting or overloaded. The causes
/// are kept ("error performing TLS handshake" alone would not say which certificate check
/// failed); none of them holds the URL or a password.
fn unavailable(e: impl std::error::Error) -> StoreFail {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.ends_with(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    StoreFail::Unavailable(text)
}

impl Pg {
    /// Connects and migrates. The URL is never logged (it may hold a password).
    pub(crate) async fn connect(url: &str) -> Result<Pg, String> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| format!("--database is not a PostgreSQL URL: {e}"))?;
        config.connect_timeout(POOL_WAIT);
        config.application_name("agentnotify-relay");
        let tls = DbTls::for_config(&config)?;
        let pool = tls
            .pool(config.clone())
            .max_size(POOL_SIZE)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .recycle_timeout(Some(POOL_WAIT))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| format!("cannot set up the database pool: {e}"))?;
        let pg = Pg { pool, config, tls };
        let client = pg.client().await.map_err(|e| match e {
            StoreFail::Unavailable(why) => format!("cannot reach the database: {why}"),
            other => format!("cannot reach the database: {other}"),
        })?;
        let applied = migrate(&client)
            .await
            .map_err(|e| format!("cannot migrate the database: {e}"))?;
        tracing::info!(applied, "relay database schema up to date");
        Ok(pg)
    }

    pub(crate) async fn client(&self) -> Result<Object, StoreFail> {
        self.pool.get().await.map_err(unavailable)
    }

    pub(crate) async fn range(
        &self,
        t: Tree,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Pairs, StoreFail> {
        let rows = rows(
            &self.client().await?,
            "SELECT key, value FROM relay_kv WHERE tree = $1 AND key >= $2 AND key <= $3 \
             ORDER BY key LIMIT $4",
            &[&t.name(), &start, &end, &(limit as i64)],
        )
        .await?;
        Ok(pairs(rows))
    }

    pub(crate) async fn replace_existing(
        &self,
        t: Tree,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StoreFail> {
        let sql = "UPDATE relay_kv SET value = $3 WHERE tree = $1 AND key = $2";
        rows(&self.client().await?, sql, &[&t.name(), &key, &value]).await?;
        Ok(())
    }

    pub(crate) async fn write(&self, scope: Scope<'_>) -> Result<PgWrite, StoreFail> {
        let c = self.client().await?;
        // One round trip: the transaction and its locks (integers only, formatted in).
        let begin = match scope {
            Scope::Relay => format!("BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK});"),
            Scope::Installation(id) => {
                let digest = sha2::Sha256::digest(id.as_bytes());
                let half = i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
                format!(
                    "BEGIN; SELECT pg_advisory_xact_lock_shared({WRITE_LOCK}); \
                     SELECT pg_advisory_xact_lock({INSTALLATION_LOCKS}, {half});"
                )
            }
        };
        let w = PgWrite {
            client: Some(c),
            changes: Vec::new(),
        };
        w.c().batch_execute(&begin).await.map_err(unavailable)?;
        Ok(w)
    }
}

/// Runs one statement (prepared once per connection); a failure means the database is
/// unavailable.
async fn rows(
    c: &Object,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, StoreFail> {
    let st = c.prepare_cached(sql).await.map_err(unavailable)?;
    c.query(&st, params).await.map_err(unavailable)
}

/// `(key, value)` rows as pairs.
fn pairs(rows: Vec<tokio_postgres::Row>) -> Pairs {
    rows.into_iter().map(|r| (r.get(0), r.get(1))).collect()
}

/// The first column of the first row, if any: a value read or removed.
fn first_value(rows: Vec<tokio_postgres::Row>) -> Option<Vec<u8>> {
    rows.into_iter().next().map(|r| r.get(0))
}

pub(crate) async fn select(c: &Object, t: Tree, key: &[u8]) -> Result<Option<Vec<u8>>, StoreFail> {
    let sql = "SELECT value FROM relay_kv WHERE tree = $1 AND key = $2";
    Ok(first_value(rows(c, sql, &[&t.name(), &key]).await?))
}

/// Every pair whose key starts with `prefix`, in key order (bytea compares as bytes).
pub(crate) async fn select_prefix(c: &Object, t: Tree, prefix: &[u8]) -> Result<Pairs, StoreFail> {
    let rows = rows(
        c,
        "SELECT key, value FROM relay_kv WHERE tree = $1 AND key >= $2 \
         AND ($3::bytea IS NULL OR key < $3) ORDER BY key",
        &[&t.name(), &prefix, &prefix_end(prefix)],
    )
    .await?;
    Ok(pairs(rows))
}

/// Applies the migrations this database lacks; returns how many it applied. Refuses a
/// schema newer than this build knows.
async fn migrate(c: &Object) -> Result<usize, tokio_postgres::Error> {
    c.execute("SELECT pg_advisory_lock($1)", &[&MIGRATE_LOCK])
        .await?;
    let result = async {
        c.batch_execute(
            "CREATE TABLE IF NOT EXISTS relay_schema (
                 version    integer PRIMARY KEY,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await?;
        let current: i32 = c
            .query_one("SELECT coalesce(max(version), 0) FROM relay_schema", &[])
            .await?
            .get(0);
        let mut applied = 0;
        for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            c.batch_execute("BEGIN").await?;
            let step = async {
                c.batch_execute(sql).await?;
                c.execute("INSERT INTO relay_schema (version) VALUES ($1)", &[version])
                    .await?;
                c.batch_execute("COMMIT").await
            }
            .await;
            if step.is_err() {
                let _ = c.batch_execute("ROLLBACK").await;
            }
            step?;
            applied += 1;
        }
        Ok(applied)
    }
    .await;
    let _ = c
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATE_LOCK])
        .await;
    let newest = MIGRATIONS.last().map_or(0, |m| m.0);
    if let Ok(row) = c
        .query_one("SELECT coalesce(max(version), 0) FROM relay_schema", &[])
        .await
    {
        let found: i32 = row.get(0);
        if found > newest {
            tracing::warn!(
                found,
                newest,
                "the database schema is newer than this relay; upgrade the relay"
            );
        }
    }
    result
}

/// One transaction holding the write lock. Dropped without [`PgWrite::commit`] (an error,
/// a client gone), it is rolled back before its connection is used again.
pub(crate) struct PgWrite {
    client: Option<Object>,
    changes: Vec<Change>,
}

impl PgWrite {
    fn c(&self) -> &Object {
        self.client
            .as_ref()
            .expect("a write holds its connection until it ends")
    }

    pub(crate) async fn get(&mut self, t: Tree, key: &[u8]) -> Result<Option<Vec<u8>>, StoreFail> {
        select(self.c(), t, key).await
    }

    pub(crate) async fn scan(&mut self, t: Tree, prefix: &[u8]) -> Result<Pairs, StoreFail> {
        select_prefix(self.c(), t, prefix).await
    }

    pub(crate) async fn put(&mut self, t: Tree, key: &[u8], value: &[u8]) -> Result<(), StoreFail> {
        let sql = "INSERT INTO relay_kv (tree, key, value) VALUES ($1, $2, $3) \
                   ON CONFLICT (tree, key) DO UPDATE SET value = EXCLUDED.value";
        rows(self.c(), sql, &[&t.name(), &key, &value]).await?;
        Ok(())
    }

    pub(crate) async fn remove(
        &mut self,
        t: Tree,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreFail> {
        let sql = "DELETE FROM relay_kv WHERE tree = $1 AND key = $2 RETURNING value";
        Ok(first_value(rows(self.c(), sql, &[&t.name(), &key]).await?))
    }

    pub(crate) async fn next_seq(&mut self) -> Result<u64, StoreFail> {
        let row = self
            .c()
            .query_one("SELECT nextval('relay_answer_seq')", &[])
            .await
            .map_err(unavailable)?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    /// `NOTIFY` inside the transaction: PostgreSQL delivers it to every listener at commit,
    /// and never if the transaction rolls back.
    pub(crate) async fn announce(&mut self, change: Change) -> Result<(), StoreFail> {
        if let Some(note) = Note::of(&change) {
            let payload = serde_json::to_string(&note)?;
            self.c()
                .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
                .await
                .map_err(unavailable)?;
        }
        self.changes.push(change);
        Ok(())
    }

    pub(crate) async fn commit(mut self) -> Result<Vec<Change>, StoreFail> {
        let c = self.client.take().expect("a write commits once");
        c.batch_execute("COMMIT").await.map_err(unavailable)?;
        Ok(std::mem::take(&mut self.changes))
    }
}

impl Drop for PgWrite {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move {
                        let _ = c.batch_execute("ROLLBACK").await;
                    });
                }
                // No runtime to roll back on: close the connection (PostgreSQL rolls back)
                // rather than hand a connection mid-transaction back to the pool.
                Err(_) => drop(Object::take(c)),
            }
        }
    }
}

/// A change as it travels through `NOTIFY` (at most 8000 bytes): an envelope goes by its
/// key, and each listening process reads it from the database.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Note {
    Answer {
        installation: String,
    },
    Devices {
        installation: String,
    },
    Envelope {
        device: String,
        event_id: String,
    },
    Withdrawn {
        device: String,
        event_id: String,
    },
    Verdict {
        device: String,
        result: AnswerResult,
    },
    DeviceRemoved {
        device: String,
    },
}

impl Note {
    fn of(c: &Change) -> Option<Note> {
        Some(match c {
            Change::Answer { installation } => Note::Answer {
                installation: installation.clone(),
            },
            Change::Devices { installation } => Note::Devices {
                installation: installation.clone(),
            },
            Change::Envelope { device, envelope } => Note::Envelope {
                device: device.clone(),
                event_id: envelope.event_id.clone(),
            },
            Change::Withdrawn { device, event_id } => Note::Withdrawn {
                device: device.clone(),
                event_id: event_id.clone(),
            },
            Change::Verdict { device, result } => Note::Verdict {
                device: device.clone(),
                result: (**result).clone(),
            },
            Change::DeviceRemoved { device } => Note::DeviceRemoved {
                device: device.clone(),
            },
            Change::Resync => return None,
        })
    }

    async fn into_change(self, server: &crate::RelayServer) -> Option<Change> {
        Some(match self {
            Note::Answer { installation } => Change::Answer { installation },
            Note::Devices { installation } => Change::Devices { installation },
            Note::Envelope { device, event_id } => {
                // No stream here for that device: nobody in this process needs it read.
                if !server.held.holds(&device) {
                    return None;
                }
                let key = key2(&device, event_id.as_bytes());
                // Gone already (withdrawn meanwhile): the withdrawal follows.
                let raw = server.kv.get(Tree::Envelopes, &key).await.ok()??;
                let envelope = serde_json::from_slice(&raw).ok()?;
                Change::Envelope {
                    device,
                    envelope: Arc::new(envelope),
                }
            }
            Note::Withdrawn { device, event_id } => Change::Withdrawn { device, event_id },
            Note::Verdict { device, result } => Change::Verdict {
                device,
                result: Arc::new(result),
            },
            Note::DeviceRemoved { device } => Change::DeviceRemoved { device },
        })
    }
}

/// Listens for every process's changes and feeds them to this process's waiters. `ready`
/// hears once the first `LISTEN` is in place (or why it failed). After a lost connection
/// it reconnects and sends [`Change::Resync`]: waiters re-read and streams restart with a
/// snapshot, since changes made meanwhile were not heard.
pub(crate) async fn listen(
    server: Arc<crate::RelayServer>,
    config: (tokio_postgres::Config, DbTls),
    ready: tokio::sync::oneshot::Sender<Result<(), String>>,
) {
    let mut ready = Some(ready);
    loop {
        match listen_once(&server, &config, &mut ready).await {
            Ok(()) => tracing::warn!("relay database notifications ended; reconnecting"),
            Err(e) => {
                if let Some(r) = ready.take() {
                    let _ = r.send(Err(format!("cannot listen for changes: {e}")));
                    return;
                }
                tracing::warn!(error = %e, "relay database notifications lost; reconnecting");
            }
        }
        let _ = server.feed.send(Change::Resync);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn listen_once(
    server: &Arc<crate::RelayServer>,
    (config, tls): &(tokio_postgres::Config, DbTls),
    ready: &mut Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
) -> Result<(), tokio_postgres::Error> {
    match tls {
        DbTls::Plain => {
            let (client, connection) = config.connect(NoTls).await?;
            listen_on(server, client, connection, ready).await
        }
        DbTls::Verified(tls) => {
            let (client, connection) = config.connect(tls.clone()).await?;
            listen_on(server, client, connection, ready).await
        }
    }
}

async fn listen_on<S, T>(
    server: &Arc<crate::RelayServer>,
    client: tokio_postgres::Client,
    mut connection: tokio_postgres::Connection<S, T>,
    ready: &mut Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
) -> Result<(), tokio_postgres::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        use futures_util::StreamExt;
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notification(n) = m {
                if tx.send(n.payload().to_string()).is_err() {
                    return;
                }
            }
        }
    });
    let listening = client.batch_execute(&format!("LISTEN {CHANNEL}")).await;
    if let Err(e) = listening {
        driver.abort();
        return Err(e);
    }
    match ready.take() {
        Some(r) => {
            let _ = r.send(Ok(()));
        }
        // Reconnected: what was missed meanwhile is re-read.
        None => {
            let _ = server.feed.send(Change::Resync);
        }
    }
    while let Some(payload) = rx.recv().await {
        let Ok(note) = serde_json::from_str::<Note>(&payload) else {
            continue;
        };
        if let Some(change) = note.into_change(server).await {
            let _ = server.feed.send(change);
        }
    }
    drop(client);
    Ok(())
}

impl Pg {
    /// What the listener needs to open its own connection, as the pool opens theirs.
    pub(crate) fn listener(&self) -> (tokio_postgres::Config, DbTls) {
        (self.config.clone(), self.tls.clone())
    }
}
