//! Small file helpers shared by every layer: private files, atomic replacement, reading a
//! file that may be absent, finding an executable.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically: a private temp file in the same folder, fsynced,
/// then renamed over the target. Readers see the old or the new content, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let mut file = open_private(&tmp, mode)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates a new file with the given Unix mode: never an existing one (`O_EXCL`), never
/// through a symlink (`O_NOFOLLOW`), so nothing planted at `path` is written to.
pub fn open_private(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode).custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)
}

/// Opens (creating if needed, 0600, never through a symlink) a lock file of ours; the
/// content is never read. One owned by another user is refused: its owner could hold it.
pub fn open_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let file = options.open(path)?;
    check_private(path, Private::File).map_err(std::io::Error::other)?;
    Ok(file)
}

/// Opens an existing file of ours for reading, never through a symlink, after checking it
/// is ours and private enough ([`check_private`]). `None` when it does not exist.
pub fn open_checked(path: &Path, want: Private) -> std::io::Result<Option<std::fs::File>> {
    check_private(path, want).map_err(std::io::Error::other)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    match options.open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A folder or file that someone other than this user owns or may change: using it would
/// trust that someone. Said like ssh says it, with the fix.
#[derive(Debug, thiserror::Error)]
#[error("refusing to use {}: {problem}; {fix}", path.display())]
pub struct Unsafe {
    pub path: PathBuf,
    pub problem: String,
    pub fix: String,
}

/// What a checked path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Private {
    /// A folder of ours: owned by us, writable by nobody else.
    Dir,
    /// A file others must not change (`broker.json`, `config.toml`, lock files).
    File,
    /// A secret (`token`, keys): owned by us, and no access at all for anyone else.
    Secret,
}

/// Refuses `path` unless it is owned by the effective user and nobody else can write it
/// (nor, for a secret, read it). A missing path is fine: it will be created private. Dirs
/// are followed (a symlinked config folder is common); files are not (no symlinked secret).
pub fn check_private(path: &Path, want: Private) -> Result<(), Unsafe> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let meta = match want {
            Private::Dir => std::fs::metadata(path),
            Private::File | Private::Secret => std::fs::symlink_metadata(path),
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(unsafe_path(
                    path,
                    format!("it cannot be inspected ({e})"),
                    "check it",
                ))
            }
        };
        let quoted = shell_quote(path);
        let is_right_kind = match want {
            Private::Dir => meta.is_dir(),
            Private::File | Private::Secret => meta.file_type().is_file(),
        };
        if !is_right_kind {
            let what = if want == Private::Dir {
                "a folder"
            } else {
                "a regular file"
            };
            return Err(unsafe_path(
                path,
                format!("it is not {what} (a symlink or something else stands there)"),
                &format!("remove it: rm {quoted}"),
            ));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(unsafe_path(
                path,
                format!("it is owned by uid {}, not by you (uid {me})", meta.uid()),
                &format!("if it is yours, run: chown {me} {quoted}; otherwise remove it"),
            ));
        }
        let mode = meta.permissions().mode() & 0o777;
        let (loose, fix) = match want {
            Private::Dir => (mode & 0o022 != 0, format!("run: chmod 700 {quoted}")),
            Private::File => (mode & 0o022 != 0, format!("run: chmod 600 {quoted}")),
            Private::Secret => (mode & 0o077 != 0, format!("run: chmod 600 {quoted}")),
        };
        if loose {
            let who = if want == Private::Secret {
                "readable or writable by group or others"
            } else {
                "writable by group or others"
            };
            return Err(unsafe_path(
                path,
                format!("it is {who} (mode {mode:04o})"),
                &fix,
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, want);
    Ok(())
}

fn unsafe_path(path: &Path, problem: String, fix: &str) -> Unsafe {
    Unsafe {
        path: path.to_path_buf(),
        problem,
        fix: fix.to_string(),
    }
}

/// A path as a shell word, so the printed fix can be pasted.
fn shell_quote(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Makes every file and folder this process creates private (0600 / 0700), whatever opens
/// it: sled and the log writer create files with the default mode, which the umask trims.
/// Measured: with the usual umask 022 sled's files and the logs were 0644; chmod after open
/// would miss the files sled creates later (its snapshots), the umask does not.
pub fn make_new_files_private() {
    #[cfg(unix)]
    // SAFETY: umask only sets the process's file-creation mask.
    unsafe {
        libc::umask(0o077);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn loose_folders_and_files_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        chmod(root, 0o700);
        assert!(check_private(root, Private::Dir).is_ok());
        assert!(check_private(&root.join("missing"), Private::Secret).is_ok());
        chmod(root, 0o777);
        let e = check_private(root, Private::Dir).unwrap_err().to_string();
        assert!(e.contains("mode 0777") && e.contains("chmod 700"), "{e}");
        chmod(root, 0o700);

        let secret = root.join("token");
        std::fs::write(&secret, "x").unwrap();
        chmod(&secret, 0o640);
        let e = check_private(&secret, Private::Secret)
            .unwrap_err()
            .to_string();
        assert!(e.contains("readable") && e.contains("chmod 600"), "{e}");
        assert!(
            check_private(&secret, Private::File).is_ok(),
            "not writable by others"
        );
        chmod(&secret, 0o600);
        assert!(check_private(&secret, Private::Secret).is_ok());

        let link = root.join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let e = check_private(&link, Private::Secret)
            .unwrap_err()
            .to_string();
        assert!(e.contains("symlink") && e.contains("rm"), "{e}");
    }

    #[test]
    fn private_files_are_never_opened_through_a_symlink_or_over_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(open_private(&link, 0o600).is_err());
        assert!(open_private(&target, 0o600).is_err(), "O_EXCL");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(open_lock_file(&link).is_err());
    }
}

/// The file's bytes; `None` when it does not exist (any other failure is an error).
pub fn read_if_exists(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A text file's content; empty when it does not exist (a config file nobody wrote yet).
pub fn read_text_or_empty(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e),
    }
}

/// The first executable file called `name` in the folders of a `PATH`-style list.
pub fn find_executable(path_list: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path_list)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// True for a regular file (after symlinks) that someone may execute.
pub fn is_executable_file(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                meta.permissions().mode() & 0o111 != 0
            }
            #[cfg(not(unix))]
            {
                true
            }
        }
        _ => false,
    }
}

/// Creates `dir` and its missing parents 0700 (an existing folder is left as it is).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}
