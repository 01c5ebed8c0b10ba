//! Where agentnotify keeps its files (SPEC §1).
//!
//! `AGENTNOTIFY_HOME` puts everything in one folder (tests use it); otherwise the XDG
//! base directories are used, falling back to `$HOME/.config`, `$HOME/.local/share` and
//! `$HOME/.local/state`.

use std::path::{Path, PathBuf};

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
}

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

    /// Creates the folders (0700 on Unix) if they are missing.
    pub fn ensure_dirs(&self) -> Result<(), PathsError> {
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
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(|source| PathsError::Create {
        path: dir.to_path_buf(),
        source,
    })
}
