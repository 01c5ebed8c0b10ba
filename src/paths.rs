//! Where agentnotify keeps its files (SPEC §1).
//!
//! `AGENTNOTIFY_HOME` puts everything in one folder (tests use it); otherwise the XDG
//! base directories are used, falling back to `$HOME/.config`, `$HOME/.local/share` and
//! `$HOME/.local/state`.

use std::path::{Path, PathBuf};

use crate::fsutil::{check_private, Private};

/// Errors finding or creating agentnotify's folders.
#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("cannot find a home folder: set HOME or AGENTNOTIFY_HOME")]
    NoHome,
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A folder or file someone else owns or may change (see [`Paths::check`]).
    #[error(transparent)]
    Unsafe(#[from] crate::fsutil::Unsafe),
}

/// Files of ours beside the folders, and how private each must be. (The relay's key files
/// are named in `src/relay/config.rs` too.)
const FILES: &[(&str, Private)] = &[
    ("token", Private::Secret),
    ("relay_secrets.json", Private::Secret),
    ("relay_installation.key", Private::Secret),
    ("config.toml", Private::File),
    ("relay_response_cursors.json", Private::File),
];
const STATE_FILES: &[(&str, Private)] = &[
    ("broker.json", Private::File),
    ("broker.lock", Private::File),
    ("spawn.lock", Private::File),
];

/// The three folders agentnotify uses; every file path is derived from them.
#[derive(Debug, Clone)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl Paths {
    /// Resolves the folders from the environment without touching the disk.
    pub fn from_env() -> Result<Paths, PathsError> {
        if let Some(home) = non_empty_env("AGENTNOTIFY_HOME") {
            return Ok(Paths::single(PathBuf::from(home)));
        }
        let home = non_empty_env("HOME").map(PathBuf::from);
        let xdg = |var: &str, fallback: &str| -> Result<PathBuf, PathsError> {
            match non_empty_env(var) {
                Some(dir) => Ok(PathBuf::from(dir).join("agentnotify")),
                None => Ok(home
                    .as_ref()
                    .ok_or(PathsError::NoHome)?
                    .join(fallback)
                    .join("agentnotify")),
            }
        };
        Ok(Paths {
            config_dir: xdg("XDG_CONFIG_HOME", ".config")?,
            data_dir: xdg("XDG_DATA_HOME", ".local/share")?,
            state_dir: xdg("XDG_STATE_HOME", ".local/state")?,
        })
    }

    /// Every file directly in one folder (the `AGENTNOTIFY_HOME` layout).
    pub fn single(root: PathBuf) -> Paths {
        Paths {
            config_dir: root.clone(),
            data_dir: root.clone(),
            state_dir: root,
        }
    }

    /// [`Paths::check`]s the folders, then creates (0700 on Unix) those that are missing:
    /// nothing is added to a folder that is refused.
    pub fn ensure_dirs(&self) -> Result<(), PathsError> {
        self.check()?;
        for dir in [
            &self.config_dir,
            &self.data_dir,
            &self.state_dir,
            &self.logs_dir(),
        ] {
            create_private_dir(dir)?;
        }
        Ok(())
    }

    /// Refuses, like ssh refuses a loose `~/.ssh`, any folder or file of ours that another
    /// user owns or may write (and any secret another may read): a planted `token` would
    /// become the bearer token, a shared folder lets anyone swap files in. Missing ones pass.
    ///
    /// Once a set of folders passed, this process does not look again (the hook's logging and
    /// its attach both ask, a millisecond apart).
    pub fn check(&self) -> Result<(), PathsError> {
        static PASSED: std::sync::Mutex<Vec<[PathBuf; 3]>> = std::sync::Mutex::new(Vec::new());
        let key = [
            self.config_dir.clone(),
            self.data_dir.clone(),
            self.state_dir.clone(),
        ];
        let mut passed = PASSED.lock().unwrap_or_else(|p| p.into_inner());
        if passed.contains(&key) {
            return Ok(());
        }
        self.check_now()?;
        passed.push(key);
        Ok(())
    }

    fn check_now(&self) -> Result<(), PathsError> {
        for dir in [
            &self.config_dir,
            &self.data_dir,
            &self.state_dir,
            &self.logs_dir(),
            &self.store_dir(),
        ] {
            check_private(dir, Private::Dir)?;
        }
        for (name, want) in FILES {
            check_private(&self.config_dir.join(name), *want)?;
        }
        for (name, want) in STATE_FILES {
            check_private(&self.state_dir.join(name), *want)?;
        }
        Ok(())
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }
    pub fn token_file(&self) -> PathBuf {
        self.config_dir.join("token")
    }
    pub fn relay_cursors_file(&self) -> PathBuf {
        self.config_dir.join("relay_response_cursors.json")
    }
    pub fn store_dir(&self) -> PathBuf {
        self.data_dir.join("broker.sled")
    }
    pub fn broker_lock(&self) -> PathBuf {
        self.state_dir.join("broker.lock")
    }
    pub fn broker_json(&self) -> PathBuf {
        self.state_dir.join("broker.json")
    }
    /// The broker's Unix socket (the hook's and the CLI's way in).
    pub fn broker_socket(&self) -> PathBuf {
        self.state_dir.join("broker.sock")
    }
    pub fn spawn_lock(&self) -> PathBuf {
        self.state_dir.join("spawn.lock")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.state_dir.join("logs")
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn create_private_dir(dir: &Path) -> Result<(), PathsError> {
    crate::fsutil::create_private_dir(dir).map_err(|source| PathsError::Create {
        path: dir.to_path_buf(),
        source,
    })
}
