//! Pi (SPEC §10.2): `install-harness pi` copies our extension (`harness/pi/agentnotify.ts`,
//! compiled in) into Pi's extensions folder with the hook's path filled in;
//! `uninstall-harness pi` removes it; `doctor` reports it.
//!
//! Pi loads every `*.ts` in `$PI_CODING_AGENT_DIR/extensions/` (default
//! `~/.pi/agent/extensions/`) at start, without a trust step; a running Pi picks it up with
//! `/reload`. The file is wholly ours: it is replaced or removed only when it is ours, or
//! with `--force`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::doctor::{absent, Check, HostReport, Status};
use super::error::SetupError;
use super::files::{backup_path, Snapshot};
use super::host::{Env, Harness};
use super::install::Planned;
use super::plan::FileChange;

/// The extension, as shipped.
pub const EXTENSION: &str = include_str!("../../harness/pi/agentnotify.ts");
/// The extension's file name in Pi's extensions folder.
pub const FILE_NAME: &str = "agentnotify.ts";
/// Every version of our extension says so in its first lines: how a file is known as ours.
const MARK: &str = "agentnotify-hook install-harness pi";
const PLACEHOLDER: &str = "\"{{hook}}\"";

/// `install-harness pi`: writes the extension running `command_path` (default: this program).
/// `force`: replace an `agentnotify.ts` that is not ours (kept in a `.bak` file).
pub fn install(
    env: &Env,
    command_path: Option<PathBuf>,
    force: bool,
    dry_run: bool,
) -> Result<(), SetupError> {
    let path = extension_path(env)?;
    let planned = plan_install(&path, &super::cli::command_path(command_path)?, force)?;
    super::cli::finish(planned, dry_run)
}

/// `uninstall-harness pi`: removes our extension (`force`: also one that is not ours).
pub fn uninstall(env: &Env, force: bool, dry_run: bool) -> Result<(), SetupError> {
    let planned = plan_uninstall(&extension_path(env)?, force)?;
    super::cli::finish(planned, dry_run)
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

/// `doctor`'s Pi lines: the extension ours and the executable it runs. `required`: `doctor pi`
/// was asked for, so its absence is a problem.
pub fn doctor(env: &Env, required: bool) -> HostReport {
    let check = |name, status, detail: String, fix: Option<&str>| {
        let check = Check::new(Some(Harness::Pi), name, status, detail);
        match fix {
            Some(fix) => check.fix(fix),
            None => check,
        }
    };
    let path = match extension_path(env) {
        Ok(p) => p,
        Err(e) => {
            return HostReport {
                set_up: false,
                checks: vec![check(
                    "extension_installed",
                    Status::Fail,
                    e.to_string(),
                    None,
                )],
            }
        }
    };
    let install = "run: agentnotify-hook install-harness pi";
    let mut checks = Vec::new();
    let bytes = std::fs::read(&path);
    let set_up = bytes.as_deref().is_ok_and(is_ours);
    match bytes {
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
        }
        Ok(_) => checks.push(check(
            "extension_installed",
            absent(required),
            format!("{} is not agentnotify's extension", path.display()),
            Some("move that file aside, then run: agentnotify-hook install-harness pi"),
        )),
        Err(_) => checks.push(check(
            "extension_installed",
            absent(required),
            format!("not installed ({})", path.display()),
            Some(install),
        )),
    }
    HostReport { set_up, checks }
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
