//! Secrets (the bearer token, nonces) in a type that never prints its value.

use std::path::Path;

use base64::Engine;

/// A secret string: `Debug` and `Display` print `***`, so it cannot leak into logs.
#[derive(Clone, PartialEq, Eq)]
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

/// Reads the token file, creating it (0600, 32 random bytes) on first use.
///
/// Creation is race-free: the token is written to a private temp file and hard-linked
/// into place, which fails if another process won the race; then the winner's file is read.
pub fn load_or_create_token(path: &Path) -> std::io::Result<Secret> {
    if let Some(token) = read_token(path)? {
        return Ok(token);
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    crate::fsutil::write_atomic(&tmp, random_b64url(32).as_bytes(), 0o600)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    read_token(path)?.ok_or_else(|| std::io::Error::other("token file is empty"))
}

/// Reads an existing token; `None` when the file does not exist. A token another user
/// owns, or may read or change, is refused: it could be planted or already known.
pub fn read_token(path: &Path) -> std::io::Result<Option<Secret>> {
    use std::io::Read;
    let Some(mut file) = crate::fsutil::open_checked(path, crate::fsutil::Private::Secret)? else {
        return Ok(None);
    };
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok((!text.trim().is_empty()).then(|| Secret::new(text.trim())))
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

    #[test]
    fn token_is_created_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let a = load_or_create_token(&path).unwrap();
        let b = load_or_create_token(&path).unwrap();
        assert_eq!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), 43);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
