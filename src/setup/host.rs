//! Which host, which scope, and where that host keeps the hook file.
//!
//! Everything is resolved from an [`Env`] snapshot so tests can point every lookup at
//! temporary folders and the real home is never touched.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::SetupError;

/// A host agent whose `PermissionRequest` hook we manage: the bridge's own.
pub use crate::hook::Host;

/// Every host the setup commands know: the value of `install-harness`, `uninstall-harness`
/// and `doctor`'s host argument. Claude Code and Codex take our hook into JSON config files
/// (their [`Host`], shared with the bridge); the others take an integration of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Harness {
    /// Claude Code: the hooks in its settings.json
    Claude,
    /// Codex: the hooks in its hooks.json, trusted in config.toml
    Codex,
    /// Pi: an extension in its extensions folder that asks before bash, edit and write run
    Pi,
    /// Hermes Agent: an approval transport plugin (you enable it in its config.yaml)
    Hermes,
    /// OpenClaw: a systemd user service answering its Gateway's exec approvals
    Openclaw,
}

impl Harness {
    /// In the order `doctor` reports them.
    pub const ALL: [Harness; 5] = [
        Harness::Claude,
        Harness::Codex,
        Harness::Pi,
        Harness::Hermes,
        Harness::Openclaw,
    ];

    /// The name on the command line and in `doctor`'s report.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
            Harness::Pi => "pi",
            Harness::Hermes => "hermes",
            Harness::Openclaw => "openclaw",
        }
    }
}

impl From<Host> for Harness {
    fn from(host: Host) -> Harness {
        match host {
            Host::Claude => Harness::Claude,
            Host::Codex => Harness::Codex,
        }
    }
}

/// Which of a host's config files to edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// Your own settings, for every project
    User,
    /// The current repository's settings (shared with everyone who uses the repository)
    Project,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// The parts of the process environment setup looks at.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub claude_config_dir: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub path: Option<OsString>,
}

impl Env {
    /// Reads the real environment (empty variables count as unset).
    pub fn from_process() -> Env {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Env {
            home: var("HOME"),
            codex_home: var("CODEX_HOME"),
            claude_config_dir: var("CLAUDE_CONFIG_DIR"),
            cwd: std::env::current_dir().ok(),
            path: std::env::var_os("PATH"),
        }
    }

    fn home(&self) -> Result<&Path, SetupError> {
        self.home.as_deref().ok_or(SetupError::NoHome)
    }

    fn cwd(&self) -> Result<&Path, SetupError> {
        self.cwd.as_deref().ok_or(SetupError::NoCwd)
    }

    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    pub fn claude_dir(&self) -> Result<PathBuf, SetupError> {
        match &self.claude_config_dir {
            Some(dir) => Ok(self.absolute(dir)?),
            None => Ok(self.home()?.join(".claude")),
        }
    }

    /// `$CODEX_HOME` (canonicalised, as Codex does, so trust keys match), else `~/.codex`.
    pub fn codex_home(&self) -> Result<PathBuf, SetupError> {
        match &self.codex_home {
            Some(dir) => {
                let dir = self.absolute(dir)?;
                std::fs::canonicalize(&dir)
                    .map_err(|source| SetupError::CodexHome { path: dir, source })
            }
            None => Ok(self.home()?.join(".codex")),
        }
    }

    /// The root of the git repository holding the current folder, else the folder itself.
    pub fn project_root(&self) -> Result<PathBuf, SetupError> {
        let cwd = self.cwd()?;
        Ok(cwd
            .ancestors()
            .find(|dir| dir.join(".git").exists())
            .unwrap_or(cwd)
            .to_path_buf())
    }

    /// The host's hook file for a scope.
    pub fn hook_file(&self, host: Host, scope: Scope) -> Result<PathBuf, SetupError> {
        Ok(match (host, scope) {
            (Host::Claude, Scope::User) => self.claude_dir()?.join("settings.json"),
            (Host::Claude, Scope::Project) => {
                self.project_root()?.join(".claude").join("settings.json")
            }
            (Host::Codex, Scope::User) => self.codex_home()?.join("hooks.json"),
            (Host::Codex, Scope::Project) => self.project_root()?.join(".codex").join("hooks.json"),
        })
    }

    /// Whether uninstall may remove the folder holding `host`'s file for `scope` once it
    /// is empty: only the conventional `.claude` / `.codex` folders, never a folder named
    /// by `CLAUDE_CONFIG_DIR` or `CODEX_HOME` (Codex refuses to start without the latter).
    pub fn may_prune_folder(&self, host: Host, scope: Scope) -> bool {
        match (host, scope) {
            (_, Scope::Project) => true,
            (Host::Claude, Scope::User) => self.claude_config_dir.is_none(),
            (Host::Codex, Scope::User) => self.codex_home.is_none(),
        }
    }

    /// Codex's user `config.toml`, where hook trust lives for every scope.
    pub fn codex_config(&self) -> Result<PathBuf, SetupError> {
        Ok(self.codex_home()?.join("config.toml"))
    }

    fn absolute(&self, path: &Path) -> Result<PathBuf, SetupError> {
        if path.is_absolute() {
            Ok(path.to_path_buf())
        } else {
            Ok(self.cwd()?.join(path))
        }
    }

    /// Finds `name` in `$PATH` as an executable file.
    pub fn which(&self, name: &str) -> Option<PathBuf> {
        crate::fsutil::find_executable(self.path.as_ref()?, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_root_is_the_nearest_git_folder() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let sub = repo.join("a").join("b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir(repo.join(".git")).unwrap();
        let env = Env {
            cwd: Some(sub.clone()),
            ..Env::default()
        };
        assert_eq!(env.project_root().unwrap(), repo);
        assert_eq!(
            env.hook_file(Host::Codex, Scope::Project).unwrap(),
            repo.join(".codex/hooks.json")
        );
        let env = Env {
            cwd: Some(dir.path().to_path_buf()),
            ..Env::default()
        };
        assert_eq!(env.project_root().unwrap(), dir.path());
    }

    #[test]
    fn every_harness_is_named_as_clap_parses_it() {
        use clap::ValueEnum;
        for h in Harness::ALL {
            assert_eq!(Harness::from_str(h.as_str(), false), Ok(h));
        }
        assert_eq!(Harness::value_variants(), Harness::ALL);
        for host in Host::ALL {
            assert_eq!(Harness::from(host).as_str(), host.as_str());
        }
    }

    #[test]
    fn user_files_follow_home_and_overrides() {
        let env = Env {
            home: Some("/h".into()),
            ..Env::default()
        };
        assert_eq!(
            env.hook_file(Host::Claude, Scope::User).unwrap(),
            PathBuf::from("/h/.claude/settings.json")
        );
        assert_eq!(
            env.hook_file(Host::Codex, Scope::User).unwrap(),
            PathBuf::from("/h/.codex/hooks.json")
        );
        let env = Env {
            home: Some("/h".into()),
            claude_config_dir: Some("/c".into()),
            ..Env::default()
        };
        assert_eq!(env.claude_dir().unwrap(), PathBuf::from("/c"));
        assert!(matches!(
            Env::default().hook_file(Host::Claude, Scope::User),
            Err(SetupError::NoHome)
        ));
    }
}
