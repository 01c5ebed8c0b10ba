//! Pi (SPEC §10.2): `install-harness pi` copies our extension (`harness/pi/agentnotify.ts`,
//! compiled in) into Pi's extensions folder with the hook's path filled in;
//! `uninstall-harness pi` removes it; `doctor` reports it.
//!
//! Pi loads every `*.ts` in `$PI_CODING_AGENT_DIR/extensions/` (default
//! `~/.pi/agent/extensions/`) at start, without a trust step; a running Pi picks it up with
//! `/reload`. The file is wholly ours: it is replaced or removed only when it is ours, or
//! with `--force`.

use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::Value;

use super::doctor::{Check, Report, Status};
use super::error::SetupError;
use super::files::{backup_path, Snapshot};
use super::host::Env;
use super::install::Planned;
use super::plan::FileChange;
use crate::exit::{self, Exit};

/// The extension, as shipped.
pub const EXTENSION: &str = include_str!("../../harness/pi/agentnotify.ts");
/// The extension's file name in Pi's extensions folder.
pub const FILE_NAME: &str = "agentnotify.ts";
/// Every version of our extension says so in its first lines: how a file is known as ours.
const MARK: &str = "agentnotify-hook install-harness pi";
const PLACEHOLDER: &str = "\"{{hook}}\"";

/// `install-harness pi` / `uninstall-harness pi`.
#[derive(Debug, Parser)]
#[command(name = "agentnotify-hook", bin_name = "agentnotify-hook")]
struct PiCli {
    /// install-harness or uninstall-harness
    action: String,
    /// pi
    host: String,
    /// Accepted for symmetry with the other hosts: the extension always asks
    #[arg(long)]
    ask: bool,
    /// agentnotify-hook executable the extension runs [default: this program's absolute path]
    #[arg(long, value_name = "PATH")]
    command_path: Option<PathBuf>,
    /// Replace (or remove) an agentnotify.ts that is not ours (kept in a .bak file)
    #[arg(long)]
    force: bool,
    /// Print the changes as a diff and write nothing
    #[arg(long)]
    dry_run: bool,
}

/// Runs `install-harness pi` or `uninstall-harness pi`; `None` for any other command.
pub fn main(args: &[std::ffi::OsString]) -> Option<i32> {
    let action = args.get(1)?.to_str()?;
    let install = match action {
        "install-harness" => true,
        "uninstall-harness" => false,
        _ => return None,
    };
    if args.get(2)? != "pi" {
        return None;
    }
    let cli = match PiCli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return Some(exit::clap_error(&e)),
    };
    let env = Env::from_process();
    let result = extension_path(&env).and_then(|path| {
        let planned = match install {
            true => plan_install(
                &path,
                &super::cli::command_path(cli.command_path)?,
                cli.force,
            )?,
            false => plan_uninstall(&path, cli.force)?,
        };
        super::cli::finish(planned, cli.dry_run)
    });
    Some(match result {
        Ok(()) => Exit::Ok.code(),
        Err(e) => exit::fail("agentnotify-hook", &e),
    })
}

/// `$PI_CODING_AGENT_DIR/extensions/agentnotify.ts`, else under `~/.pi/agent`.
pub fn extension_path(env: &Env) -> Result<PathBuf, SetupError> {
    let agent_dir = match std::env::var_os("PI_CODING_AGENT_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => env
            .home
            .as_deref()
            .ok_or(SetupError::NoHome)?
            .join(".pi")
            .join("agent"),
    };
    Ok(agent_dir.join("extensions").join(FILE_NAME))
}

/// The extension running `exe` (a JSON string is a JavaScript string literal).
pub fn rendered(exe: &str) -> String {
    EXTENSION.replace(PLACEHOLDER, &Value::String(exe.to_string()).to_string())
}

fn is_ours(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes).contains(MARK)
}

fn not_ours(path: &Path) -> SetupError {
    SetupError::WrongShape {
        path: path.to_path_buf(),
        problem: "this file is not agentnotify's Pi extension".into(),
    }
}

fn plan_install(path: &Path, exe: &str, force: bool) -> Result<Planned, SetupError> {
    let before = Snapshot::read(path)?;
    let content = rendered(exe);
    let mut lines = Vec::new();
    let mut change = FileChange::new(before.clone(), Some(content.clone().into_bytes()), 0o600);
    match &before.bytes {
        Some(b) if b == content.as_bytes() => {
            lines.push(format!(
                "The Pi extension is already installed in {}; nothing changed.",
                path.display()
            ));
        }
        Some(b) if !is_ours(b) && !force => return Err(not_ours(path)),
        Some(b) => {
            if !is_ours(b) {
                change.backup_to = Some(backup_path(path));
            }
            lines.push(format!("Updated the Pi extension in {}.", path.display()));
        }
        None => lines.push(format!("Installed the Pi extension in {}.", path.display())),
    }
    if !change.is_noop() {
        lines
            .push("Pi loads it when it starts; in a Pi that is running, type /reload.".to_string());
        lines.push("For Pi in RPC mode, run it as: agentnotify pi -- pi --mode rpc …".to_string());
    }
    Ok(Planned {
        changes: vec![change],
        lines,
    })
}

fn plan_uninstall(path: &Path, force: bool) -> Result<Planned, SetupError> {
    let before = Snapshot::read(path)?;
    let line = match &before.bytes {
        None => {
            return Ok(Planned {
                changes: Vec::new(),
                lines: vec![format!(
                    "The Pi extension is not installed ({}); nothing changed.",
                    path.display()
                )],
            })
        }
        Some(b) if !is_ours(b) && !force => return Err(not_ours(path)),
        Some(_) => format!("Removed the Pi extension from {}.", path.display()),
    };
    let mut change = FileChange::new(before, None, 0o600);
    change.prune_parent = true;
    Ok(Planned {
        changes: vec![change],
        lines: vec![line],
    })
}

/// Adds the Pi checks to a doctor report. `required`: `doctor pi` was asked for.
/// `others_named`: Claude or Codex was named (then they must be set up whatever Pi has).
pub fn doctor(env: &Env, report: &mut Report, required: bool, others_named: bool) {
    let check = |name, status, detail: String, fix: Option<&str>| Check {
        host: Some("pi"),
        name,
        status,
        detail,
        fix: fix.map(str::to_string),
        trust: None,
    };
    let path = match extension_path(env) {
        Ok(p) => p,
        Err(e) => {
            report.checks.push(check(
                "extension_installed",
                Status::Fail,
                e.to_string(),
                None,
            ));
            report.ok = false;
            return;
        }
    };
    let install = "run: agentnotify-hook install-harness pi";
    let mut checks = Vec::new();
    match std::fs::read(&path) {
        Ok(bytes) if is_ours(&bytes) => {
            checks.push(check(
                "extension_installed",
                Status::Ok,
                path.display().to_string(),
                None,
            ));
            let text = String::from_utf8_lossy(&bytes);
            let exe = hook_of(&text);
            let runs = exe
                .as_deref()
                .is_some_and(|e| crate::fsutil::is_executable_file(Path::new(e)));
            checks.push(match (runs, &exe) {
                (true, Some(e)) if text == rendered(e) => {
                    check("extension_command", Status::Ok, e.clone(), None)
                }
                (true, Some(e)) => check(
                    "extension_command",
                    Status::Info,
                    format!("{e} (the extension is an older version)"),
                    Some(install),
                ),
                _ => check(
                    "extension_command",
                    Status::Fail,
                    format!(
                        "{} is missing or not executable",
                        exe.as_deref().unwrap_or("the hook")
                    ),
                    Some(install),
                ),
            });
            // A Pi extension is a host set up: the others are then only worth knowing.
            if !others_named {
                for c in report
                    .checks
                    .iter_mut()
                    .filter(|c| c.name == "hook_installed")
                {
                    if c.status == Status::Fail {
                        c.status = Status::Info;
                    }
                }
            }
        }
        Ok(_) => checks.push(check(
            "extension_installed",
            if required { Status::Fail } else { Status::Info },
            format!("{} is not agentnotify's extension", path.display()),
            Some("move that file aside, then run: agentnotify-hook install-harness pi"),
        )),
        Err(_) => checks.push(check(
            "extension_installed",
            if required { Status::Fail } else { Status::Info },
            format!("not installed ({})", path.display()),
            Some(install),
        )),
    }
    report.checks.extend(checks);
    report.ok = report.checks.iter().all(|c| c.status != Status::Fail);
}

/// The executable an installed extension runs: its `const HOOK = "…";` line.
fn hook_of(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("const HOOK = "))?;
    let literal = line
        .strip_prefix("const HOOK = ")?
        .trim_end()
        .strip_suffix(';')?;
    serde_json::from_str(literal).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_extension_has_one_placeholder_and_the_mark() {
        assert_eq!(EXTENSION.matches(PLACEHOLDER).count(), 1);
        assert!(is_ours(EXTENSION.as_bytes()));
        let text = rendered("/opt/a \"b\"/agentnotify-hook");
        assert_eq!(
            hook_of(&text).as_deref(),
            Some("/opt/a \"b\"/agentnotify-hook")
        );
    }
}
