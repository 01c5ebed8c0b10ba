//! Pairing a phone with an installation without trusting the Relay.
//!
//! The pairing code (shown on the desktop, typed or scanned on the phone) carries the Relay
//! URL, the installation id, the installation's public key and a pairing secret. The Relay
//! only ever sees a hash-derived pairing token (enough to let a phone register) and a proof
//! (HMAC by the secret over the phone's public key). The broker seals questions only to
//! device keys whose proof verifies, so a device the Relay invents receives nothing.
//!
//! Every code is single-use and short-lived: its secret is derived from the provider's
//! master secret and a pairing id that carries the expiry ([`PairingId`]), so the broker can
//! check any device's proof from the pairing id alone, without a file of open codes.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const CODE_PREFIX: &str = "anp1.";

/// How long a pairing code can be used.
pub const PAIRING_LIFETIME_SECS: i64 = 600;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    #[error("not an agentnotify pairing code (it starts with {CODE_PREFIX})")]
    Malformed,
    #[error("this pairing code is from an older agentnotify (it has no signing key or expiry): run `agentnotify relay pair` again")]
    Outdated,
}

/// Everything a phone needs to pair, from the desktop, out of the Relay's sight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingCode {
    pub relay_url: String,
    pub installation_id: String,
    /// X25519: answers are sealed to it.
    pub installation_public_key: String,
    /// Ed25519: every envelope and verdict is signed by it (`crate::sign`).
    #[serde(default)]
    pub installation_signing_key: String,
    pub pairing_secret: String,
    /// RFC 3339; the Relay refuses the code after it.
    #[serde(default)]
    pub expires_at: String,
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
        let code: PairingCode =
            serde_json::from_slice(&json).map_err(|_| PairingError::Malformed)?;
        if code.installation_signing_key.is_empty() || code.expires_at.is_empty() {
            return Err(PairingError::Outdated);
        }
        Ok(code)
    }

    /// The link that opens the phone app and pairs it: the code rides in the fragment,
    /// which a browser never sends to the server.
    pub fn app_link(&self) -> String {
        format!(
            "{}/app/#pair={}",
            self.relay_url.trim_end_matches('/'),
            self.encode()
        )
    }
}

/// A pairing's id: `p1.<expiry, unix seconds>.<16 hex random>`. It is public (the Relay
/// stores it with the device); the secret is derived from it ([`derive_secret`]), so the
/// expiry cannot be changed without breaking every proof made under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingId(pub String);

impl PairingId {
    pub fn new(expires_unix: i64) -> PairingId {
        let random: [u8; 8] = rand::random();
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        PairingId(format!("p1.{expires_unix}.{hex}"))
    }
    /// The expiry the id carries, if it is a well-formed id.
    pub fn expires_unix(id: &str) -> Option<i64> {
        let mut parts = id.split('.');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("p1"), Some(t), Some(r), None)
                if r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                t.parse().ok()
            }
            _ => None,
        }
    }
}

/// The secret of one pairing code: HMAC-SHA256(master, "agentnotify/pairing-secret/v1\0" ‖
/// pairing id), base64url. Only the desktop holds `master`.
pub fn derive_secret(master: &str, pairing_id: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(master.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(b"agentnotify/pairing-secret/v1\0");
    mac.update(pairing_id.as_bytes());
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
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
            installation_signing_key: "sk".into(),
            pairing_secret: new_secret(),
            expires_at: "2030-01-01T00:00:00Z".into(),
        };
        assert_eq!(PairingCode::decode(&code.encode()).unwrap(), code);
        assert!(PairingCode::decode("nope").is_err());
        assert!(code
            .app_link()
            .starts_with("http://127.0.0.1:9/app/#pair=anp1."));
        let old = PairingCode {
            installation_signing_key: String::new(),
            ..code.clone()
        };
        assert_eq!(
            PairingCode::decode(&old.encode()),
            Err(PairingError::Outdated)
        );
        let id = PairingId::new(1_900_000_000);
        assert_eq!(PairingId::expires_unix(&id.0), Some(1_900_000_000));
        assert_eq!(PairingId::expires_unix("p1.5.zz"), None);
        assert_ne!(
            derive_secret("m", &id.0),
            derive_secret("m", "p1.1.0000000000000000")
        );
        let s = &code.pairing_secret;
        let proof = device_proof(s, "inst", "key-a");
        assert!(verify_device_proof(s, "inst", "key-a", &proof));
        assert!(!verify_device_proof(s, "inst", "key-b", &proof));
        assert!(!verify_device_proof(s, "inst2", "key-a", &proof));
        assert!(!verify_device_proof(&new_secret(), "inst", "key-a", &proof));
    }
}

#[cfg(test)]
mod vectors {
    use super::*;

    /// `tests/data/pairing-vectors.json` was produced by an independent implementation
    /// (Python hmac/hashlib).
    #[test]
    fn matches_the_committed_vectors() {
        let v: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/data/pairing-vectors.json")).unwrap();
        let s = |k: &str| v[k].as_str().unwrap().to_string();
        let secret = derive_secret(&s("master_secret"), &s("pairing_id"));
        assert_eq!(secret, s("pairing_secret"));
        assert_eq!(pairing_token(&secret), s("pairing_token"));
        assert_eq!(
            device_proof(&secret, &s("installation_id"), &s("device_public_key")),
            s("proof")
        );
        assert_eq!(
            PairingId::expires_unix(&s("pairing_id")),
            Some(1_893_553_445)
        );
    }
}
