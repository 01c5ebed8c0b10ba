//! The hosts `setup` knows: one row each. A new host is one more row (plus its support in
//! `crate::setup`, which does the actual install).

use std::path::PathBuf;

use crate::setup::error::SetupError;
use crate::setup::host::{Env, Harness, Host};

/// How `setup` finds and names one host.
pub struct HostRow {
    pub host: Host,
    /// The name people know it by.
    pub name: &'static str,
    /// Its executable, looked up on PATH.
    pub program: &'static str,
    /// Its config folder; existing means it was used here.
    pub config_dir: fn(&Env) -> Result<PathBuf, SetupError>,
    /// Whether it runs a new hook only once trusted (Codex).
    pub needs_trust: bool,
}

pub const HOSTS: &[HostRow] = &[
    HostRow {
        host: Host::Claude,
        name: "Claude Code",
        program: "claude",
        config_dir: Env::claude_dir,
        needs_trust: false,
    },
    HostRow {
        host: Host::Codex,
        name: "Codex",
        program: "codex",
        config_dir: Env::codex_home,
        needs_trust: true,
    },
];

impl HostRow {
    /// Why we think this host is used here (its program on PATH, or its config folder),
    /// or `None`.
    pub fn detect(&self, env: &Env) -> Option<String> {
        if let Some(path) = env.which(self.program) {
            return Some(format!("{} found", path.display()));
        }
        let dir = (self.config_dir)(env).ok()?;
        dir.is_dir().then(|| format!("{} exists", dir.display()))
    }

    pub fn of(host: Host) -> &'static HostRow {
        HOSTS
            .iter()
            .find(|r| r.host == host)
            .expect("every host has a row")
    }
}

/// A host with an integration of its own (SPEC §10.2) rather than ask and notify hooks:
/// `setup` offers it when its program is on PATH and runs its `install-harness`, which says
/// what it writes and the steps it leaves to the person.
pub struct OtherHost {
    pub name: &'static str,
    pub program: &'static str,
    /// The `agentnotify-hook install-harness` argument.
    pub harness: Harness,
    /// What the integration is, in a few words.
    pub what: &'static str,
}

pub const OTHER_HOSTS: &[OtherHost] = &[
    OtherHost {
        name: "Pi",
        program: "pi",
        harness: Harness::Pi,
        what: "an extension that asks before bash, edit and write run",
    },
    OtherHost {
        name: "Hermes Agent",
        program: "hermes",
        harness: Harness::Hermes,
        what: "an approval transport plugin (you enable it in Hermes' config.yaml)",
    },
    OtherHost {
        name: "OpenClaw",
        program: "openclaw",
        harness: Harness::Openclaw,
        what: "a user service that answers the Gateway's exec approvals",
    },
];
