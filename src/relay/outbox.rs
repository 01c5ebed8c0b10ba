//! Publishing questions: a durable outbox with deterministic ids and a dispatcher that
//! retries with backoff.
//!
//! An entry `interaction:{id}:{provider}` says "this question still has to reach this
//! provider". Sealing happens at delivery time, per device the provider lists and the
//! pairing secret vouches for; the Relay stores one envelope per device and event id, so a
//! delivery repeated after a crash or a manual re-publish replaces rather than duplicates.
//!
//! An entry `withdraw:{id}:{provider}` says "this settled question must leave the phones":
//! the dispatcher deletes its envelopes at the Relay (SPEC §12.4), with the same retries.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use super::{RelayError, RelayLink};
use crate::broker::{BrokerError, InteractionFilter};
use crate::model::{Interaction, Status, Timestamp};
use agentnotify_relay_proto::seal;
use agentnotify_relay_proto::sign::SigningPair;
use agentnotify_relay_proto::wire::{question_event_id, Envelope, QuestionPayload};

/// Longest wait between two delivery attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(120);

/// One question still to be delivered to one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub id: String,
    pub interaction_id: String,
    pub provider: String,
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    pub created_at: Timestamp,
    /// Why the last attempt failed (no secrets, no content).
    pub last_error: Option<String>,
    /// `publish` (absent in older entries) or `withdraw`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

const WITHDRAW: &str = "withdraw";

/// The outbox id of a withdrawal.
pub fn withdraw_id(interaction_id: &str, provider: &str) -> String {
    format!("withdraw:{interaction_id}:{provider}")
}

/// The outbox id: deterministic, so enqueuing twice is a no-op.
pub fn outbox_id(interaction_id: &str, provider: &str) -> String {
    format!("interaction:{interaction_id}:{provider}")
}

/// Queues `id` for every provider whose routes carry it. `force` (manual publish) also
/// re-sends to providers it was already delivered to and makes waiting entries due now.
pub async fn enqueue(relay: &RelayLink, id: &str, force: bool) -> Result<usize, RelayError> {
    let record = relay.broker.get(id).await?;
    let cfg = relay.config()?;
    if cfg.publishing_providers().is_empty() {
        return Err(RelayError::Unavailable);
    }
    if record.status != Status::Pending {
        return Err(RelayError::NotPending(record.status));
    }
    let now = Timestamp::now();
    let providers = cfg.providers_for(&record);
    for p in &providers {
        let oid = outbox_id(&record.id, &p.id);
        relay
            .broker
            .update_outbox::<OutboxEntry, _>(&oid, |stored| match stored {
                Some(_) if !force => None,
                Some(mut e) => {
                    e.next_attempt_at = now;
                    Some(e)
                }
                None => Some(OutboxEntry {
                    id: oid.clone(),
                    interaction_id: record.id.clone(),
                    provider: p.id.clone(),
                    attempts: 0,
                    next_attempt_at: now,
                    created_at: now,
                    last_error: None,
                    kind: String::new(),
                }),
            })?;
    }
    relay.broker.commit_outbox().await?;
    relay.dispatch_wake.notify_one();
    tracing::info!(
        id,
        providers = providers.len(),
        manual = force,
        "question queued for relay"
    );
    Ok(providers.len())
}

/// Background task: queues every new question (the broker's "pending" event).
pub async fn run_publisher(relay: Arc<RelayLink>) {
    let mut events = relay.broker.subscribe();
    loop {
        match events.recv().await {
            Ok(e) if e.topic == "interaction" && e.status == "pending" => {
                auto_enqueue(&relay, &e.id).await;
            }
            Ok(e) if e.topic == "interaction" => {
                if let Err(err) = enqueue_withdrawal(&relay, &e.id).await {
                    tracing::error!(id = %e.id, error = %err, "could not queue a withdrawal for relay");
                }
            }
            Ok(_) => {}
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "relay publisher fell behind; rechecking pending questions"
                );
                let filter = InteractionFilter {
                    status: Some(Status::Pending),
                    limit: 500,
                    ..Default::default()
                };
                if let Ok(pending) = relay.broker.list(&filter).await {
                    for i in pending {
                        auto_enqueue(&relay, &i.id).await;
                    }
                }
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Queues the withdrawal of a settled question from every provider its routes carried it
/// to (and drops its delivery if it has not gone out yet).
pub async fn enqueue_withdrawal(relay: &RelayLink, id: &str) -> Result<usize, RelayError> {
    let cfg = relay.config()?;
    if cfg.publishing_providers().is_empty() {
        return Ok(0);
    }
    let record = match relay.broker.get(id).await {
        Ok(r) => r,
        Err(BrokerError::NotFound(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let now = Timestamp::now();
    let providers = cfg.providers_for(&record);
    for p in &providers {
        relay.broker.remove_outbox(&outbox_id(id, &p.id))?;
        let wid = withdraw_id(id, &p.id);
        relay
            .broker
            .update_outbox::<OutboxEntry, _>(&wid, |stored| match stored {
                Some(_) => None,
                None => Some(OutboxEntry {
                    id: wid.clone(),
                    interaction_id: id.to_string(),
                    provider: p.id.clone(),
                    attempts: 0,
                    next_attempt_at: now,
                    created_at: now,
                    last_error: None,
                    kind: WITHDRAW.into(),
                }),
            })?;
    }
    relay.broker.commit_outbox().await?;
    relay.dispatch_wake.notify_one();
    Ok(providers.len())
}

async fn auto_enqueue(relay: &RelayLink, id: &str) {
    match enqueue(relay, id, false).await {
        Ok(_) | Err(RelayError::Unavailable) | Err(RelayError::NotPending(_)) => {}
        Err(RelayError::Broker(BrokerError::NotFound(_))) => {}
        Err(e) => tracing::error!(id, error = %e, "could not queue question for relay"),
    }
}

/// Background task: delivers due outbox entries; failures back off exponentially.
pub async fn run_dispatcher(relay: Arc<RelayLink>) {
    loop {
        let next = match dispatch_due(&relay).await {
            Ok(next) => next,
            Err(e) => {
                tracing::error!(error = %e, "relay outbox unreadable");
                Some(Timestamp::now() + Duration::from_secs(5))
            }
        };
        let sleep = next
            .map(|t| Timestamp::now().until(t))
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = relay.dispatch_wake.notified() => {}
        }
    }
}

/// Tries every due entry once; returns when the next one falls due.
async fn dispatch_due(relay: &RelayLink) -> Result<Option<Timestamp>, RelayError> {
    let mut next: Option<Timestamp> = None;
    for mut entry in relay.broker.outbox_entries::<OutboxEntry>()? {
        if entry.next_attempt_at > Timestamp::now() {
            next = Some(next.map_or(entry.next_attempt_at, |n| n.min(entry.next_attempt_at)));
            continue;
        }
        let attempt = if entry.kind == WITHDRAW {
            withdraw(relay, &entry).await
        } else {
            deliver(relay, &entry).await
        };
        match attempt {
            Ok(devices) => {
                relay.broker.remove_outbox(&entry.id)?;
                tracing::info!(
                    id = %entry.interaction_id,
                    provider = %entry.provider,
                    devices,
                    attempts = entry.attempts + 1,
                    action = if entry.kind == WITHDRAW { "withdrawn" } else { "delivered" },
                    "relay outbox entry done"
                );
            }
            Err(e) => {
                entry.attempts += 1;
                let wait = backoff(entry.attempts, Duration::from_secs(1));
                entry.next_attempt_at = Timestamp::now() + wait;
                entry.last_error = Some(e.to_string());
                // Only while it is still queued: a concurrent removal stays removed.
                let failed = entry.clone();
                relay
                    .broker
                    .update_outbox::<OutboxEntry, _>(&entry.id, |stored| stored.map(|_| failed))?;
                next = Some(next.map_or(entry.next_attempt_at, |n| n.min(entry.next_attempt_at)));
                tracing::warn!(
                    id = %entry.interaction_id,
                    provider = %entry.provider,
                    attempts = entry.attempts,
                    retry_in_ms = wait.as_millis() as u64,
                    error = %e,
                    "relay delivery failed; will retry"
                );
            }
        }
        relay.broker.commit_outbox().await?;
    }
    Ok(next)
}

/// Exponential backoff with jitter: `base · 2^(n-1)`, capped at [`MAX_BACKOFF`], then a
/// random 50–100 % of that, so many brokers do not retry in step.
pub fn backoff(failures: u32, base: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let capped = exp.min(MAX_BACKOFF);
    let jitter = 0.5 + rand::random::<f64>() * 0.5;
    capped.mul_f64(jitter).max(Duration::from_millis(100))
}

/// Seals the question for each paired device of the provider and stores it there.
/// Returns how many devices got it. A question no longer pending or no longer covered by
/// a route is dropped (Ok) rather than sent.
async fn deliver(relay: &RelayLink, entry: &OutboxEntry) -> Result<usize, RelayError> {
    let record = match relay.broker.get(&entry.interaction_id).await {
        Ok(r) if r.status == Status::Pending => r,
        Ok(_) | Err(BrokerError::NotFound(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let cfg = relay.config()?;
    if !cfg
        .providers_for(&record)
        .iter()
        .any(|p| p.id == entry.provider)
    {
        return Ok(0);
    }
    let endpoint = match relay.endpoint(&cfg, &entry.provider) {
        Ok(e) => e,
        Err(RelayError::UnknownProvider(_)) => return Ok(0),
        Err(e) => return Err(e),
    };
    let client = &endpoint.client;
    let installation_id = &endpoint.provider.installation_id;
    let mut sent = 0;
    for d in super::devices::sync(relay, &endpoint).await? {
        let Ok(public) = seal::decode_key(&d.public_key) else {
            continue;
        };
        client
            .put_envelope(&seal_for(
                &record,
                installation_id,
                &d.device_id,
                &public,
                &endpoint.signing,
            )?)
            .await?;
        sent += 1;
    }
    Ok(sent)
}

/// Deletes a settled question's envelopes at the provider's Relay; returns how many went.
async fn withdraw(relay: &RelayLink, entry: &OutboxEntry) -> Result<usize, RelayError> {
    let cfg = relay.config()?;
    let endpoint = match relay.endpoint(&cfg, &entry.provider) {
        Ok(e) => e,
        Err(RelayError::UnknownProvider(_)) => return Ok(0),
        Err(e) => return Err(e),
    };
    let reason = match relay.broker.get(&entry.interaction_id).await {
        Ok(r) => r.status.as_str(),
        Err(_) => "settled",
    };
    let reply = endpoint
        .client
        .delete_envelope(&question_event_id(&entry.interaction_id), reason)
        .await?;
    Ok(reply["deleted"].as_u64().unwrap_or(0) as usize)
}

/// The sealed envelope of `record` for one device, signed by the installation.
pub fn seal_for(
    record: &Interaction,
    installation_id: &str,
    device_id: &str,
    device_public: &[u8; 32],
    signing: &SigningPair,
) -> Result<Envelope, RelayError> {
    let event_id = question_event_id(&record.id);
    let key_id = seal::key_id(device_public);
    let expires_at = record.expires_at.to_rfc3339();
    let binding = seal::Binding {
        installation_id,
        device_id,
        key_id: &key_id,
        event_id: &event_id,
        expires_at: &expires_at,
    };
    let payload = serde_json::to_vec(&QuestionPayload::of(record)).expect("a payload serialises");
    let sealed = seal::seal(device_public, &binding, &payload)?;
    let mut envelope = Envelope {
        installation_id: installation_id.to_string(),
        device_id: device_id.to_string(),
        event_id,
        key_id,
        expires_at,
        sealed,
        signature: None,
        stored_at: None,
    };
    signing.sign_envelope(&mut envelope);
    Ok(envelope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let b = Duration::from_secs(1);
        assert!(backoff(1, b) <= Duration::from_secs(1));
        assert!(backoff(3, b) >= Duration::from_secs(2) && backoff(3, b) <= Duration::from_secs(4));
        for n in [8, 20, 1000] {
            let d = backoff(n, b);
            assert!(d >= MAX_BACKOFF / 2 && d <= MAX_BACKOFF, "{d:?}");
        }
    }
}
