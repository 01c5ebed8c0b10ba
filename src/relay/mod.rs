//! The broker's link to Relays (SPEC §8): sealed questions out through a Relay, sealed
//! answers back. The wire protocol itself is the `agentnotify-relay-proto` crate; the
//! reference Relay server is `agentnotify-relay`.
//!
//! Invariants:
//! - A question leaves only over an enabled route with `include_message = true`.
//! - Every answer from a Relay goes through [`Broker::respond`] with `source: relay`;
//!   nothing here decides whether an answer is accepted.
//! - Nothing here logs prompts, choices, answers, digests, nonces, tokens or keys.
//!
//! Files: `config` (providers, routes, secrets, installation keys), `devices` (the
//! allow-list of paired devices), `outbox` (durable publishing with retries), `poller`
//! (answers back, cursors).

pub mod config;
pub mod devices;
pub mod outbox;
pub mod poller;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::broker::{Broker, BrokerError};
use crate::model::Status;
use crate::paths::Paths;
use crate::secret::Secret;
use agentnotify_relay_proto::client::{RelayClient, RelayClientError};
use agentnotify_relay_proto::seal::{KeyPair, SealError};
use agentnotify_relay_proto::sign::SigningPair;
use config::{ProviderSecrets, RelayConfig, RelayConfigError};

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Config(#[from] RelayConfigError),
    #[error("relay publishing is not configured: add a relay and enable a route with include_message = true (agentnotify relay add)")]
    Unavailable,
    #[error("no enabled relay provider named {0:?}")]
    UnknownProvider(String),
    #[error(
        "relay provider {0:?} has no stored credentials; add it again with `agentnotify relay add`"
    )]
    NoCredentials(String),
    #[error("no installation key yet; run `agentnotify relay add` first")]
    NoInstallationKey,
    #[error("interaction is not pending (it is {}); only pending questions are published", .0.as_str())]
    NotPending(Status),
    #[error(transparent)]
    Broker(#[from] BrokerError),
    #[error(transparent)]
    Client(#[from] RelayClientError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot seal for a device: {0}")]
    Seal(#[from] SealError),
    #[error("cannot write {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// What one provider needs to talk to its Relay: settings, secrets, the installation key,
/// and the HTTP client (one per provider, kept across polls and deliveries: building one
/// loads the TLS configuration and opens new connections).
#[derive(Clone)]
pub struct Endpoint {
    pub provider: config::Provider,
    pub secrets: ProviderSecrets,
    pub key: KeyPair,
    /// Signs every envelope and verdict (`agentnotify_relay_proto::sign`).
    pub signing: SigningPair,
    pub client: RelayClient,
}

/// The broker's relay side: publishing and polling. Settings are re-read from disk on each
/// use, so `agentnotify relay …` changes apply to a running broker without a restart.
pub struct RelayLink {
    paths: Paths,
    broker: Arc<Broker>,
    dispatch_wake: Notify,
    /// provider id → its client, and the URL and token it was built for (a provider added
    /// again gets a new one).
    clients: std::sync::Mutex<HashMap<String, (String, Secret, RelayClient)>>,
    /// One poll at a time, so a cursor is never read and written by two polls at once.
    poll_lock: tokio::sync::Mutex<()>,
    /// One writer of `relay_devices.json` at a time.
    devices_lock: tokio::sync::Mutex<()>,
}

impl RelayLink {
    pub fn new(paths: Paths, broker: Arc<Broker>) -> Arc<RelayLink> {
        Arc::new(RelayLink {
            paths,
            broker,
            dispatch_wake: Notify::new(),
            clients: Default::default(),
            poll_lock: tokio::sync::Mutex::new(()),
            devices_lock: tokio::sync::Mutex::new(()),
        })
    }

    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    pub fn config(&self) -> Result<RelayConfig, RelayError> {
        Ok(RelayConfig::load(&self.paths.config_file())?)
    }

    /// The endpoint of an enabled provider.
    pub fn endpoint(&self, cfg: &RelayConfig, id: &str) -> Result<Endpoint, RelayError> {
        let provider = cfg
            .provider(id)
            .filter(|p| p.enabled)
            .ok_or_else(|| RelayError::UnknownProvider(id.to_string()))?;
        let secrets = config::load_secrets(&self.paths)?
            .remove(id)
            .ok_or_else(|| RelayError::NoCredentials(id.to_string()))?;
        let key =
            config::load_installation_key(&self.paths)?.ok_or(RelayError::NoInstallationKey)?;
        let signing = config::load_or_create_signing_key(&self.paths)?;
        let client = self.client_for(provider, &secrets.installation_token);
        Ok(Endpoint {
            provider: provider.clone(),
            secrets,
            key,
            signing,
            client,
        })
    }

    /// The provider's client, built once for its URL and token.
    fn client_for(&self, provider: &config::Provider, token: &Secret) -> RelayClient {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        match clients.get(&provider.id) {
            Some((url, t, client)) if *url == provider.relay_url && t == token => client.clone(),
            _ => {
                let client = RelayClient::new(&provider.relay_url, Some(token.clone()));
                clients.insert(
                    provider.id.clone(),
                    (provider.relay_url.clone(), token.clone(), client.clone()),
                );
                client
            }
        }
    }

    /// Starts the background publisher, dispatcher and poller.
    pub fn spawn_background(self: &Arc<Self>) {
        tokio::spawn(outbox::run_publisher(Arc::clone(self)));
        tokio::spawn(outbox::run_dispatcher(Arc::clone(self)));
        tokio::spawn(poller::run_poller(Arc::clone(self)));
    }
}
