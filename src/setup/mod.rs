//! Setup of host configuration files: `install-harness`, `uninstall-harness`, `doctor`
//! (SPEC §7).
//!
//! Invariants:
//! - A person's own configuration is never lost: unrelated keys, other tools' hooks and
//!   their order are kept; anything we cannot merge into is refused unless `--force`;
//!   every write is atomic, keeps permissions, and the first one saves a `.bak`.
//! - Our handler is recognised by meaning (it runs `agentnotify-hook … ask-permission`),
//!   so it is replaced in place and never duplicated, whatever path it was installed from.
//! - Every change is planned in full before anything is written (`--dry-run` shows the
//!   plan as a diff).
//!
//! Modules, one job each: [`cli`] (arguments, output), [`install`] / [`uninstall`]
//! (planning), [`json_config`] (pure JSON edits), [`codex`] and [`codex_trust`] (Codex's
//! root rule and trust entries), [`doctor`] (with [`health`], the broker probe through the loopback client, and
//! [`links`], the channels and Relay links), [`command`] (the hook command line),
//! [`host`] (where files live, and [`host::Harness`], every host the commands take),
//! [`snippets`] (what we write, from the top-level `harness/`), [`files`] / [`plan`] (safe
//! file replacement), [`diff`]; the hosts that are not hook hosts (SPEC §10.2), each with
//! its install, uninstall and doctor: [`pi`] (Pi's extension), [`hermes`] (Hermes' plugin),
//! [`openclaw`] (OpenClaw's user unit).

pub mod cli;
pub mod codex;
pub mod codex_trust;
pub mod command;
pub mod diff;
pub mod doctor;
pub mod error;
pub mod files;
pub mod health;
pub mod hermes;
pub mod host;
pub mod install;
pub mod json_config;
pub mod links;
pub mod notify_hooks;
pub mod openclaw;
pub mod pi;
pub mod plan;
pub mod snippets;
pub mod uninstall;

use std::ffi::OsString;

pub use error::SetupError;

/// Runs a setup command (`args[1]` is the subcommand) and returns the process exit code.
pub fn main(args: &[OsString]) -> i32 {
    cli::main(args)
}
