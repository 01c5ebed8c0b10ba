//! The allow-list of paired devices (`relay_devices.json`, 0600), kept by the broker.
//!
//! The Relay lists devices; the broker decides which ones are paired. A device is admitted
//! once: when its proof verifies under the secret of its single-use pairing code, that code
//! had not expired when the device registered, and no other device used the code. Every
//! admission posts a notification. A revoked device stays in the list (so its code stays
//! used up), gets no question, and its answers are refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Endpoint, RelayError, RelayLink};
use crate::model::{NotificationRequest, Priority, Timestamp};
use agentnotify_relay_proto::pairing::{self, PairingId};
use agentnotify_relay_proto::wire::DeviceInfo;

/// One admitted device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowedDevice {
    pub device_id: String,
    pub name: String,
    pub public_key: String,
    pub pairing_id: String,
    /// When it registered at the Relay (the Relay's clock).
    pub paired_at: String,
    pub admitted_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
}

/// provider id → its admitted devices.
pub type AllowList = BTreeMap<String, Vec<AllowedDevice>>;

/// What the broker makes of a device that answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Paired,
    Revoked,
    Unknown,
}

pub fn load(relay: &RelayLink) -> Result<AllowList, RelayError> {
    let path = relay.paths.config_dir.join("relay_devices.json");
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            RelayError::Config(super::config::RelayConfigError::Parse {
                path,
                message: e.to_string(),
            })
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AllowList::new()),
        Err(source) => Err(RelayError::Io {
            what: "relay_devices.json".into(),
            source,
        }),
    }
}

fn save(relay: &RelayLink, list: &AllowList) -> Result<(), RelayError> {
    let path = relay.paths.config_dir.join("relay_devices.json");
    let bytes = serde_json::to_vec_pretty(list).expect("the allow-list serialises");
    crate::fsutil::write_atomic(&path, &bytes, 0o600).map_err(|source| RelayError::Io {
        what: "relay_devices.json".into(),
        source,
    })
}

/// The standing of `device_id` with `provider`.
pub fn standing(
    relay: &RelayLink,
    provider: &str,
    device_id: &str,
) -> Result<Standing, RelayError> {
    let list = load(relay)?;
    Ok(
        match list
            .get(provider)
            .and_then(|l| l.iter().find(|d| d.device_id == device_id))
        {
            Some(d) if d.revoked_at.is_none() => Standing::Paired,
            Some(_) => Standing::Revoked,
            None => Standing::Unknown,
        },
    )
}

/// Why a device the Relay lists is not admitted, or `None` if it may be.
pub fn refusal(
    master: &str,
    installation_id: &str,
    d: &DeviceInfo,
    admitted: &[AllowedDevice],
) -> Option<&'static str> {
    if d.installation_id != installation_id {
        return Some("another installation");
    }
    let Some(pid) = d.pairing_id.as_deref() else {
        return Some("no single-use pairing code");
    };
    let Some(expires) = PairingId::expires_unix(pid) else {
        return Some("a malformed pairing id");
    };
    let registered = Timestamp::parse_rfc3339(&d.created_at);
    if registered.is_none_or(|t| t.millis() as i64 > expires.saturating_mul(1000)) {
        return Some("registered after its code expired");
    }
    let secret = pairing::derive_secret(master, pid);
    if !pairing::verify_device_proof(&secret, installation_id, &d.public_key, &d.proof) {
        return Some("a pairing proof that does not verify");
    }
    if admitted.iter().any(|a| a.pairing_id == pid) {
        return Some("a pairing code another device used");
    }
    None
}

/// Lists the provider's devices at the Relay, admits the new ones (posting a notification
/// for each), and returns the paired ones as the Relay lists them, ready to seal to.
pub async fn sync(relay: &RelayLink, endpoint: &Endpoint) -> Result<Vec<DeviceInfo>, RelayError> {
    let mut listed = endpoint.client.devices().await?;
    // The earliest registration wins a code that a misbehaving Relay let two devices use.
    listed.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    let provider = &endpoint.provider.id;
    let installation_id = &endpoint.provider.installation_id;
    let master = endpoint.secrets.pairing_secret.expose();
    let _one_writer = relay.devices_lock.lock().await;
    let mut list = load(relay)?;
    let mut fresh = Vec::new();
    let mut stale = Vec::new();
    {
        let admitted = list.entry(provider.clone()).or_default();
        for d in &listed {
            if let Some(a) = admitted.iter().find(|a| a.device_id == d.device_id) {
                if a.revoked_at.is_some() {
                    stale.push(d.device_id.clone());
                }
                continue;
            }
            match refusal(master, installation_id, d, admitted) {
                None => {
                    admitted.push(AllowedDevice {
                        device_id: d.device_id.clone(),
                        name: d.name.clone(),
                        public_key: d.public_key.clone(),
                        pairing_id: d.pairing_id.clone().unwrap_or_default(),
                        paired_at: d.created_at.clone(),
                        admitted_at: Timestamp::now(),
                        revoked_at: None,
                    });
                    fresh.push(d.clone());
                }
                Some(why) => {
                    tracing::warn!(device = %d.device_id, provider = %provider, why, "relay lists a device that is not paired; it gets nothing")
                }
            }
        }
    }
    if !fresh.is_empty() {
        save(relay, &list)?;
    }
    // A revocation the Relay did not hear about (it was down) is repeated until it does.
    for id in &stale {
        if let Err(e) = endpoint.client.delete_device(id).await {
            tracing::warn!(device = %id, error = %e, "the relay did not confirm the removal");
        }
    }
    for d in &fresh {
        tracing::info!(device = %d.device_id, provider = %provider, "device paired");
        let note = NotificationRequest {
            title: "New device paired".into(),
            message: format!("A new device '{}' was paired with {provider}", d.name),
            kind: "device_paired".into(),
            priority: Priority::High,
            agent: None,
            project: None,
            key: Some(format!("relay-device:{}", d.device_id)),
            interaction_id: None,
            metadata: None,
        };
        if let Err(e) = relay.broker.notify(note).await {
            tracing::error!(error = %e, "could not post the new-device notification");
        }
    }
    let paired = &list[provider];
    Ok(listed
        .into_iter()
        .filter(|d| {
            paired.iter().any(|a| {
                a.device_id == d.device_id && a.revoked_at.is_none() && a.public_key == d.public_key
            })
        })
        .collect())
}

/// Revokes `device_id` wherever it is paired. Returns the provider and whether the Relay
/// confirmed the removal (`None`: no such device). The broker's word is final either way.
pub async fn revoke(
    relay: &RelayLink,
    device_id: &str,
) -> Result<Option<(String, bool)>, RelayError> {
    // A device paired a moment ago may not be on the allow-list yet: take in what each
    // Relay lists first (best effort), so it can be revoked at once.
    let known = load(relay)?
        .values()
        .any(|l| l.iter().any(|d| d.device_id == device_id));
    if !known {
        let cfg = relay.config()?;
        for p in cfg.providers.iter().filter(|p| p.enabled) {
            if let Ok(endpoint) = relay.endpoint(&cfg, &p.id) {
                if let Err(e) = sync(relay, &endpoint).await {
                    tracing::warn!(provider = %p.id, error = %e, "could not list the Relay's devices");
                }
            }
        }
    }
    let provider = {
        let _one_writer = relay.devices_lock.lock().await;
        let mut list = load(relay)?;
        let Some((provider, d)) = list.iter_mut().find_map(|(p, l)| {
            l.iter_mut()
                .find(|d| d.device_id == device_id)
                .map(|d| (p.clone(), d))
        }) else {
            return Ok(None);
        };
        if d.revoked_at.is_none() {
            d.revoked_at = Some(Timestamp::now());
        }
        save(relay, &list)?;
        provider
    };
    tracing::info!(device = %device_id, provider = %provider, "device revoked");
    let cfg = relay.config()?;
    let removed = match relay.endpoint(&cfg, &provider) {
        Ok(e) => match e.client.delete_device(device_id).await {
            Ok(_) => true,
            Err(err) => {
                tracing::warn!(device = %device_id, error = %err, "the relay did not confirm the removal");
                false
            }
        },
        Err(_) => false,
    };
    Ok(Some((provider, removed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(master: &str, pairing_id: &str, created_at: &str) -> DeviceInfo {
        let key = agentnotify_relay_proto::seal::KeyPair::generate().public_b64();
        let secret = pairing::derive_secret(master, pairing_id);
        DeviceInfo {
            device_id: crate::model::new_id(),
            installation_id: "inst".into(),
            name: "phone".into(),
            proof: pairing::device_proof(&secret, "inst", &key),
            public_key: key,
            created_at: created_at.into(),
            pairing_id: Some(pairing_id.into()),
            last_seen_at: None,
        }
    }

    #[test]
    fn a_device_is_admitted_once_per_code_and_only_in_time() {
        let pid = PairingId::new(1_900_000_000).0;
        let d = device("master", &pid, "2030-01-01T00:00:00Z");
        assert_eq!(refusal("master", "inst", &d, &[]), None);
        let used = AllowedDevice {
            device_id: "other".into(),
            name: "first".into(),
            public_key: "k".into(),
            pairing_id: pid.clone(),
            paired_at: d.created_at.clone(),
            admitted_at: Timestamp::now(),
            revoked_at: None,
        };
        assert_eq!(
            refusal("master", "inst", &d, &[used]),
            Some("a pairing code another device used")
        );
        let late = device("master", &pid, "2031-01-01T00:00:00Z");
        assert_eq!(
            refusal("master", "inst", &late, &[]),
            Some("registered after its code expired")
        );
        // A proof made without the desktop's master secret (the Relay's own device).
        let forged = device("not-the-master", &pid, "2030-01-01T00:00:00Z");
        assert_eq!(
            refusal("master", "inst", &forged, &[]),
            Some("a pairing proof that does not verify")
        );
        // The expiry is bound into the secret: changing the id breaks the proof.
        let mut moved = d.clone();
        moved.pairing_id = Some(PairingId::new(1_999_999_999).0);
        assert!(refusal("master", "inst", &moved, &[]).is_some());
        let mut legacy = d.clone();
        legacy.pairing_id = None;
        assert_eq!(
            refusal("master", "inst", &legacy, &[]),
            Some("no single-use pairing code")
        );
        assert_eq!(
            refusal("master", "other-inst", &d, &[]),
            Some("another installation")
        );
    }
}
