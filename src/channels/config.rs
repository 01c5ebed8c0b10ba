//! Channels and routes (`[channels]` in `config.toml`, SPEC §11.1) and their secrets.
//!
//! Consent is explicit: `ntfy` and `webhook` carry a question's prompt, choices and project
//! only with `include_message`; `desktop` shows them unless told not to (it never leaves the
//! machine). Secrets (the ntfy token, the webhook key) live in `channel_secrets.json`, 0600,
//! never in `config.toml`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::{Interaction, Kind, Notification, Priority};
use crate::paths::Paths;
use crate::secret::Secret;

/// The longest `--delay`.
pub const MAX_DELAY_SECONDS: u64 = 3600;

#[derive(Debug, thiserror::Error)]
pub enum ChannelConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
}

type Result<T> = std::result::Result<T, ChannelConfigError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    Desktop,
    Ntfy,
    Webhook,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Desktop => "desktop",
            ChannelKind::Ntfy => "ntfy",
            ChannelKind::Webhook => "webhook",
        }
    }
}

/// The `[channels]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelsConfig {
    #[serde(default, rename = "channel")]
    pub channels: Vec<Channel>,
    #[serde(default, rename = "route")]
    pub routes: Vec<Route>,
}

/// One place notifications go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Channel {
    /// Short name (`^[A-Za-z0-9_-]{1,64}$`), shared with relay providers.
    pub id: String,
    pub kind: ChannelKind,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Consent to show the prompt, choices and project (default: desktop yes, others no).
    pub include_message: bool,
    /// Offer the question's choices as buttons that answer it.
    #[serde(default)]
    pub answer_buttons: bool,
    /// ntfy: the server's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// ntfy: the topic notifications are published to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// ntfy: the topic the answer buttons post to (default: `{topic}-answers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_topic: Option<String>,
    /// webhook: where events are POSTed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

fn yes() -> bool {
    true
}

/// Which questions and notifications go to which channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub channel: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// A notification type (`permission_required`, `input_required`, `completed`, …) or a
    /// question kind (`permission`, `single_choice`, `text`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `low`, `normal`, `high` or `critical`; questions count as `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_priority: Option<String>,
    /// Seconds a question must stay pending before it is delivered (0–3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<u64>,
}

/// What a route's filters look at, for a question or a notification.
pub struct Subject<'a> {
    pub agent: Option<&'a str>,
    pub project: Option<&'a str>,
    /// The notification type, and for questions their kind too.
    pub types: [Option<&'a str>; 2],
    pub priority: Priority,
    /// Only questions wait out a delay: a notification has nothing to be answered first.
    pub is_question: bool,
}

impl<'a> Subject<'a> {
    pub fn of_interaction(i: &'a Interaction) -> Subject<'a> {
        let notification_type = match i.question.kind {
            Kind::Permission => "permission_required",
            Kind::SingleChoice | Kind::MultiChoice | Kind::Text => "input_required",
        };
        Subject {
            agent: Some(&i.question.agent),
            project: i.question.project.as_deref(),
            types: [Some(notification_type), Some(i.question.kind.as_str())],
            priority: crate::relay::config::QUESTION_PRIORITY,
            is_question: true,
        }
    }

    pub fn of_notification(n: &'a Notification) -> Subject<'a> {
        Subject {
            agent: n.agent.as_deref(),
            project: n.project.as_deref(),
            types: [Some(&n.kind), None],
            priority: n.priority,
            is_question: false,
        }
    }
}

impl Route {
    pub fn matches(&self, s: &Subject) -> bool {
        self.enabled
            && self.agent.as_deref().is_none_or(|a| s.agent == Some(a))
            && self.project.as_deref().is_none_or(|p| s.project == Some(p))
            && self
                .kind
                .as_deref()
                .is_none_or(|t| s.types.contains(&Some(t)))
            && self
                .min_priority
                .as_deref()
                .is_none_or(|p| Priority::parse(p).is_some_and(|p| s.priority >= p))
    }

    pub fn delay(&self) -> Duration {
        Duration::from_secs(self.delay.unwrap_or(0).min(MAX_DELAY_SECONDS))
    }
}

impl Channel {
    /// The ntfy topic answers come back on.
    pub fn answer_topic(&self) -> Option<String> {
        self.answer_topic
            .clone()
            .or_else(|| self.topic.as_ref().map(|t| format!("{t}-answers")))
    }
}

impl ChannelsConfig {
    pub fn channel(&self, id: &str) -> Option<&Channel> {
        self.channels.iter().find(|c| c.id == id)
    }

    /// Enabled channels whose routes match, each once with the shortest delay of its
    /// matching routes.
    pub fn deliveries(&self, s: &Subject) -> Vec<(&Channel, Duration)> {
        let mut out = Vec::new();
        for c in self.channels.iter().filter(|c| c.enabled) {
            let delay = self
                .routes
                .iter()
                .filter(|r| r.channel == c.id && r.matches(s))
                .map(|r| {
                    if s.is_question {
                        r.delay()
                    } else {
                        Duration::ZERO
                    }
                })
                .min();
            if let Some(d) = delay {
                out.push((c, d));
            }
        }
        out
    }

    /// Checks what serde cannot: ids, URLs, references and enum values.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(ChannelConfigError::Invalid(m));
        for (i, c) in self.channels.iter().enumerate() {
            if !crate::model::fields::is_token_id(&c.id) {
                return bad(format!(
                    "channel id {:?} must match ^[A-Za-z0-9_-]{{1,64}}$",
                    c.id
                ));
            }
            if self.channels[..i].iter().any(|d| d.id == c.id) {
                return bad(format!("channel id {:?} is used twice", c.id));
            }
            match c.kind {
                ChannelKind::Ntfy => {
                    check_url(&c.id, "server", c.server.as_deref())?;
                    check_topic(&c.id, "topic", c.topic.as_deref())?;
                    if let Some(t) = &c.answer_topic {
                        check_topic(&c.id, "answer_topic", Some(t))?;
                    }
                }
                ChannelKind::Webhook => check_url(&c.id, "url", c.url.as_deref())?,
                ChannelKind::Desktop => {}
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            let n = i + 1;
            if self.channel(&r.channel).is_none() {
                return bad(format!(
                    "channel route {n} names unknown channel {:?}",
                    r.channel
                ));
            }
            if r.min_priority
                .as_deref()
                .is_some_and(|p| Priority::parse(p).is_none())
            {
                return bad(format!(
                    "channel route {n}: min_priority must be low, normal, high or critical"
                ));
            }
            if r.delay.is_some_and(|d| d > MAX_DELAY_SECONDS) {
                return bad(format!(
                    "channel route {n}: delay must be 0-{MAX_DELAY_SECONDS} seconds"
                ));
            }
        }
        Ok(())
    }

    /// Reads `[channels]` from `config.toml` (missing file or table: empty) and validates it.
    pub fn load(path: &Path) -> Result<ChannelsConfig> {
        #[derive(Deserialize)]
        struct Whole {
            #[serde(default)]
            channels: ChannelsConfig,
        }
        let text =
            crate::fsutil::read_text_or_empty(path).map_err(|source| ChannelConfigError::Read {
                path: path.into(),
                source,
            })?;
        let whole: Whole = toml::from_str(&text).map_err(|e| ChannelConfigError::Parse {
            path: path.into(),
            message: e.message().to_string(),
        })?;
        whole.channels.validate()?;
        Ok(whole.channels)
    }

    /// Replaces `[channels]` in `config.toml`, keeping every other setting and comment.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.validate()?;
        let text =
            crate::fsutil::read_text_or_empty(path).map_err(|source| ChannelConfigError::Read {
                path: path.into(),
                source,
            })?;
        let mut doc: toml_edit::DocumentMut =
            text.parse()
                .map_err(|e: toml_edit::TomlError| ChannelConfigError::Parse {
                    path: path.into(),
                    message: e.message().to_string(),
                })?;
        let rendered =
            toml::to_string(self).map_err(|e| ChannelConfigError::Invalid(e.to_string()))?;
        let table: toml_edit::DocumentMut =
            rendered.parse().map_err(|e: toml_edit::TomlError| {
                ChannelConfigError::Invalid(format!("cannot render [channels]: {e}"))
            })?;
        let mut table = table.as_table().clone();
        table.set_implicit(true);
        doc.insert("channels", toml_edit::Item::Table(table));
        crate::fsutil::write_atomic(path, doc.to_string().as_bytes(), 0o600).map_err(|source| {
            ChannelConfigError::Write {
                path: path.into(),
                source,
            }
        })
    }
}

fn check_url(id: &str, field: &str, url: Option<&str>) -> Result<()> {
    match url {
        Some(u) if u.starts_with("https://") || u.starts_with("http://") => Ok(()),
        _ => Err(ChannelConfigError::Invalid(format!(
            "channel {id:?}: {field} must start with https:// or http://"
        ))),
    }
}

/// ntfy topics: letters, digits, `-` and `_`, at most 64 (ntfy's own rule).
fn check_topic(id: &str, field: &str, topic: Option<&str>) -> Result<()> {
    match topic {
        Some(t) if crate::model::fields::is_token_id(t) => Ok(()),
        _ => Err(ChannelConfigError::Invalid(format!(
            "channel {id:?}: {field} must match ^[A-Za-z0-9_-]{{1,64}}$"
        ))),
    }
}

/// Per-channel secrets, kept out of `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelSecrets {
    /// ntfy: the access token (`tk_…`) sent as a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntfy_token: Option<Secret>,
    /// webhook: the signing secret, `whsec_<base64 key>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<Secret>,
}

/// `channel_secrets.json`: channel id → secrets.
pub type Secrets = BTreeMap<String, ChannelSecrets>;

pub fn secrets_file(paths: &Paths) -> PathBuf {
    paths.config_dir.join("channel_secrets.json")
}

pub fn load_secrets(paths: &Paths) -> Result<Secrets> {
    let path = secrets_file(paths);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| ChannelConfigError::Parse {
            path,
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Secrets::new()),
        Err(source) => Err(ChannelConfigError::Read { path, source }),
    }
}

pub fn save_secrets(paths: &Paths, secrets: &Secrets) -> Result<()> {
    let path = secrets_file(paths);
    let bytes = serde_json::to_vec_pretty(secrets).expect("a map of strings serialises");
    crate::fsutil::write_atomic(&path, &bytes, 0o600)
        .map_err(|source| ChannelConfigError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ntfy(id: &str) -> Channel {
        Channel {
            id: id.into(),
            kind: ChannelKind::Ntfy,
            enabled: true,
            include_message: false,
            answer_buttons: true,
            server: Some("http://127.0.0.1:1".into()),
            topic: Some("t0p1c".into()),
            answer_topic: None,
            url: None,
        }
    }

    fn route(channel: &str) -> Route {
        Route {
            channel: channel.into(),
            enabled: true,
            agent: None,
            project: None,
            kind: None,
            min_priority: None,
            delay: None,
        }
    }

    #[test]
    fn round_trips_through_config_toml_keeping_other_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "# mine\nport = 1234\n").unwrap();
        let cfg = ChannelsConfig {
            channels: vec![ntfy("phone")],
            routes: vec![Route {
                project: Some("shop".into()),
                delay: Some(30),
                ..route("phone")
            }],
        };
        cfg.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("# mine") && text.contains("port = 1234"),
            "{text}"
        );
        assert_eq!(ChannelsConfig::load(&path).unwrap(), cfg);
        crate::config::Config::load(&path).expect("the whole file still parses");
    }

    #[test]
    fn routes_filter_and_the_shortest_delay_wins() {
        let mut cfg = ChannelsConfig {
            channels: vec![ntfy("phone")],
            routes: vec![
                Route {
                    delay: Some(30),
                    ..route("phone")
                },
                Route {
                    project: Some("shop".into()),
                    delay: Some(5),
                    ..route("phone")
                },
            ],
        };
        let n = |project: Option<&'static str>, priority| Subject {
            agent: Some("claude"),
            project,
            types: [Some("permission_required"), Some("permission")],
            priority,
            is_question: true,
        };
        let d = cfg.deliveries(&n(Some("shop"), Priority::High));
        assert_eq!(d[0].1, Duration::from_secs(5));
        let d = cfg.deliveries(&n(Some("blog"), Priority::High));
        assert_eq!(d[0].1, Duration::from_secs(30));
        cfg.routes = vec![Route {
            min_priority: Some("critical".into()),
            ..route("phone")
        }];
        assert!(cfg.deliveries(&n(None, Priority::High)).is_empty());
        cfg.channels[0].enabled = false;
        cfg.routes = vec![route("phone")];
        assert!(cfg.deliveries(&n(None, Priority::High)).is_empty());
    }

    #[test]
    fn bad_settings_are_refused_naming_the_field() {
        let mut c = ntfy("phone");
        c.topic = Some("has a space".into());
        let cfg = ChannelsConfig {
            channels: vec![c],
            routes: vec![],
        };
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("topic"), "{e}");
        let cfg = ChannelsConfig {
            channels: vec![ntfy("phone")],
            routes: vec![Route {
                delay: Some(4000),
                ..route("phone")
            }],
        };
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("delay"), "{e}");
    }
}
