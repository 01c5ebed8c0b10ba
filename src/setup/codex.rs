//! Codex specifics: the strict root of `hooks.json`, and `config.toml`, where Codex
//! records which hooks the person trusted.

use std::path::Path;

use serde_json::Value;
use toml_edit::DocumentMut;

use super::codex_trust;
use super::error::SetupError;
use super::files::{backup_path, Snapshot};
use super::plan::FileChange;

/// The only keys Codex accepts at the root of `hooks.json`; anything else makes it reject
/// the whole file.
pub const ROOT_KEYS: [&str; 2] = ["description", "hooks"];

/// Root keys Codex would reject, in document order.
pub fn extra_root_keys(root: &Value) -> Vec<String> {
    root.as_object()
        .map(|map| {
            map.keys()
                .filter(|k| !ROOT_KEYS.contains(&k.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// `--force`: drops the root keys Codex rejects (the backup keeps them).
pub fn drop_extra_root_keys(root: &mut Value) {
    if let Some(map) = root.as_object_mut() {
        map.retain(|k, _| ROOT_KEYS.contains(&k.as_str()));
    }
}

/// Codex's `config.toml`, parsed for editing (a missing file is an empty document).
#[derive(Debug, Clone)]
pub struct CodexConfig {
    pub snapshot: Snapshot,
    pub doc: DocumentMut,
}

/// `config.toml` may hold secrets (MCP server environments): a new one is private.
const CONFIG_MODE: u32 = 0o600;

impl CodexConfig {
    pub fn load(path: &Path) -> Result<CodexConfig, SetupError> {
        let snapshot = Snapshot::read(path)?;
        let doc = match snapshot.text() {
            None => DocumentMut::new(),
            Some(Err(e)) => {
                return Err(SetupError::InvalidToml {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                })
            }
            Some(Ok(text)) => {
                text.parse()
                    .map_err(|e: toml_edit::TomlError| SetupError::InvalidToml {
                        path: path.to_path_buf(),
                        message: e.message().to_string(),
                    })?
            }
        };
        Ok(CodexConfig { snapshot, doc })
    }

    /// Plans recording `hash` as trusted for `key`; `None` when already recorded.
    pub fn plan_trust(&self, key: &str, hash: &str) -> Result<Option<FileChange>, SetupError> {
        Ok(self
            .plan_trust_all(&[(key.to_string(), hash.to_string())])?
            .map(|(change, _)| change))
    }

    /// [`CodexConfig::plan_trust`] for several hooks in one change (they share the file).
    /// Also returns the keys whose entry changed.
    pub fn plan_trust_all(
        &self,
        entries: &[(String, String)],
    ) -> Result<Option<(FileChange, Vec<String>)>, SetupError> {
        let mut doc = self.doc.clone();
        let mut changed_keys = Vec::new();
        for (key, hash) in entries {
            let changed = codex_trust::set_trusted(&mut doc, key, hash).map_err(|problem| {
                SetupError::WrongShapeNoForce {
                    path: self.snapshot.path.clone(),
                    problem,
                }
            })?;
            if changed {
                changed_keys.push(key.clone());
            }
        }
        if changed_keys.is_empty() {
            return Ok(None);
        }
        let mut change = FileChange::new(
            self.snapshot.clone(),
            Some(doc.to_string().into_bytes()),
            CONFIG_MODE,
        );
        let backup = backup_path(&self.snapshot.path);
        // Back up only the file as it was before we recorded any trust for our hooks.
        let first_time = entries
            .iter()
            .all(|(key, _)| codex_trust::recorded_hash(&self.doc, key).is_none());
        if self.snapshot.bytes.is_some() && !backup.exists() && first_time {
            change.backup_to = Some(backup);
        }
        Ok(Some((change, changed_keys)))
    }

    /// Plans removing the trust entries for `keys`; `None` when none is recorded. When
    /// the result equals the pre-install backup, the backup's exact bytes come back; when
    /// install created the file and nothing else was added since, the file goes.
    /// `prune_folder`: a deleted file may take its then-empty folder with it.
    pub fn plan_untrust(&self, keys: &[String], prune_folder: bool) -> Option<FileChange> {
        let mut doc = self.doc.clone();
        let mut changed = false;
        for key in keys {
            changed |= codex_trust::remove(&mut doc, key);
        }
        if !changed {
            return None;
        }
        let text = doc.to_string();
        let backup = backup_path(&self.snapshot.path);
        let backup_bytes = std::fs::read(&backup).ok();
        let same_as_backup = backup_bytes
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| t.parse::<toml::Table>().ok())
            .zip(text.parse::<toml::Table>().ok())
            .is_some_and(|(old, new)| old == new);
        let change = if same_as_backup {
            let mut change = FileChange::new(self.snapshot.clone(), backup_bytes, CONFIG_MODE);
            change.remove_backup = Some(backup);
            change
        } else if backup_bytes.is_none() && text.trim().is_empty() {
            let mut change = FileChange::new(self.snapshot.clone(), None, CONFIG_MODE);
            change.prune_parent = prune_folder;
            change
        } else {
            FileChange::new(self.snapshot.clone(), Some(text.into_bytes()), CONFIG_MODE)
        };
        Some(change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_description_and_hooks_are_allowed_at_the_root() {
        let mut root = json!({"description": "d", "PermissionRequest": [], "hooks": {}, "x": 1});
        assert_eq!(extra_root_keys(&root), ["PermissionRequest", "x"]);
        drop_extra_root_keys(&mut root);
        assert_eq!(root, json!({"description": "d", "hooks": {}}));
    }
}
