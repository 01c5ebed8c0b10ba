//! The watcher's OpenClaw device identity: an Ed25519 key the Gateway pairs with (on
//! loopback it approves a local device at once), and the signature over the Gateway's
//! challenge that every `connect` carries (`buildDeviceAuthPayloadV3` in OpenClaw's
//! gateway client).

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Value};

/// The key file's name in agentnotify's config folder (0600, like the API token).
pub const KEY_FILE: &str = "openclaw_device.key";

pub struct Device {
    key: SigningKey,
}

/// What the signature binds besides the key: must match the `connect` params exactly.
pub struct Signed<'a> {
    pub client_id: &'a str,
    pub client_mode: &'a str,
    pub role: &'a str,
    pub scopes: &'a [&'a str],
    pub signed_at_ms: i64,
    pub token: &'a str,
    pub nonce: &'a str,
    pub platform: &'a str,
}

impl Device {
    /// Loads the key, creating it (32 random bytes, 0600, race-free) on first use.
    pub fn load_or_create(path: &Path) -> std::io::Result<Device> {
        let text = crate::secret::load_or_create_token(path)?;
        let seed = URL_SAFE_NO_PAD
            .decode(text.expose())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| {
                std::io::Error::other(format!("{} is not a device key", path.display()))
            })?;
        Ok(Device {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// The device id OpenClaw derives: hex SHA-256 of the raw public key.
    pub fn id(&self) -> String {
        crate::model::digest::hex_sha256(self.key.verifying_key().as_bytes())
    }

    /// The `device` object of `connect`.
    pub fn connect_params(&self, s: &Signed) -> Value {
        let id = self.id();
        let payload = [
            "v3",
            &id,
            s.client_id,
            s.client_mode,
            s.role,
            &s.scopes.join(","),
            &s.signed_at_ms.to_string(),
            s.token,
            s.nonce,
            &s.platform.to_ascii_lowercase(),
            "",
        ]
        .join("|");
        let signature = self.key.sign(payload.as_bytes());
        json!({
            "id": id,
            "publicKey": URL_SAFE_NO_PAD.encode(self.key.verifying_key().as_bytes()),
            "signature": URL_SAFE_NO_PAD.encode(signature.to_bytes()),
            "signedAt": s.signed_at_ms,
            "nonce": s.nonce,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signature, Verifier, VerifyingKey};

    #[test]
    fn key_is_kept_and_the_signature_covers_the_v3_payload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let device = Device::load_or_create(&path).unwrap();
        assert_eq!(Device::load_or_create(&path).unwrap().id(), device.id());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let signed = Signed {
            client_id: "cli",
            client_mode: "cli",
            role: "operator",
            scopes: &["operator.admin", "operator.approvals"],
            signed_at_ms: 42,
            token: "t",
            nonce: "n",
            platform: "Linux",
        };
        let p = device.connect_params(&signed);
        let raw = URL_SAFE_NO_PAD
            .decode(p["publicKey"].as_str().unwrap())
            .unwrap();
        let key = VerifyingKey::from_bytes(&raw.try_into().unwrap()).unwrap();
        assert_eq!(p["id"], crate::model::digest::hex_sha256(key.as_bytes()));
        let sig = URL_SAFE_NO_PAD
            .decode(p["signature"].as_str().unwrap())
            .unwrap();
        let sig = Signature::from_slice(&sig).unwrap();
        let expected = format!(
            "v3|{}|cli|cli|operator|operator.admin,operator.approvals|42|t|n|linux|",
            p["id"].as_str().unwrap()
        );
        key.verify(expected.as_bytes(), &sig).unwrap();
    }
}
