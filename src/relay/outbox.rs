//! Publishing questions to a Relay: what the one delivery outbox (`broker::outbox`) does
//! for a channel of kind `relay`.
//!
//! The broker queues `deliver:interaction:{id}:{provider}` for every provider whose routes
//! carry a new question; the channel dispatcher calls [`deliver`], and once the question is
//! settled [`withdraw`], which deletes its envelopes at the Relay (SPEC §12.4). Sealing happens at
//! delivery time, per device the provider lists and the pairing secret vouches for; the
//! Relay stores one envelope per device and event id, so a delivery repeated after a crash
//! or a manual re-publish replaces rather than duplicates.

use std::time::Duration;

use super::{RelayError, RelayLink};
use crate::broker::outbox::{entry_id, Action, EntryState, OutboxEntry, Subject};
use crate::broker::BrokerError;
use crate::model::{Interaction, Status, Timestamp};
use agentnotify_relay_proto::seal;
use agentnotify_relay_proto::sign::SigningPair;
use agentnotify_relay_proto::wire::{question_event_id, Envelope, QuestionPayload};

/// Longest wait between two polls that failed.
pub const MAX_BACKOFF: Duration = Duration::from_secs(120);

/// The outbox id of a question for a provider: deterministic, so enqueuing twice is a no-op.
pub fn outbox_id(interaction_id: &str, provider: &str) -> String {
    entry_id(
        Action::Deliver,
        Subject::Interaction,
        interaction_id,
        provider,
    )
}

/// Queues `id` for every provider whose routes carry it, by hand (`POST …/publish`): also
/// re-sends to providers it was already delivered to and makes waiting entries due now.
pub async fn enqueue(relay: &RelayLink, id: &str) -> Result<usize, RelayError> {
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
        relay.broker.update_outbox(&oid, |stored| {
            let mut e = stored.unwrap_or_else(|| {
                OutboxEntry::new(
                    Action::Deliver,
                    Subject::Interaction,
                    &record.id,
                    &p.id,
                    now,
                    now,
                )
            });
            e.state = EntryState::Waiting;
            e.next_attempt_at = now;
            Some(e)
        })?;
    }
    relay.broker.commit_outbox().await?;
    relay.broker.wake_outbox();
    tracing::info!(
        id,
        providers = providers.len(),
        "question queued for relay by hand"
    );
    Ok(providers.len())
}

/// Exponential backoff with jitter for polls, capped at [`MAX_BACKOFF`].
pub fn backoff(failures: u32, base: Duration) -> Duration {
    crate::broker::outbox::backoff(failures, base, MAX_BACKOFF)
}

/// Seals the question for each paired device of the provider and stores it there.
/// Returns how many devices got it. A question no longer pending or no longer covered by
/// a route is dropped (Ok) rather than sent.
pub async fn deliver(relay: &RelayLink, entry: &OutboxEntry) -> Result<usize, RelayError> {
    let record = match relay.broker.get(&entry.subject_id).await {
        Ok(r) if r.status == Status::Pending => r,
        Ok(_) | Err(BrokerError::NotFound(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let cfg = relay.config()?;
    if !cfg
        .providers_for(&record)
        .iter()
        .any(|p| p.id == entry.channel)
    {
        return Ok(0);
    }
    let endpoint = match relay.endpoint(&cfg, &entry.channel) {
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
pub async fn withdraw(relay: &RelayLink, entry: &OutboxEntry) -> Result<usize, RelayError> {
    let cfg = relay.config()?;
    let endpoint = match relay.endpoint(&cfg, &entry.channel) {
        Ok(e) => e,
        Err(RelayError::UnknownProvider(_)) => return Ok(0),
        Err(e) => return Err(e),
    };
    let reason = match relay.broker.get(&entry.subject_id).await {
        Ok(r) => r.status.as_str(),
        Err(_) => "settled",
    };
    let reply = endpoint
        .client
        .delete_envelope(&question_event_id(&entry.subject_id), reason)
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
