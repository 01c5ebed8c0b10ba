//! The bearer token file: created once (0600, 32 random bytes), read by every client.
//! The `Secret` type itself lives in the model crate, which does no I/O.

use std::path::Path;

pub use agentnotify_model::secret::{constant_time_eq, random_b64url, Secret};

/// The broker's proof that it holds `token` (SPEC §3.5): lowercase hex
/// HMAC-SHA256(token, "agentnotify.broker-proof.v1:" port ":" nonce).
pub fn broker_proof(token: &Secret, port: u16, nonce: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(token.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(format!("agentnotify.broker-proof.v1:{port}:{nonce}").as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
