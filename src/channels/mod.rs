//! Delivery (SPEC §11): every new question and notification goes to the channels a person
//! set up — desktop, ntfy, webhook, and the Relay's providers — through the broker's one
//! durable outbox, and is withdrawn from them once settled.
//!
//! Invariants:
//! - Which channels get what is decided by routes and consent ([`config`]); content is
//!   built by [`content`], the only place that knows what may leave the machine.
//! - Answers that come back (ntfy buttons, desktop actions) go through
//!   [`Broker::respond`] with their channel as `source`; nothing here decides whether an
//!   answer is accepted.
//! - Logs carry ids, channel ids, attempt counts and status codes only: never titles,
//!   prompts, tokens, webhook secrets or ntfy topics (reqwest errors are logged without
//!   their URL).
//!
//! Files: `config` (channels, routes, secrets), `content` (what is shown), `dispatch`
//! (the outbox's delivery loop), `ntfy`, `webhook`, `desktop` (one per kind).

pub mod config;
pub mod content;
pub mod desktop;
pub mod dispatch;
pub mod ntfy;
pub mod webhook;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::broker::outbox::{Delivery, EntryState, OutboxEntry, Planner};
use crate::broker::Broker;
use crate::model::{Interaction, Notification};
use crate::paths::Paths;
use crate::relay::config::RelayConfig;
use crate::relay::RelayLink;
use config::{Channel, ChannelKind, ChannelsConfig, Subject};

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error(transparent)]
    Config(#[from] config::ChannelConfigError),
    #[error("no channel named {0:?}")]
    Unknown(String),
    #[error("channel {0:?} is unavailable: {1}")]
    Unavailable(String, String),
    #[error(transparent)]
    Broker(#[from] crate::broker::BrokerError),
    /// A delivery the receiver refused or could not take; retried, not before `retry_after`
    /// when the receiver said when (`Retry-After`).
    #[error("{message}")]
    Failed {
        message: String,
        status: Option<u16>,
        retry_after: Option<Duration>,
    },
    /// The receiver says the endpoint is gone for good (a webhook's 410): never retried.
    #[error("{message}")]
    Gone { message: String, status: u16 },
}

impl ChannelError {
    pub fn failed(message: impl Into<String>, status: Option<u16>) -> ChannelError {
        ChannelError::Failed {
            message: message.into(),
            status,
            retry_after: None,
        }
    }

    /// From a reqwest error, without the URL (it holds the ntfy topic or the webhook path).
    pub fn http(e: reqwest::Error) -> ChannelError {
        let what = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "could not connect"
        } else {
            "request failed"
        };
        let detail = e.without_url().to_string();
        ChannelError::failed(format!("{what}: {detail}"), None)
    }
}

/// Both config tables, re-read when `config.toml` changes.
#[derive(Clone, Default)]
pub struct Settings {
    pub channels: ChannelsConfig,
    pub relay: RelayConfig,
}

struct Cached {
    stamp: Option<(SystemTime, u64)>,
    settings: Arc<Settings>,
}

/// The broker's delivery side: plans, dispatches, withdraws, and listens for answers.
pub struct Hub {
    paths: Paths,
    broker: Arc<Broker>,
    relay: Arc<RelayLink>,
    /// Where a click on a notification leads: the broker's web UI.
    ui_url: String,
    cached: Mutex<Cached>,
    /// `{subject}:{id}:{channel}` of attempts in flight: never two for one pair at once,
    /// so a withdrawal cannot overtake the delivery it takes back.
    in_flight: Mutex<HashSet<String>>,
    /// The last scan found entries still to be tried (or in flight).
    waiting: AtomicBool,
    wake: Notify,
    clients: OnceLock<(reqwest::Client, reqwest::Client)>,
    subscriptions: Mutex<HashMap<String, (String, tokio::task::JoinHandle<()>)>>,
    pub desktop: desktop::Desktop,
    /// Mints a one-time web UI link (the API's session store is above this layer, so the
    /// daemon hands it in): a click on a desktop notification opens the page with it.
    ui_link: OnceLock<UiLink>,
}

/// Makes a one-time web UI login link; `None` once the API is gone.
pub type UiLink = Box<dyn Fn() -> Option<String> + Send + Sync>;

impl Hub {
    pub fn new(
        paths: Paths,
        broker: Arc<Broker>,
        relay: Arc<RelayLink>,
        broker_url: &str,
    ) -> Arc<Hub> {
        let hub = Arc::new(Hub {
            paths,
            broker: Arc::clone(&broker),
            relay,
            ui_url: format!("{broker_url}/ui"),
            cached: Mutex::new(Cached {
                stamp: None,
                settings: Arc::default(),
            }),
            in_flight: Mutex::default(),
            // Until the first scan, assume there is work (entries from before a restart).
            waiting: AtomicBool::new(true),
            wake: Notify::new(),
            clients: OnceLock::new(),
            subscriptions: Mutex::default(),
            desktop: desktop::Desktop::default(),
            ui_link: OnceLock::new(),
        });
        broker.set_planner(Arc::new(Routes(Arc::clone(&hub))));
        hub
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The current settings; re-read when `config.toml` changed (a stat per call). A file
    /// that does not parse keeps the last good settings, so a typo stops no delivery.
    pub fn settings(&self) -> Arc<Settings> {
        let path = self.paths.config_file();
        let stamp = std::fs::metadata(&path)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if cached.stamp != stamp || stamp.is_none() && cached.stamp.is_none() {
            let channels = ChannelsConfig::load(&path);
            let relay = RelayConfig::load(&path);
            match (channels, relay) {
                (Ok(channels), Ok(relay)) => {
                    cached.settings = Arc::new(Settings { channels, relay });
                }
                (Err(e), _) => {
                    tracing::error!(error = %e, "channel settings unreadable; keeping the last good ones")
                }
                (_, Err(e)) => {
                    tracing::error!(error = %e, "relay settings unreadable; keeping the last good ones")
                }
            }
            cached.stamp = stamp;
        }
        Arc::clone(&cached.settings)
    }

    /// A client for `url`: plain for http://, the system's CA store for https://. No
    /// redirects (a webhook's 3xx is a failure) and a 15 s limit per attempt.
    pub fn http(&self, url: &str) -> reqwest::Client {
        let (plain, tls) = self.clients.get_or_init(|| {
            let build = |b: reqwest::ClientBuilder| {
                b.connect_timeout(Duration::from_secs(5))
                    .timeout(Duration::from_secs(15))
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .expect("an HTTP client builds")
            };
            (
                build(agentnotify_relay_proto::tls::plain_http_client()),
                build(agentnotify_relay_proto::tls::relay_client("https://x")),
            )
        });
        if url.starts_with("https://") {
            tls.clone()
        } else {
            plain.clone()
        }
    }

    /// A client for a long-lived stream (the ntfy answer subscription): no overall limit.
    pub fn stream_http(url: &str) -> reqwest::Client {
        agentnotify_relay_proto::tls::relay_client(url)
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client builds")
    }

    /// Starts the dispatcher (which also keeps the answer subscriptions up).
    pub fn spawn_background(self: &Arc<Self>) {
        tokio::spawn(dispatch::run(Arc::clone(self)));
        let hub = Arc::clone(self);
        tokio::spawn(async move { hub.desktop.listen(&hub).await });
    }

    /// Wakes the dispatcher: settings changed, or an entry was made due.
    pub fn poke(&self) {
        self.wake.notify_one();
    }

    /// Starts an answer subscription for every ntfy channel with answer buttons, and stops
    /// those whose channel is gone or changed.
    fn reconcile_subscriptions(self: &Arc<Self>) {
        let settings = self.settings();
        let mut subs = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        let wanted: HashMap<String, (String, Channel)> = settings
            .channels
            .channels
            .iter()
            .filter(|c| c.kind == ChannelKind::Ntfy && c.enabled && c.answer_buttons)
            .map(|c| (c.id.clone(), (format!("{c:?}"), c.clone())))
            .collect();
        subs.retain(|id, (fingerprint, task)| {
            let keep = wanted.get(id).is_some_and(|(f, _)| f == fingerprint);
            if !keep {
                task.abort();
            }
            keep
        });
        for (id, (fingerprint, channel)) in wanted {
            subs.entry(id).or_insert_with(|| {
                let task = tokio::spawn(ntfy::subscribe(Arc::clone(self), channel));
                (fingerprint, task)
            });
        }
    }

    /// A test notification to one channel, now, outside the outbox.
    pub async fn test(&self, id: &str) -> Result<Value, ChannelError> {
        let settings = self.settings();
        let Some(channel) = settings.channels.channel(id) else {
            if settings.relay.provider(id).is_some() {
                return Err(ChannelError::Unavailable(
                    id.into(),
                    "a relay provider; test it with `agentnotify relay status`".into(),
                ));
            }
            return Err(ChannelError::Unknown(id.to_string()));
        };
        let c = content::test_content();
        let receipt = match channel.kind {
            ChannelKind::Ntfy => ntfy::publish(self, channel, &c, "test", &[]).await?,
            ChannelKind::Webhook => {
                webhook::send(self, channel, "test", c.created_type, &c.data).await?
            }
            ChannelKind::Desktop => self.desktop.show(channel, &c, None, None).await?,
        };
        tracing::info!(channel = %id, "test notification sent");
        Ok(json!({"channel": id, "sent": true, "receipt": receipt}))
    }

    /// What is set up, what is waiting, what failed (`GET /v1/channels/status`).
    pub fn status(&self) -> Result<Value, ChannelError> {
        let settings = self.settings();
        let entries = self.broker.outbox_entries()?;
        let count = |id: &str, state: EntryState| {
            entries
                .iter()
                .filter(|e| e.channel == id && e.state == state)
                .count()
        };
        let last_error = |id: &str| {
            entries
                .iter()
                .filter(|e| e.channel == id && e.last_error.is_some())
                .max_by_key(|e| e.next_attempt_at)
                .and_then(|e| e.last_error.clone())
        };
        let mut channels = Vec::new();
        for c in &settings.channels.channels {
            let available = match c.kind {
                ChannelKind::Desktop => self.desktop.availability(),
                _ => Ok(()),
            };
            channels.push(json!({
                "id": c.id, "kind": c.kind.as_str(), "enabled": c.enabled,
                "available": available.is_ok(),
                "unavailable_reason": available.err(),
                "include_message": c.include_message, "answer_buttons": c.answer_buttons,
                "waiting": count(&c.id, EntryState::Waiting),
                "delivered": count(&c.id, EntryState::Delivered),
                "dead": count(&c.id, EntryState::Dead),
                "last_error": last_error(&c.id),
            }));
        }
        for p in &settings.relay.providers {
            channels.push(json!({
                "id": p.id, "kind": "relay", "enabled": p.enabled, "available": true,
                "waiting": count(&p.id, EntryState::Waiting),
                "delivered": count(&p.id, EntryState::Delivered),
                "dead": count(&p.id, EntryState::Dead),
                "last_error": last_error(&p.id),
            }));
        }
        let listed: Vec<&OutboxEntry> = entries
            .iter()
            .filter(|e| e.state != EntryState::Delivered)
            .collect();
        let dead = entries
            .iter()
            .filter(|e| e.state == EntryState::Dead)
            .count();
        Ok(json!({"channels": channels, "outbox": listed, "dead_letters": dead}))
    }

    /// Whether entries are still to be tried (an on-demand broker stays up for them), as of
    /// the dispatcher's last look (it looks whenever the outbox changes).
    pub fn has_work(&self) -> bool {
        self.waiting.load(Ordering::SeqCst)
    }

    fn channel_kind(settings: &Settings, id: &str) -> Option<Kind> {
        if let Some(c) = settings.channels.channel(id) {
            return Some(Kind::Channel(c.clone()));
        }
        settings.relay.provider(id).map(|_| Kind::Relay)
    }
}

/// Where an entry goes.
enum Kind {
    Channel(Channel),
    Relay,
}

/// The broker's [`Planner`]: routes of `[channels]`, and relay routes for questions.
struct Routes(Arc<Hub>);

impl Planner for Routes {
    fn for_interaction(&self, record: &Interaction) -> Vec<Delivery> {
        let settings = self.0.settings();
        let mut out: Vec<Delivery> = settings
            .channels
            .deliveries(&Subject::of_interaction(record))
            .into_iter()
            .map(|(c, delay)| Delivery {
                channel: c.id.clone(),
                delay,
            })
            .collect();
        out.extend(
            settings
                .relay
                .providers_for(record)
                .into_iter()
                .map(|p| Delivery {
                    channel: p.id.clone(),
                    delay: Duration::ZERO,
                }),
        );
        out
    }

    fn for_notification(&self, record: &Notification) -> Vec<Delivery> {
        // A notification announcing a question: the question itself is delivered.
        if record.interaction_id.is_some() {
            return Vec::new();
        }
        self.0
            .settings()
            .channels
            .deliveries(&Subject::of_notification(record))
            .into_iter()
            .map(|(c, delay)| Delivery {
                channel: c.id.clone(),
                delay,
            })
            .collect()
    }
}

impl Hub {
    /// Hands in how to mint a one-time web UI link (once, by the daemon).
    pub fn set_ui_link(&self, mint: UiLink) {
        let _ = self.ui_link.set(mint);
    }

    /// Opens the web UI on this machine's desktop with a fresh one-time link, through the
    /// private forwarding page (never the link on a command line).
    pub async fn open_ui(&self) {
        let Some(url) = self.ui_link.get().and_then(|mint| mint()) else {
            return;
        };
        let paths = self.paths.clone();
        let opened = tokio::task::spawn_blocking(move || crate::browser::open(&paths, &url))
            .await
            .unwrap_or(false);
        if opened {
            tracing::info!("web UI opened from a desktop notification");
        } else {
            tracing::warn!("cannot open the web UI from a desktop notification (no opener)");
        }
    }
}
