//! Sealing (SPEC §8): what lets a Relay carry questions and answers it can neither read
//! nor alter.
//!
//! One box per recipient key: a fresh ephemeral X25519 key agrees a shared secret with the
//! recipient's static key; HKDF-SHA256 (salt = ephemeral public ‖ recipient public, info =
//! `agentnotify/seal/v1`) turns it into an XChaCha20-Poly1305 key; a random 24-byte nonce
//! encrypts. The associated data binds the envelope's routing metadata, so a box moved to
//! another device, event or expiry does not open. Wire form:
//! `base64url_nopad(nonce ‖ ephemeral_public ‖ ciphertext+tag)`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};

/// The envelope version; the first element of the associated data.
pub const VERSION: &str = "agentnotify/seal/v1";
const INFO: &[u8] = b"agentnotify/seal/v1";
const NONCE_LEN: usize = 24;
const KEY_LEN: usize = 32;
const TAG_LEN: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("sealed data is not valid base64url")]
    Encoding,
    #[error("sealed data is too short to be a sealed box")]
    TooShort,
    #[error("sealed data does not open: it was altered, moved, or sealed to another key")]
    Open,
    #[error("the key agreement produced no shared secret (invalid public key)")]
    WeakKey,
    #[error("a key must be 32 bytes of base64url")]
    BadKey,
}

/// The routing metadata a box is bound to. Every field travels in clear next to the box
/// (the Relay needs it to route and expire), and none can be changed without breaking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The desktop installation on both ends of the conversation.
    pub installation_id: &'a str,
    /// The phone on the other end.
    pub device_id: &'a str,
    /// Fingerprint of the recipient's public key ([`key_id`]).
    pub key_id: &'a str,
    /// `interaction:{id}` for a question, `response:{response_id}` for an answer.
    pub event_id: &'a str,
    /// RFC 3339 expiry of the question.
    pub expires_at: &'a str,
}

impl Binding<'_> {
    /// The associated data: compact JSON `[version, installation, device, key id, event id,
    /// expiry]`, one unambiguous encoding of the binding.
    pub fn aad(&self) -> Vec<u8> {
        serde_json::to_vec(&[
            VERSION,
            self.installation_id,
            self.device_id,
            self.key_id,
            self.event_id,
            self.expires_at,
        ])
        .expect("an array of strings always serialises")
    }
}

/// A key pair for receiving sealed boxes (an installation's or a device's).
#[derive(Clone)]
pub struct KeyPair {
    secret: StaticSecret,
    public: PublicKey,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyPair(public {})", self.public_b64())
    }
}

impl KeyPair {
    pub fn generate() -> KeyPair {
        KeyPair::from_secret_bytes(rand::random())
    }
    pub fn from_secret_bytes(bytes: [u8; 32]) -> KeyPair {
        let secret = StaticSecret::from(bytes);
        let public = PublicKey::from(&secret);
        KeyPair { secret, public }
    }
    pub fn from_secret_b64(s: &str) -> Result<KeyPair, SealError> {
        Ok(KeyPair::from_secret_bytes(decode_key(s)?))
    }
    /// The secret as base64url; only for writing the private key file.
    pub fn secret_b64(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.secret.to_bytes())
    }
    pub fn public_bytes(&self) -> [u8; 32] {
        self.public.to_bytes()
    }
    pub fn public_b64(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.public.as_bytes())
    }
    pub fn key_id(&self) -> String {
        key_id(&self.public_bytes())
    }

    /// Opens a box sealed to this key under `binding`.
    pub fn open(&self, binding: &Binding<'_>, wire: &str) -> Result<Vec<u8>, SealError> {
        let raw = URL_SAFE_NO_PAD
            .decode(wire.trim())
            .map_err(|_| SealError::Encoding)?;
        if raw.len() < NONCE_LEN + KEY_LEN + TAG_LEN {
            return Err(SealError::TooShort);
        }
        let (nonce, rest) = raw.split_at(NONCE_LEN);
        let (eph, ct) = rest.split_at(KEY_LEN);
        let eph: [u8; 32] = eph.try_into().expect("split at 32");
        let shared = self.secret.diffie_hellman(&PublicKey::from(eph));
        if !shared.was_contributory() {
            return Err(SealError::WeakKey);
        }
        let cipher = cipher(shared.as_bytes(), &eph, &self.public_bytes());
        cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: &binding.aad(),
                },
            )
            .map_err(|_| SealError::Open)
    }
}

/// Fingerprint of a public key: the first 16 hex digits of its SHA-256.
pub fn key_id(public: &[u8; 32]) -> String {
    let mut hex = agentnotify_model::digest::hex_sha256(public);
    hex.truncate(16);
    hex
}

/// Decodes a 32-byte key from base64url (padding tolerated).
pub fn decode_key(s: &str) -> Result<[u8; 32], SealError> {
    URL_SAFE_NO_PAD
        .decode(s.trim().trim_end_matches('='))
        .ok()
        .and_then(|v| v.try_into().ok())
        .ok_or(SealError::BadKey)
}

/// Seals `plaintext` to `recipient` with a fresh ephemeral key and nonce.
pub fn seal(
    recipient: &[u8; 32],
    binding: &Binding<'_>,
    plaintext: &[u8],
) -> Result<String, SealError> {
    seal_with(
        recipient,
        rand::random(),
        rand::random(),
        binding,
        plaintext,
    )
}

/// Seals with a given ephemeral secret and nonce: deterministic, for test vectors only.
/// Reusing either in real use breaks the scheme; [`seal`] draws both at random.
pub fn seal_with(
    recipient: &[u8; 32],
    ephemeral_secret: [u8; 32],
    nonce: [u8; NONCE_LEN],
    binding: &Binding<'_>,
    plaintext: &[u8],
) -> Result<String, SealError> {
    let eph = StaticSecret::from(ephemeral_secret);
    let eph_pub = PublicKey::from(&eph).to_bytes();
    let shared = eph.diffie_hellman(&PublicKey::from(*recipient));
    if !shared.was_contributory() {
        return Err(SealError::WeakKey);
    }
    let ct = cipher(shared.as_bytes(), &eph_pub, recipient)
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad: &binding.aad(),
            },
        )
        .expect("XChaCha20-Poly1305 encrypts any message that fits in memory");
    let mut wire = Vec::with_capacity(NONCE_LEN + KEY_LEN + ct.len());
    wire.extend_from_slice(&nonce);
    wire.extend_from_slice(&eph_pub);
    wire.extend_from_slice(&ct);
    Ok(URL_SAFE_NO_PAD.encode(wire))
}

fn cipher(shared: &[u8; 32], eph_pub: &[u8; 32], recipient_pub: &[u8; 32]) -> XChaCha20Poly1305 {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(eph_pub);
    salt[32..].copy_from_slice(recipient_pub);
    let mut key = [0u8; 32];
    Hkdf::<Sha256>::new(Some(&salt), shared)
        .expand(INFO, &mut key)
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    XChaCha20Poly1305::new(&key.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> Binding<'static> {
        Binding {
            installation_id: "inst",
            device_id: "dev",
            key_id: "0011223344556677",
            event_id: "interaction:abc",
            expires_at: "2030-01-01T00:00:00.000Z",
        }
    }

    #[test]
    fn round_trip_and_binding() {
        let device = KeyPair::generate();
        let wire = seal(&device.public_bytes(), &binding(), b"hello").unwrap();
        assert_eq!(device.open(&binding(), &wire).unwrap(), b"hello");
        let other = Binding {
            device_id: "dev2",
            ..binding()
        };
        assert_eq!(device.open(&other, &wire), Err(SealError::Open));
        assert_eq!(
            KeyPair::generate().open(&binding(), &wire),
            Err(SealError::Open)
        );
    }

    /// `tests/data/seal-vectors.json` was produced by an independent implementation
    /// (Python `cryptography` and libsodium); this one must match it byte for byte.
    #[test]
    fn matches_the_committed_vectors() {
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/data/seal-vectors.json")).unwrap();
        let b64 = |v: &serde_json::Value| URL_SAFE_NO_PAD.decode(v.as_str().unwrap()).unwrap();
        let vectors = file["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 3);
        for v in vectors {
            let name = v["name"].as_str().unwrap();
            let recipient =
                KeyPair::from_secret_b64(v["recipient_secret"].as_str().unwrap()).unwrap();
            assert_eq!(
                recipient.public_b64(),
                v["recipient_public"].as_str().unwrap(),
                "{name}"
            );
            let b = &v["binding"];
            let s = |k: &str| b[k].as_str().unwrap();
            let binding = Binding {
                installation_id: s("installation_id"),
                device_id: s("device_id"),
                key_id: s("key_id"),
                event_id: s("event_id"),
                expires_at: s("expires_at"),
            };
            assert_eq!(binding.key_id, recipient.key_id(), "{name}");
            assert_eq!(
                binding.aad(),
                v["aad"].as_str().unwrap().as_bytes(),
                "{name}"
            );
            let plaintext = v["plaintext"].as_str().unwrap().as_bytes();
            let wire = seal_with(
                &recipient.public_bytes(),
                b64(&v["ephemeral_secret"]).try_into().unwrap(),
                b64(&v["nonce"]).try_into().unwrap(),
                &binding,
                plaintext,
            )
            .unwrap();
            assert_eq!(wire, v["wire"].as_str().unwrap(), "{name}");
            assert_eq!(
                recipient.open(&binding, &wire).unwrap(),
                plaintext,
                "{name}"
            );
        }
    }

    proptest::proptest! {
        /// A flipped bit anywhere in a sealed box (nonce, ephemeral key, ciphertext or tag)
        /// makes it refuse to open.
        #[test]
        fn any_flipped_byte_is_rejected(pos in 0usize..1000, bit in 0u8..8, len in 0usize..200) {
            let device = KeyPair::generate();
            let wire = seal(&device.public_bytes(), &binding(), &vec![b'x'; len]).unwrap();
            let mut raw = URL_SAFE_NO_PAD.decode(&wire).unwrap();
            let pos = pos % raw.len();
            raw[pos] ^= 1 << bit;
            let tampered = URL_SAFE_NO_PAD.encode(&raw);
            proptest::prop_assert!(device.open(&binding(), &tampered).is_err());
        }
    }

    #[test]
    fn low_order_point_is_refused() {
        let zero = [0u8; 32];
        assert_eq!(
            seal(&zero, &binding(), b"x").unwrap_err(),
            SealError::WeakKey
        );
    }
}
