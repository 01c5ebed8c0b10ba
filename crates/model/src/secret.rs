//! Secrets (the bearer token, nonces) in a type that never prints its value.

use base64::Engine;

/// A secret string: `Debug` and `Display` print `***`, so it cannot leak into logs. It
/// serialises as its value, for the private files that store it.
#[derive(Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The real value, for the few places that must send or compare it.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// Constant-time comparison with a presented value.
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), presented.as_bytes())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// `n` bytes from the OS CSPRNG, base64url without padding.
pub fn random_b64url(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::fill(&mut bytes[..]);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "*** ***");
        assert!(s.matches("hunter2"));
        assert!(!s.matches("hunter3"));
        assert!(!s.matches("hunter"));
    }
}
