//! A planned change to one file: computed in full before anything is written, so
//! `--dry-run` shows exactly what a real run would do and a refusal leaves every file as
//! it was.

use std::path::PathBuf;

use super::diff;
use super::error::SetupError;
use super::files::{self, Snapshot};

/// What happens to one file.
#[derive(Debug, Clone)]
pub struct FileChange {
    pub before: Snapshot,
    /// New content; `None` deletes the file.
    pub after: Option<Vec<u8>>,
    /// Mode for a file that does not exist yet.
    pub new_mode: u32,
    /// Copy the old content here first (the one-time `.bak`).
    pub backup_to: Option<PathBuf>,
    /// Delete this backup afterwards (its content was just restored).
    pub remove_backup: Option<PathBuf>,
    /// After deleting the file, remove its folder too if that left it empty.
    pub prune_parent: bool,
}

impl FileChange {
    /// A change writing `after` (or nothing, when equal) over `before`.
    pub fn new(before: Snapshot, after: Option<Vec<u8>>, new_mode: u32) -> FileChange {
        FileChange {
            before,
            after,
            new_mode,
            backup_to: None,
            remove_backup: None,
            prune_parent: false,
        }
    }

    /// True when applying would change no byte on disk.
    pub fn is_noop(&self) -> bool {
        self.before.bytes == self.after && self.remove_backup.is_none()
    }

    /// A unified diff of the content change, for `--dry-run`.
    pub fn diff(&self) -> String {
        let path = self.before.path.display().to_string();
        let text = |b: &Option<Vec<u8>>| {
            b.as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        let old_name = if self.before.bytes.is_some() {
            path.clone()
        } else {
            "/dev/null".to_string()
        };
        let new_name = if self.after.is_some() {
            path
        } else {
            "/dev/null".to_string()
        };
        diff::unified(
            &text(&self.before.bytes),
            &text(&self.after),
            &old_name,
            &new_name,
        )
    }

    /// Performs the change: backup, then atomic replace (or delete), then clean-up.
    pub fn apply(&self) -> Result<(), SetupError> {
        if self.is_noop() {
            return Ok(());
        }
        if let (Some(backup), Some(bytes)) = (&self.backup_to, &self.before.bytes) {
            files::write_file(backup, bytes, self.before.mode, self.new_mode)?;
        }
        match &self.after {
            Some(bytes) if Some(bytes) != self.before.bytes.as_ref() => {
                files::write_file(&self.before.target, bytes, self.before.mode, self.new_mode)?
            }
            Some(_) => {}
            None => {
                files::remove_file(&self.before.target)?;
                if self.prune_parent {
                    if let Some(parent) = self.before.path.parent() {
                        files::remove_dir_if_empty(parent);
                    }
                }
            }
        }
        if let Some(backup) = &self.remove_backup {
            files::remove_file(backup)?;
        }
        Ok(())
    }
}
