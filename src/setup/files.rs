//! Reading and replacing config files without losing anything: symlinks followed (a
//! dotfiles link stays a link), permissions kept, atomic replacement, one-time backups.

use std::path::{Path, PathBuf};

use super::error::SetupError;
use crate::fsutil;

/// A config file as found before we change it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The path as the person knows it (shown in messages; backups sit beside it).
    pub path: PathBuf,
    /// Where the bytes really live: `path` with symlinks resolved.
    pub target: PathBuf,
    /// The content, `None` when the file does not exist.
    pub bytes: Option<Vec<u8>>,
    /// Unix permission bits of the existing file.
    pub mode: Option<u32>,
}

impl Snapshot {
    /// Reads `path`; a missing file is a snapshot with no bytes, not an error.
    pub fn read(path: &Path) -> Result<Snapshot, SetupError> {
        let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let bytes = fsutil::read_if_exists(&target).map_err(|e| SetupError::io("read", path, e))?;
        let mode = match bytes {
            Some(_) => Some(file_mode(&target).map_err(|e| SetupError::io("read", path, e))?),
            None => None,
        };
        Ok(Snapshot {
            path: path.to_path_buf(),
            target,
            bytes,
            mode,
        })
    }

    /// The content as text; `None` for a missing file. Non-UTF-8 content is reported
    /// through `Err` with the decoding error so callers can treat it as unparsable.
    pub fn text(&self) -> Option<Result<&str, std::str::Utf8Error>> {
        self.bytes.as_deref().map(std::str::from_utf8)
    }
}

/// `settings.json` → `settings.json.bak`, beside the path the person knows.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".bak");
    path.with_file_name(name)
}

/// The first of `<name>.bak`, `<name>.bak.1`, `<name>.bak.2`, … that does not exist; used
/// when `--force` discards content and the one-time backup already holds something else.
pub fn free_backup_path(path: &Path) -> PathBuf {
    let first = backup_path(path);
    if !first.exists() {
        return first;
    }
    (1..)
        .map(|n| {
            let mut name = first.file_name().unwrap_or_default().to_os_string();
            name.push(format!(".{n}"));
            first.with_file_name(name)
        })
        .find(|p| !p.exists())
        .expect("some numbered backup name is free")
}

/// Replaces `target` with `bytes` atomically. An existing file keeps its permissions
/// (`mode`); a new one gets `new_mode` (as narrowed by the umask). Missing parent folders
/// are created.
pub fn write_file(
    target: &Path,
    bytes: &[u8],
    mode: Option<u32>,
    new_mode: u32,
) -> Result<(), SetupError> {
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| SetupError::io("create the folder", parent, e))?;
    }
    // The temp file is created with at most `mode` (the umask only removes bits), then the
    // exact original bits are restored, so the file is never more open than before.
    fsutil::write_atomic(target, bytes, mode.unwrap_or(new_mode))
        .map_err(|e| SetupError::io("write", target, e))?;
    if let Some(mode) = mode {
        set_mode(target, mode).map_err(|e| SetupError::io("set permissions of", target, e))?;
    }
    Ok(())
}

/// Removes a file; a file that is already gone is fine.
pub fn remove_file(path: &Path) -> Result<(), SetupError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(SetupError::io("remove", path, e))
        }
        _ => Ok(()),
    }
}

/// Removes `dir` only if it is empty (a folder install created for the file).
pub fn remove_dir_if_empty(dir: &Path) {
    let empty = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
    if empty {
        let _ = std::fs::remove_dir(dir);
    }
}

#[cfg(unix)]
pub fn file_mode(path: &Path) -> std::io::Result<u32> {
    use std::os::unix::fs::PermissionsExt;
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o7777)
}

#[cfg(not(unix))]
pub fn file_mode(path: &Path) -> std::io::Result<u32> {
    std::fs::metadata(path).map(|_| 0o644)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn writes_through_symlinks_and_keeps_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::fs::write(&real, "{}").unwrap();
        set_mode(&real, 0o640).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let snap = Snapshot::read(&link).unwrap();
        assert_eq!(snap.mode, Some(0o640));
        write_file(&snap.target, b"{\"a\":1}\n", snap.mode, 0o644).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "{\"a\":1}\n");
        assert_eq!(file_mode(&real).unwrap(), 0o640);
    }

    #[test]
    fn backup_names_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        assert_eq!(free_backup_path(&file), dir.path().join("s.json.bak"));
        std::fs::write(dir.path().join("s.json.bak"), "x").unwrap();
        assert_eq!(free_backup_path(&file), dir.path().join("s.json.bak.1"));
    }
}
