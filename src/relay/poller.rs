//! Pulling answers back from the Relay (SPEC §8, §12.2).
//!
//! Each enabled provider has one task that keeps one long-poll open at the Relay
//! (`wait=30`): the Relay answers the moment an answer arrives, and the task then polls.
//! After an error the task falls back to polling every `poll_interval_seconds`, backing
//! off, until a long-poll works again.
//!
//! Each poll fetches the answers after the provider's cursor, opens and checks each one,
//! hands it to [`crate::broker::Broker::respond`] with `source: relay`, reports every
//! outcome back to the Relay (so the phone sees why an answer was refused), and only then
//! advances the cursor in `relay_response_cursors.json`. Any failure on the way leaves the
//! cursor where it was, so the same batch is processed again; the broker's replay rule
//! (same `response_id` → same result) makes that harmless.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::devices::Standing;
use super::outbox::backoff;
use super::{Endpoint, RelayError, RelayLink};
use crate::broker::BrokerError;
use crate::model::AnswerSubmission;
use agentnotify_relay_proto::seal;
use agentnotify_relay_proto::wire::{
    answer_event_id, AnswerPayload, AnswerPost, AnswerResult, CONTRACT_VERSION,
};

/// What one poll of one provider did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PollReport {
    pub provider: String,
    pub fetched: usize,
    pub accepted: usize,
    pub refused: usize,
    /// Answers addressed to another installation: never shown to the broker.
    pub dropped: usize,
    pub cursor_advanced: bool,
}

/// The fate of one fetched answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    Accepted,
    Refused {
        code: String,
        message: String,
    },
    /// Not for this installation: dropped before the broker sees it.
    Dropped,
}

fn refused(code: &str, message: impl Into<String>) -> Fate {
    Fate::Refused {
        code: code.into(),
        message: message.into(),
    }
}

/// Cursor per provider, as stored in `relay_response_cursors.json`.
pub type Cursors = BTreeMap<String, String>;

pub fn load_cursors(relay: &RelayLink) -> Cursors {
    std::fs::read(relay.paths.relay_cursors_file())
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save_cursors(relay: &RelayLink, cursors: &Cursors) -> Result<(), RelayError> {
    let bytes = serde_json::to_vec_pretty(cursors).expect("a map of strings serialises");
    crate::fsutil::write_atomic(&relay.paths.relay_cursors_file(), &bytes, 0o600).map_err(
        |source| RelayError::Io {
            what: "relay_response_cursors.json".into(),
            source,
        },
    )
}

/// Polls one provider, or every enabled one. Errors only when nothing could be polled;
/// per-provider failures of a multi-provider poll are returned in the list.
pub async fn poll(
    relay: &RelayLink,
    provider: Option<&str>,
) -> Result<Vec<(String, Result<PollReport, RelayError>)>, RelayError> {
    let cfg = relay.config()?;
    let ids: Vec<String> = match provider {
        Some(id) => {
            cfg.provider(id)
                .filter(|p| p.enabled)
                .ok_or_else(|| RelayError::UnknownProvider(id.to_string()))?;
            vec![id.to_string()]
        }
        None => cfg
            .providers
            .iter()
            .filter(|p| p.enabled)
            .map(|p| p.id.clone())
            .collect(),
    };
    if ids.is_empty() {
        return Err(RelayError::Unavailable);
    }
    let mut out = Vec::new();
    for id in ids {
        let result = match relay.endpoint(&cfg, &id) {
            Ok(endpoint) => {
                sync_devices(relay, &endpoint).await;
                poll_provider(relay, &endpoint).await
            }
            Err(e) => Err(e),
        };
        out.push((id, result));
    }
    Ok(out)
}

/// One poll of one provider; the cursor moves only if the whole batch was processed.
pub async fn poll_provider(
    relay: &RelayLink,
    endpoint: &Endpoint,
) -> Result<PollReport, RelayError> {
    let _one_at_a_time = relay.poll_lock.lock().await;
    let id = endpoint.provider.id.clone();
    let client = &endpoint.client;
    let mut cursors = load_cursors(relay);
    let batch = client
        .answers(
            &endpoint.provider.installation_id,
            cursors.get(&id).map(String::as_str),
        )
        .await?;
    let mut report = PollReport {
        provider: id.clone(),
        fetched: batch.responses.len(),
        ..Default::default()
    };
    let mut results = Vec::new();
    for answer in &batch.responses {
        let fate = apply(relay, endpoint, answer).await?;
        let before = results.len();
        match fate {
            Fate::Accepted => {
                report.accepted += 1;
                results.push(AnswerResult {
                    status: "accepted".into(),
                    ..AnswerResult::pending(&answer.response_id)
                });
            }
            Fate::Refused { code, message } => {
                report.refused += 1;
                tracing::info!(provider = %id, interaction = %short(&answer.interaction_id), refusal = %code, "relay answer refused");
                results.push(AnswerResult {
                    status: "refused".into(),
                    code: Some(code),
                    message: Some(message),
                    ..AnswerResult::pending(&answer.response_id)
                });
            }
            Fate::Dropped => {
                report.dropped += 1;
                tracing::warn!(provider = %id, "dropped a relay answer addressed to another installation");
            }
        }
        // The phone checks the verdict came from its computer, not from the Relay.
        if let Some(r) = results.get_mut(before) {
            endpoint.signing.sign_verdict(
                r,
                &endpoint.provider.installation_id,
                &answer.device_id,
                &answer.interaction_id,
            );
        }
    }
    if !results.is_empty() {
        client.post_results(&results).await?;
    }
    if let Some(c) = batch.cursor {
        if cursors.get(&id) != Some(&c) {
            cursors.insert(id.clone(), c);
            save_cursors(relay, &cursors)?;
            report.cursor_advanced = true;
        }
    }
    Ok(report)
}

/// Interaction ids are not secret, but keep log lines short and uniform.
fn short(id: &str) -> String {
    id.chars().take(32).collect()
}

/// Opens and checks one answer and hands it to the broker. `Err` only for failures that
/// must stop the batch (the broker could not store); every verdict is a [`Fate`].
pub async fn apply(
    relay: &RelayLink,
    endpoint: &Endpoint,
    answer: &AnswerPost,
) -> Result<Fate, RelayError> {
    let installation_id = &endpoint.provider.installation_id;
    if &answer.installation_id != installation_id {
        return Ok(Fate::Dropped);
    }
    match super::devices::standing(relay, &endpoint.provider.id, &answer.device_id)? {
        Standing::Paired => {}
        Standing::Revoked => {
            return Ok(refused(
                "device_revoked",
                "this device was removed from the installation; its answers are refused",
            ))
        }
        Standing::Unknown => {
            return Ok(refused(
                "device_not_paired",
                "this device is not paired with the installation",
            ))
        }
    }
    let payload = match &answer.sealed {
        Some(sealed) => {
            let event_id = answer_event_id(&answer.response_id);
            let binding = seal::Binding {
                installation_id,
                device_id: &answer.device_id,
                key_id: answer.key_id.as_deref().unwrap_or(""),
                event_id: &event_id,
                expires_at: answer.expires_at.as_deref().unwrap_or(""),
            };
            let Ok(bytes) = endpoint.key.open(&binding, sealed) else {
                return Ok(refused(
                    "unsealable",
                    "the sealed answer does not open: it was altered, moved, or sealed to another key",
                ));
            };
            let Ok(p) = serde_json::from_slice::<AnswerPayload>(&bytes) else {
                return Ok(refused(
                    "invalid_request",
                    "the sealed answer is not an answer payload",
                ));
            };
            let consistent = p.response_id == answer.response_id
                && p.interaction_id == answer.interaction_id
                && p.installation_id == answer.installation_id
                && p.device_id == answer.device_id
                && p.contract_version == CONTRACT_VERSION;
            if !consistent {
                return Ok(refused(
                    "tampered",
                    "the sealed answer does not match the ids it was sent with",
                ));
            }
            p
        }
        None if !endpoint.provider.accept_plain_answers => {
            return Ok(refused(
                "unsealed_answer",
                "this installation accepts only answers sealed to its key",
            ));
        }
        None => AnswerPayload {
            contract_version: answer.contract_version.clone(),
            response_id: answer.response_id.clone(),
            interaction_id: answer.interaction_id.clone(),
            request_digest: answer.request_digest.clone().unwrap_or_default(),
            nonce: answer.nonce.clone().unwrap_or_default(),
            choice_id: answer.choice_id.clone(),
            text: answer.text.clone(),
            installation_id: answer.installation_id.clone(),
            device_id: answer.device_id.clone(),
        },
    };
    let body = json!({
        "response_id": payload.response_id,
        "request_digest": payload.request_digest,
        "nonce": payload.nonce,
        "choice_id": payload.choice_id,
        "text": payload.text,
        "source": "relay",
        "device_id": payload.device_id,
    });
    let sub = match AnswerSubmission::from_json(&body) {
        Ok(s) => s,
        Err(e) => return Ok(refused("invalid_request", e.0)),
    };
    match relay.broker.respond(&payload.interaction_id, sub).await {
        Ok(_) => Ok(Fate::Accepted),
        Err(BrokerError::Refused(why)) => Ok(refused(why.code(), why.to_string())),
        Err(BrokerError::Invalid(e)) => Ok(refused("invalid_request", e.0)),
        Err(BrokerError::NotFound(what)) => Ok(refused("not_found", format!("{what} not found"))),
        Err(e) => Err(e.into()),
    }
}

/// New pairings are noticed (and announced) and revocations repeated here too, not only
/// when a question goes out.
async fn sync_devices(relay: &RelayLink, endpoint: &Endpoint) {
    if let Err(e) = super::devices::sync(relay, endpoint).await {
        tracing::warn!(provider = %endpoint.provider.id, error = %e, "could not check the relay's devices");
    }
}

/// How long each long-poll asks the Relay to hold.
const LONG_POLL: Duration = Duration::from_secs(30);
/// A long-poll that comes back empty sooner than this was not held (a Relay without
/// long-polls): the task then waits out the poll interval instead of spinning.
const HELD_AT_LEAST: Duration = Duration::from_secs(1);

/// Background task: one task per enabled provider ([`watch_provider`]); providers enabled
/// or added later get theirs within a few seconds.
pub async fn run_poller(relay: Arc<RelayLink>) {
    let mut running: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    loop {
        match relay.config() {
            Ok(cfg) => {
                for p in cfg.providers.iter().filter(|p| p.enabled) {
                    if running.get(&p.id).is_none_or(|h| h.is_finished()) {
                        let task = tokio::spawn(watch_provider(Arc::clone(&relay), p.id.clone()));
                        running.insert(p.id.clone(), task);
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "relay settings unreadable; polling paused"),
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// Fetches answers for one provider for as long as it stays enabled: a long-poll when all
/// is well, periodic polls with backoff after an error (or with `long_poll = false`).
async fn watch_provider(relay: Arc<RelayLink>, id: String) {
    let mut failures = 0u32;
    let mut sync = true;
    loop {
        let Ok(cfg) = relay.config() else { return };
        if !cfg.provider(&id).is_some_and(|p| p.enabled) {
            return;
        }
        let interval = cfg.poll_interval();
        let result = match relay.endpoint(&cfg, &id) {
            Ok(endpoint) => {
                if sync || !cfg.long_poll() {
                    sync_devices(&relay, &endpoint).await;
                }
                if cfg.long_poll() && failures == 0 {
                    long_poll(&relay, &endpoint).await
                } else {
                    poll_provider(&relay, &endpoint).await.map(|_| Waited {
                        devices_changed: false,
                        idle: interval,
                    })
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(w) => {
                failures = 0;
                sync = w.devices_changed;
                if !w.idle.is_zero() {
                    tokio::time::sleep(w.idle).await;
                }
            }
            Err(e) => {
                failures += 1;
                sync = true;
                let wait = backoff(failures, interval);
                tracing::warn!(provider = %id, failures, retry_in_ms = wait.as_millis() as u64, error = %e, "relay poll failed");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// What one long-poll round found.
struct Waited {
    devices_changed: bool,
    /// How long to pause before the next round.
    idle: Duration,
}

/// Holds one long-poll; when answers are there, polls (under the poll lock, from the
/// stored cursor) and applies them.
async fn long_poll(relay: &RelayLink, endpoint: &Endpoint) -> Result<Waited, RelayError> {
    let since = load_cursors(relay).get(&endpoint.provider.id).cloned();
    let started = tokio::time::Instant::now();
    let batch = endpoint
        .client
        .answers_wait(
            &endpoint.provider.installation_id,
            since.as_deref(),
            LONG_POLL,
        )
        .await?;
    if !batch.responses.is_empty() {
        poll_provider(relay, endpoint).await?;
    }
    let held = started.elapsed() >= HELD_AT_LEAST;
    let idle = if batch.responses.is_empty() && !batch.devices_changed && !held {
        relay.config()?.poll_interval()
    } else {
        Duration::ZERO
    };
    Ok(Waited {
        devices_changed: batch.devices_changed,
        idle,
    })
}
