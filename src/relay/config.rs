//! Relay providers and routes (`[relay]` in `config.toml`), their secrets, and the
//! installation key pair.
//!
//! Consent is explicit: a question leaves this machine only over an enabled route with
//! `include_message = true` whose provider is enabled and whose filters match.
//! Secrets never sit in `config.toml`: installation tokens and pairing secrets live in
//! `relay_secrets.json`, the installation's private keys in `relay_installation.key` and
//! `relay_installation_signing.key`, all 0600.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::{Interaction, Kind, Priority};
use crate::paths::Paths;
use crate::secret::Secret;
use agentnotify_relay_proto::seal::KeyPair;
use agentnotify_relay_proto::sign::SigningPair;

/// Seconds between polls of each provider while all is well.
pub const DEFAULT_POLL_INTERVAL_SECONDS: u64 = 5;

#[derive(Debug, thiserror::Error)]
pub enum RelayConfigError {
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

type Result<T> = std::result::Result<T, RelayConfigError>;

/// The `[relay]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayConfig {
    /// Seconds between polls for answers (default 5); failures back off up to 2 minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_seconds: Option<u64>,
    /// Keep one long-poll per provider open for answers (default true); false: poll every
    /// `poll_interval_seconds` only (for a Relay without long-poll support).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_poll: Option<bool>,
    #[serde(default)]
    pub providers: Vec<Provider>,
    #[serde(default)]
    pub routes: Vec<Route>,
}

/// One Relay service this installation is registered with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// Short name used by routes, cursors and commands (`^[A-Za-z0-9_-]{1,64}$`).
    pub id: String,
    /// Only `relay` exists today.
    #[serde(default = "relay_kind")]
    pub kind: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Base URL of the Relay, e.g. `https://relay.example.net`.
    pub relay_url: String,
    /// This installation's id at that Relay (assigned at registration).
    pub installation_id: String,
    /// Accept answers the phone did not seal. Off by default: an unsealed answer could be
    /// altered by the Relay on its way (it still cannot be forged without the nonce).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_plain_answers: bool,
}

fn relay_kind() -> String {
    "relay".into()
}
fn yes() -> bool {
    true
}

/// Which questions go to which provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub provider: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Consent to send message bodies. Questions are all body: without it, none is sent.
    #[serde(default)]
    pub include_message: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Notification type: `permission_required` (permission questions) or `input_required`
    /// (choice and text questions); the kind name (`permission`, `single_choice`, `text`)
    /// also matches.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `low`, `normal`, `high` or `critical`. Questions count as `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_priority: Option<String>,
}

/// Every question is as urgent as a `high` notification: someone is blocked on it.
pub const QUESTION_PRIORITY: Priority = Priority::High;

impl Route {
    /// Whether this route carries `question` (filters and consent; not provider state).
    pub fn carries(&self, question: &Interaction) -> bool {
        let notification_type = match question.question.kind {
            Kind::Permission => "permission_required",
            Kind::SingleChoice | Kind::MultiChoice | Kind::Text => "input_required",
        };
        self.enabled
            && self.include_message
            && self
                .agent
                .as_ref()
                .is_none_or(|a| a == &question.question.agent)
            && self
                .project
                .as_ref()
                .is_none_or(|p| question.question.project.as_ref() == Some(p))
            && self
                .kind
                .as_ref()
                .is_none_or(|t| t == notification_type || t == question.question.kind.as_str())
            && self
                .min_priority
                .as_deref()
                .is_none_or(|p| Priority::parse(p).is_some_and(|p| QUESTION_PRIORITY >= p))
    }
}

impl RelayConfig {
    pub fn poll_interval(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.poll_interval_seconds
                .unwrap_or(DEFAULT_POLL_INTERVAL_SECONDS)
                .clamp(1, 3600),
        )
    }

    pub fn long_poll(&self) -> bool {
        self.long_poll.unwrap_or(true)
    }

    pub fn provider(&self, id: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.id == id)
    }

    /// Enabled providers with at least one enabled route that consents to carry questions.
    pub fn publishing_providers(&self) -> Vec<&Provider> {
        self.providers
            .iter()
            .filter(|p| {
                p.enabled
                    && self
                        .routes
                        .iter()
                        .any(|r| r.provider == p.id && r.enabled && r.include_message)
            })
            .collect()
    }

    /// Providers that should receive `question`, each once however many routes match.
    pub fn providers_for(&self, question: &Interaction) -> Vec<&Provider> {
        self.providers
            .iter()
            .filter(|p| {
                p.enabled
                    && self
                        .routes
                        .iter()
                        .any(|r| r.provider == p.id && r.carries(question))
            })
            .collect()
    }

    /// Checks what serde cannot: ids, URLs, references and enum values.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(RelayConfigError::Invalid(m));
        for (i, p) in self.providers.iter().enumerate() {
            if !crate::model::fields::is_token_id(&p.id) {
                return bad(format!(
                    "relay provider id {:?} must match ^[A-Za-z0-9_-]{{1,64}}$",
                    p.id
                ));
            }
            if self.providers[..i].iter().any(|q| q.id == p.id) {
                return bad(format!("relay provider id {:?} is used twice", p.id));
            }
            if p.kind != "relay" {
                return bad(format!(
                    "relay provider {:?} has kind {:?}; only \"relay\" is supported",
                    p.id, p.kind
                ));
            }
            if !(p.relay_url.starts_with("https://") || p.relay_url.starts_with("http://")) {
                return bad(format!(
                    "relay provider {:?}: relay_url must start with https:// or http://",
                    p.id
                ));
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            if self.provider(&r.provider).is_none() {
                return bad(format!(
                    "relay route {} names unknown provider {:?}",
                    i + 1,
                    r.provider
                ));
            }
            if let Some(p) = &r.min_priority {
                if Priority::parse(p).is_none() {
                    return bad(format!(
                        "relay route {}: min_priority must be low, normal, high or critical",
                        i + 1
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads `[relay]` from `config.toml` (missing file or table: empty) and validates it.
    pub fn load(path: &Path) -> Result<RelayConfig> {
        /// The rest of the file is `Config`'s business; only `[relay]` is read here.
        #[derive(Deserialize)]
        struct Whole {
            #[serde(default)]
            relay: RelayConfig,
        }
        let text =
            crate::fsutil::read_text_or_empty(path).map_err(|source| RelayConfigError::Read {
                path: path.into(),
                source,
            })?;
        let whole: Whole = toml::from_str(&text).map_err(|e| RelayConfigError::Parse {
            path: path.into(),
            message: e.message().to_string(),
        })?;
        whole.relay.validate()?;
        Ok(whole.relay)
    }

    /// Replaces `[relay]` in `config.toml`, keeping every other setting and comment.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.validate()?;
        let mut doc = read_document(path)?;
        let text = toml::to_string(self).map_err(|e| RelayConfigError::Invalid(e.to_string()))?;
        let table: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
            RelayConfigError::Invalid(format!("cannot render [relay]: {e}"))
        })?;
        let mut table = table.as_table().clone();
        table.set_implicit(false);
        doc.insert("relay", toml_edit::Item::Table(table));
        crate::fsutil::write_atomic(path, doc.to_string().as_bytes(), 0o600).map_err(|source| {
            RelayConfigError::Write {
                path: path.into(),
                source,
            }
        })
    }
}

fn read_document(path: &Path) -> Result<toml_edit::DocumentMut> {
    let text =
        crate::fsutil::read_text_or_empty(path).map_err(|source| RelayConfigError::Read {
            path: path.into(),
            source,
        })?;
    text.parse()
        .map_err(|e: toml_edit::TomlError| RelayConfigError::Parse {
            path: path.into(),
            message: e.message().to_string(),
        })
}

/// Per-provider secrets, kept out of `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderSecrets {
    /// Bearer token of this installation at the Relay.
    pub installation_token: Secret,
    /// Never leaves this machine: each pairing code's secret is derived from it and the
    /// code's pairing id (`pairing::derive_secret`), and that secret authenticates the device
    /// key, so the Relay cannot slip in a device of its own.
    pub pairing_secret: Secret,
}

/// `relay_secrets.json`: provider id → secrets.
pub type Secrets = BTreeMap<String, ProviderSecrets>;

pub fn secrets_file(paths: &Paths) -> PathBuf {
    paths.config_dir.join("relay_secrets.json")
}

pub fn installation_key_file(paths: &Paths) -> PathBuf {
    paths.config_dir.join("relay_installation.key")
}

pub fn load_secrets(paths: &Paths) -> Result<Secrets> {
    let path = secrets_file(paths);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| RelayConfigError::Parse {
            path,
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Secrets::new()),
        Err(source) => Err(RelayConfigError::Read { path, source }),
    }
}

pub fn save_secrets(paths: &Paths, secrets: &Secrets) -> Result<()> {
    let path = secrets_file(paths);
    let bytes = serde_json::to_vec_pretty(secrets).expect("a map of strings serialises");
    crate::fsutil::write_atomic(&path, &bytes, 0o600)
        .map_err(|source| RelayConfigError::Write { path, source })
}

/// The installation's X25519 key pair, created (0600) on first use. Phones seal answers to
/// its public key, which they learn from the pairing code, never from the Relay.
pub fn load_or_create_installation_key(paths: &Paths) -> Result<KeyPair> {
    let path = installation_key_file(paths);
    let text = load_or_create_key_file(&path, || KeyPair::generate().secret_b64())?;
    KeyPair::from_secret_b64(&text).map_err(|e| RelayConfigError::Parse {
        path,
        message: e.to_string(),
    })
}

/// Installation key only if it already exists (the broker never creates it implicitly).
pub fn load_installation_key(paths: &Paths) -> Result<Option<KeyPair>> {
    if installation_key_file(paths).exists() {
        load_or_create_installation_key(paths).map(Some)
    } else {
        Ok(None)
    }
}

pub fn signing_key_file(paths: &Paths) -> PathBuf {
    paths.config_dir.join("relay_installation_signing.key")
}

/// The installation's Ed25519 signing key, created (0600) on first use: it signs every
/// envelope and verdict, and phones learn its public half from the pairing code.
pub fn load_or_create_signing_key(paths: &Paths) -> Result<SigningPair> {
    let path = signing_key_file(paths);
    let text = load_or_create_key_file(&path, || SigningPair::generate().seed_b64())?;
    SigningPair::from_seed_b64(&text).map_err(|e| RelayConfigError::Parse {
        path,
        message: e.to_string(),
    })
}

/// Reads a one-line private key file, creating it (0600) with `generate` if absent. Two
/// processes racing to create it agree on one key: it is linked into place.
fn load_or_create_key_file(path: &Path, generate: impl Fn() -> String) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let fresh = generate();
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            crate::fsutil::write_atomic(&tmp, fresh.as_bytes(), 0o600).map_err(|source| {
                RelayConfigError::Write {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
            let linked = std::fs::hard_link(&tmp, path);
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => Ok(fresh),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    load_or_create_key_file(path, generate)
                }
                Err(source) => Err(RelayConfigError::Write {
                    path: path.to_path_buf(),
                    source,
                }),
            }
        }
        Err(source) => Err(RelayConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_config_toml_keeping_other_settings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "# mine\nport = 1234\n").unwrap();
        let cfg = RelayConfig {
            poll_interval_seconds: Some(1),
            long_poll: None,
            providers: vec![Provider {
                id: "home".into(),
                kind: "relay".into(),
                enabled: true,
                relay_url: "http://127.0.0.1:1".into(),
                installation_id: "i1".into(),
                accept_plain_answers: false,
            }],
            routes: vec![Route {
                provider: "home".into(),
                enabled: true,
                include_message: true,
                agent: Some("claude".into()),
                project: None,
                kind: None,
                min_priority: Some("normal".into()),
            }],
        };
        cfg.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("# mine") && text.contains("port = 1234"),
            "{text}"
        );
        assert_eq!(RelayConfig::load(&path).unwrap(), cfg);
        let all = crate::config::Config::load(&path).unwrap();
        let section: RelayConfig = all.relay.try_into().unwrap();
        assert_eq!(section, cfg);
    }
}
