//! The installation's signature: what lets a phone tell a question or a verdict from its own
//! computer from one the Relay made up. Sealing alone cannot: anyone who knows a device's
//! public key (the Relay does) can seal to it.
//!
//! Ed25519 (RFC 8032) by the installation's signing key, whose public half the phone learns
//! from the pairing code only. The message is the compact JSON array of a domain string and
//! the fields it covers, all ASCII, so a browser's `JSON.stringify` gives the same bytes.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::wire::{AnswerResult, Envelope};

/// Domain of envelope signatures (the first element of the signed array).
pub const ENVELOPE_DOMAIN: &str = "agentnotify/envelope-sig/v1";
/// Domain of verdict signatures.
pub const VERDICT_DOMAIN: &str = "agentnotify/verdict-sig/v1";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error("a signing key must be 32 bytes of base64url")]
    BadKey,
}

/// The installation's signing key pair.
#[derive(Clone)]
pub struct SigningPair {
    key: SigningKey,
}

impl std::fmt::Debug for SigningPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningPair(public {})", self.public_b64())
    }
}

impl SigningPair {
    pub fn generate() -> SigningPair {
        SigningPair::from_seed(rand::random())
    }
    pub fn from_seed(seed: [u8; 32]) -> SigningPair {
        SigningPair {
            key: SigningKey::from_bytes(&seed),
        }
    }
    pub fn from_seed_b64(s: &str) -> Result<SigningPair, SignError> {
        Ok(SigningPair::from_seed(decode32(s)?))
    }
    /// The seed as base64url; only for writing the private key file.
    pub fn seed_b64(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.key.to_bytes())
    }
    pub fn public_b64(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.key.verifying_key().as_bytes())
    }
    /// Signs `message`; base64url of the 64-byte signature.
    pub fn sign(&self, message: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.key.sign(message).to_bytes())
    }
    /// Sets `envelope.signature`.
    pub fn sign_envelope(&self, envelope: &mut Envelope) {
        envelope.signature = Some(self.sign(&envelope_message(envelope)));
    }
    /// Sets `result.signature` for a verdict on `device_id`'s answer to `interaction_id`.
    pub fn sign_verdict(
        &self,
        result: &mut AnswerResult,
        installation_id: &str,
        device_id: &str,
        interaction_id: &str,
    ) {
        result.interaction_id = Some(interaction_id.to_string());
        let message = verdict_message(result, installation_id, device_id, interaction_id);
        result.signature = Some(self.sign(&message));
    }
}

fn decode32(s: &str) -> Result<[u8; 32], SignError> {
    URL_SAFE_NO_PAD
        .decode(s.trim().trim_end_matches('='))
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or(SignError::BadKey)
}

fn message(fields: &[&str]) -> Vec<u8> {
    serde_json::to_vec(fields).expect("an array of strings always serialises")
}

/// What an envelope's signature covers: routing metadata and the sealed bytes.
pub fn envelope_message(e: &Envelope) -> Vec<u8> {
    message(&[
        ENVELOPE_DOMAIN,
        &e.installation_id,
        &e.device_id,
        &e.key_id,
        &e.event_id,
        &e.expires_at,
        &e.sealed,
    ])
}

/// What a verdict's signature covers. The ids are the verifier's own (what it sent), so a
/// verdict cannot be moved to another answer.
pub fn verdict_message(
    r: &AnswerResult,
    installation_id: &str,
    device_id: &str,
    interaction_id: &str,
) -> Vec<u8> {
    message(&[
        VERDICT_DOMAIN,
        installation_id,
        device_id,
        &r.response_id,
        interaction_id,
        &r.status,
        r.code.as_deref().unwrap_or(""),
        r.message.as_deref().unwrap_or(""),
    ])
}

/// Checks a signature by the public key `signer` (base64url); false for anything malformed.
pub fn verify(signer: &str, message: &[u8], signature: &str) -> bool {
    let Ok(key) = decode32(signer) else {
        return false;
    };
    let Ok(key) = VerifyingKey::from_bytes(&key) else {
        return false;
    };
    let Some(sig) = URL_SAFE_NO_PAD
        .decode(signature.trim())
        .ok()
        .and_then(|v| <[u8; 64]>::try_from(v).ok())
    else {
        return false;
    };
    // Strict: rejects non-canonical encodings and small-order keys, as WebCrypto does.
    key.verify_strict(message, &Signature::from_bytes(&sig))
        .is_ok()
}

/// Whether `e` carries a valid signature by `signer`.
pub fn verify_envelope(signer: &str, e: &Envelope) -> bool {
    e.signature
        .as_deref()
        .is_some_and(|s| verify(signer, &envelope_message(e), s))
}

/// Whether `r` carries a valid signature by `signer` for this device's answer.
pub fn verify_verdict(
    signer: &str,
    r: &AnswerResult,
    installation_id: &str,
    device_id: &str,
    interaction_id: &str,
) -> bool {
    r.signature.as_deref().is_some_and(|s| {
        verify(
            signer,
            &verdict_message(r, installation_id, device_id, interaction_id),
            s,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// `tests/data/signature-vectors.json` was produced by an independent implementation
    /// (Python `cryptography`); this one must match it byte for byte.
    #[test]
    fn matches_the_committed_vectors() {
        let file: Value =
            serde_json::from_str(include_str!("../../../tests/data/signature-vectors.json"))
                .unwrap();
        let s = |v: &Value| v.as_str().unwrap().to_string();
        let pair = SigningPair::from_seed_b64(&s(&file["signing_seed"])).unwrap();
        let public = s(&file["signing_public"]);
        assert_eq!(pair.public_b64(), public);

        let v = &file["envelope"];
        let mut e: Envelope = serde_json::from_value(v["envelope"].clone()).unwrap();
        assert_eq!(envelope_message(&e), s(&v["message"]).as_bytes());
        pair.sign_envelope(&mut e);
        assert_eq!(e.signature.as_deref(), Some(s(&v["signature"]).as_str()));
        assert!(verify_envelope(&public, &e));
        for field in 0..6 {
            let mut moved = e.clone();
            match field {
                0 => moved.installation_id.push('x'),
                1 => moved.device_id.push('x'),
                2 => moved.key_id.push('x'),
                3 => moved.event_id.push('x'),
                4 => moved.expires_at.push('x'),
                _ => moved.sealed.push('x'),
            }
            assert!(!verify_envelope(&public, &moved), "field {field}");
        }
        // Signed by anyone else (the Relay's own key): not from the installation.
        let mut forged = e.clone();
        SigningPair::generate().sign_envelope(&mut forged);
        assert!(!verify_envelope(&public, &forged));
        forged.signature = None;
        assert!(!verify_envelope(&public, &forged));

        for v in file["verdicts"].as_array().unwrap() {
            let (inst, dev, q) = (
                s(&v["installation_id"]),
                s(&v["device_id"]),
                s(&v["interaction_id"]),
            );
            let mut r: AnswerResult = serde_json::from_value(v["result"].clone()).unwrap();
            assert_eq!(
                verdict_message(&r, &inst, &dev, &q),
                s(&v["message"]).as_bytes()
            );
            pair.sign_verdict(&mut r, &inst, &dev, &q);
            assert_eq!(r.signature.as_deref(), Some(s(&v["signature"]).as_str()));
            assert!(verify_verdict(&public, &r, &inst, &dev, &q));
            assert!(!verify_verdict(&public, &r, &inst, "another-device", &q));
            let mut flipped = r.clone();
            flipped.status = if r.status == "accepted" {
                "refused"
            } else {
                "accepted"
            }
            .into();
            assert!(!verify_verdict(&public, &flipped, &inst, &dev, &q));
        }
    }
}
