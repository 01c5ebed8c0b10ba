//! The Relay wire protocol (SPEC §8): what the broker, the reference Relay, the device
//! client and the phone app must agree on byte for byte.
//!
//! - `seal`: the sealed box (X25519 + HKDF-SHA256 + XChaCha20-Poly1305), vectors in
//!   `tests/data/seal-vectors.json`, which the phone app's JavaScript must match too.
//! - `pairing`: single-use pairing codes and device proofs the Relay cannot forge.
//! - `sign`: the installation's Ed25519 signature on envelopes and verdicts, vectors in
//!   `tests/data/signature-vectors.json`.
//! - `wire`: the JSON shapes of the Relay's HTTP bodies and of the sealed payloads.
//! - `client`: the Relay HTTP client (reqwest over rustls).
//! - `tls`: rustls configuration for Relay clients and servers.
//!
//! Nothing here logs a payload, a key or a token.

pub mod client;
pub mod pairing;
pub mod seal;
pub mod sign;
pub mod tls;
pub mod wire;
