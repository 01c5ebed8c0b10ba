//! Pairing a phone with an installation without trusting the Relay.
//!
//! The pairing code (shown on the desktop, typed or scanned on the phone) carries the Relay
//! URL, the installation id, the installation's public key and a pairing secret. The Relay
//! only ever sees a hash-derived pairing token (enough to let a phone register) and a proof
//! (HMAC by the secret over the phone's public key). The broker seals questions only to
//! device keys whose proof verifies, so a device the Relay invents receives nothing.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const CODE_PREFIX: &str = "anp1.";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    #[error("not an agentnotify pairing code (it starts with {CODE_PREFIX})")]
    Malformed,
}

/// Everything a phone needs to pair, from the desktop, out of the Relay's sight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingCode {
    pub relay_url: String,
    pub installation_id: String,
    pub installation_public_key: String,
    pub pairing_secret: String,
}

impl PairingCode {
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).expect("strings serialise");
        format!("{CODE_PREFIX}{}", URL_SAFE_NO_PAD.encode(json))
    }
    pub fn decode(code: &str) -> Result<PairingCode, PairingError> {
        let body = code
            .trim()
            .strip_prefix(CODE_PREFIX)
            .ok_or(PairingError::Malformed)?;
        let json = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| PairingError::Malformed)?;
        serde_json::from_slice(&json).map_err(|_| PairingError::Malformed)
    }
}

/// A fresh pairing secret (32 random bytes, base64url).
pub fn new_secret() -> String {
    agentnotify_model::secret::random_b64url(32)
}

/// The token that lets a phone register at the Relay; derived so it reveals nothing of
/// the secret.
pub fn pairing_token(secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"agentnotify/pair-token/v1\0");
    h.update(secret.as_bytes());
    URL_SAFE_NO_PAD.encode(h.finalize())
}

/// The phone's proof that it holds the pairing secret and chose `device_public_key`.
pub fn device_proof(secret: &str, installation_id: &str, device_public_key: &str) -> String {
    URL_SAFE_NO_PAD.encode(
        proof_mac(secret, installation_id, device_public_key)
            .finalize()
            .into_bytes(),
    )
}

/// Checks a proof in constant time.
pub fn verify_device_proof(
    secret: &str,
    installation_id: &str,
    device_public_key: &str,
    proof: &str,
) -> bool {
    let Ok(tag) = URL_SAFE_NO_PAD.decode(proof.trim()) else {
        return false;
    };
    proof_mac(secret, installation_id, device_public_key)
        .verify_slice(&tag)
        .is_ok()
}

fn proof_mac(secret: &str, installation_id: &str, device_public_key: &str) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(b"agentnotify/device-proof/v1\0");
    mac.update(installation_id.as_bytes());
    mac.update(b"\0");
    mac.update(device_public_key.as_bytes());
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_round_trips_and_proofs_bind_the_key() {
        let code = PairingCode {
            relay_url: "http://127.0.0.1:9".into(),
            installation_id: "inst".into(),
            installation_public_key: "pk".into(),
            pairing_secret: new_secret(),
        };
        assert_eq!(PairingCode::decode(&code.encode()).unwrap(), code);
        assert!(PairingCode::decode("nope").is_err());
        let s = &code.pairing_secret;
        let proof = device_proof(s, "inst", "key-a");
        assert!(verify_device_proof(s, "inst", "key-a", &proof));
        assert!(!verify_device_proof(s, "inst", "key-b", &proof));
        assert!(!verify_device_proof(s, "inst2", "key-a", &proof));
        assert!(!verify_device_proof(&new_secret(), "inst", "key-a", &proof));
    }
}
