//! OpenClaw's setup: a systemd user unit running `agentnotify openclaw watch` (the
//! snippet is `harness/openclaw/agentnotify-openclaw.service`), installed and removed by
//! `install-harness openclaw` / `uninstall-harness openclaw`, and `doctor`'s checks.
//! Nothing is started: install prints the `systemctl --user` step instead.
//!
//! OpenClaw is not a hook host: the command line parses its options (`--url`,
//! `--agentnotify`) with the others' and calls [`install`], [`uninstall`] and [`doctor`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::doctor::{absent, Check, HostReport, Status};
use super::error::SetupError;
use super::files::Snapshot;
use super::host::{Env, Harness};
use super::plan::FileChange;
use crate::paths::Paths;

const UNIT: &str = include_str!("../../harness/openclaw/agentnotify-openclaw.service");
pub const UNIT_NAME: &str = "agentnotify-openclaw.service";
/// The file holding the Gateway token, in agentnotify's config folder.
pub const TOKEN_FILE: &str = "openclaw_gateway_token";
/// What marks a unit file as ours (install replaces it, uninstall removes it).
const OURS: &str = "openclaw watch";

/// What `install-harness openclaw` was asked to write.
#[derive(Debug)]
pub struct InstallOptions {
    /// The Gateway's WebSocket URL.
    pub url: String,
    /// The `agentnotify` the unit runs; `None`: the one beside this program.
    pub agentnotify: Option<PathBuf>,
    /// Replace a unit file that is not ours.
    pub force: bool,
    pub dry_run: bool,
}

/// `$XDG_CONFIG_HOME/systemd/user/agentnotify-openclaw.service`, else under `~/.config`.
pub fn unit_path(env: &Env) -> Result<PathBuf, SetupError> {
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => env.home.clone().ok_or(SetupError::NoHome)?.join(".config"),
    };
    Ok(config.join("systemd/user").join(UNIT_NAME))
}

fn token_path() -> Result<PathBuf, SetupError> {
    let paths = Paths::from_env().map_err(|_| SetupError::NoHome)?;
    Ok(paths.config_dir.join(TOKEN_FILE))
}

/// The unit with its placeholders filled. `home`: the `AGENTNOTIFY_HOME` install ran with,
/// kept for the service (systemd starts it with none of the installer's environment, so it
/// would otherwise use the default folder and another broker).
pub fn unit_text(agentnotify: &Path, url: &str, token_file: &Path, home: Option<&Path>) -> String {
    let text = UNIT
        .replace("{{agentnotify}}", &agentnotify.display().to_string())
        .replace("{{url}}", url)
        .replace("{{token_file}}", &token_file.display().to_string());
    match home {
        Some(home) => text.replacen(
            "Type=simple\n",
            &format!(
                "Type=simple\nEnvironment=\"AGENTNOTIFY_HOME={}\"\n",
                home.display()
            ),
            1,
        ),
        None => text,
    }
}

/// `install-harness openclaw`: writes the unit (replacing only ours, unless `force`) and
/// prints the steps it leaves to the person.
pub fn install(env: &Env, a: InstallOptions) -> Result<(), SetupError> {
    let agentnotify = match a.agentnotify {
        Some(p) => p,
        None => std::env::current_exe()
            .map_err(|e| SetupError::io("find", Path::new("the running program"), e))?
            .with_file_name("agentnotify"),
    };
    let bad = |reason: &str| SetupError::BadCommandPath {
        path: agentnotify.clone(),
        reason: reason.into(),
    };
    if !agentnotify.is_absolute() {
        return Err(bad(
            "must be an absolute path (systemd runs it without your PATH)",
        ));
    }
    if agentnotify
        .to_str()
        .is_none_or(|s| s.contains(['"', '\n', '%']))
    {
        return Err(bad("must be UTF-8 without quotes, newlines or %"));
    }
    if !a.url.starts_with("ws://") || a.url.contains(char::is_whitespace) {
        return Err(SetupError::BadCommandPath {
            path: PathBuf::from(&a.url),
            reason: "--url must be the Gateway's ws:// URL on this machine".into(),
        });
    }
    let token_file = token_path()?;
    let path = unit_path(env)?;
    let before = Snapshot::read(&path)?;
    if let Some(bytes) = &before.bytes {
        if !String::from_utf8_lossy(bytes).contains(OURS) && !a.force {
            return Err(SetupError::WrongShape {
                path,
                problem: "this unit file was not written by agentnotify".into(),
            });
        }
    }
    let home = std::env::var_os("AGENTNOTIFY_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let text = unit_text(&agentnotify, &a.url, &token_file, home.as_deref());
    let change = FileChange::new(before, Some(text.into_bytes()), 0o600);
    if a.dry_run {
        print!("{}", change.diff());
        println!("Dry run: nothing was written.");
        return Ok(());
    }
    let changed = !change.is_noop();
    change.apply()?;
    let verb = if changed { "Wrote" } else { "Unchanged:" };
    println!("{verb} {}", path.display());
    if !token_file.exists() {
        println!(
            "Put the Gateway token (gateway.auth.token of OpenClaw's config) into {} (mode 0600).",
            token_file.display()
        );
    }
    println!("Then start it: systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}");
    println!("Check the whole setup with: agentnotify-hook doctor");
    Ok(())
}

/// `uninstall-harness openclaw`: removes the unit, only if it is ours.
pub fn uninstall(env: &Env, dry_run: bool) -> Result<(), SetupError> {
    let path = unit_path(env)?;
    let before = Snapshot::read(&path)?;
    match &before.bytes {
        None => {
            println!("Nothing to remove: {} does not exist.", path.display());
            return Ok(());
        }
        Some(bytes) if !String::from_utf8_lossy(bytes).contains(OURS) => {
            return Err(SetupError::WrongShapeNoForce {
                path,
                problem: "this unit file was not written by agentnotify".into(),
            });
        }
        Some(_) => {}
    }
    let change = FileChange::new(before, None, 0o644);
    if dry_run {
        print!("{}", change.diff());
        println!("Dry run: nothing was written.");
        return Ok(());
    }
    println!("Stop it first if it runs: systemctl --user disable --now {UNIT_NAME}");
    change.apply()?;
    println!("Removed {}", path.display());
    Ok(())
}

/// `doctor`'s OpenClaw lines: the unit, the token file, and whether the Gateway it names
/// accepts a connection now. `required`: `doctor openclaw` was asked for; otherwise a unit
/// not installed is worth a line only where OpenClaw is used (on PATH).
pub fn doctor(env: &Env, required: bool) -> HostReport {
    let absent_report = |line: Check| HostReport {
        set_up: false,
        checks: vec![line],
    };
    let install = "agentnotify-hook install-harness openclaw";
    let path = match unit_path(env) {
        Ok(p) => p,
        Err(e) if required => {
            return absent_report(check("openclaw_unit", Status::Fail, e.to_string()))
        }
        Err(_) => {
            return HostReport {
                set_up: false,
                checks: Vec::new(),
            }
        }
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) if t.contains(OURS) => t,
        _ if !required && env.which("openclaw").is_none() => {
            return HostReport {
                set_up: false,
                checks: Vec::new(),
            }
        }
        _ => {
            return absent_report(
                check(
                    "openclaw_unit",
                    absent(required),
                    format!("not installed ({})", path.display()),
                )
                .fix(install),
            )
        }
    };
    let mut checks = vec![check(
        "openclaw_unit",
        Status::Ok,
        path.display().to_string(),
    )];
    let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart="));
    let words: Vec<String> = exec
        .map(|l| l.split('"').map(str::to_string).collect())
        .unwrap_or_default();
    // ExecStart="<agentnotify>" openclaw watch --url <url> --token-file "<file>"
    let exe = words.get(1).map(PathBuf::from);
    let url = words
        .get(2)
        .and_then(|w| w.split_whitespace().skip_while(|w| *w != "--url").nth(1))
        .map(str::to_string);
    let token = words.get(3).map(PathBuf::from);
    checks.push(match exe {
        Some(p) if crate::fsutil::is_executable_file(&p) => {
            check("openclaw_command", Status::Ok, p.display().to_string())
        }
        other => check(
            "openclaw_command",
            Status::Fail,
            format!("the unit runs {other:?}, which is not an executable"),
        )
        .fix("agentnotify-hook install-harness openclaw"),
    });
    checks.push(match &token {
        Some(p) if std::fs::read_to_string(p).is_ok_and(|t| !t.trim().is_empty()) => {
            match crate::fsutil::check_private(p, crate::fsutil::Private::Secret) {
                Ok(()) => check("openclaw_token", Status::Ok, p.display().to_string()),
                Err(e) => check("openclaw_token", Status::Fail, e.to_string())
                    .fix(format!("chmod 600 {}", p.display())),
            }
        }
        _ => check(
            "openclaw_token",
            Status::Fail,
            "the Gateway token file is missing or empty",
        )
        .fix(format!(
            "put gateway.auth.token of OpenClaw's config into {} (mode 0600)",
            token.as_deref().unwrap_or(Path::new(TOKEN_FILE)).display()
        )),
    });
    if let Some(url) = url {
        checks.push(gateway_reachable(&url));
    }
    HostReport {
        set_up: true,
        checks,
    }
}

/// One `doctor` line about OpenClaw.
fn check(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
    Check::new(Some(Harness::Openclaw), name, status, detail)
}

/// A TCP connect to the Gateway's port: cheap, and enough to tell "not running".
fn gateway_reachable(url: &str) -> Check {
    let addr = url
        .trim_start_matches("ws://")
        .split('/')
        .next()
        .unwrap_or_default();
    let reachable = std::net::ToSocketAddrs::to_socket_addrs(addr)
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| {
            std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok()
        });
    if reachable {
        check(
            "openclaw_gateway",
            Status::Ok,
            format!("{url} accepts connections"),
        )
    } else {
        check(
            "openclaw_gateway",
            Status::Info,
            format!("nothing listens at {url} now; the watcher connects once the Gateway runs"),
        )
        .fix("openclaw gateway run")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_fills_every_placeholder() {
        let text = unit_text(
            Path::new("/opt/an/agentnotify"),
            "ws://127.0.0.1:18789",
            Path::new("/home/me/.config/agentnotify/openclaw_gateway_token"),
            None,
        );
        assert!(!text.contains("{{"), "{text}");
        assert!(!text.contains("Environment="), "{text}");
        let kept = unit_text(
            Path::new("/opt/an/agentnotify"),
            "ws://127.0.0.1:18789",
            Path::new("/srv/an/openclaw_gateway_token"),
            Some(Path::new("/srv/an")),
        );
        assert!(
            kept.contains("Type=simple\nEnvironment=\"AGENTNOTIFY_HOME=/srv/an\"\n"),
            "{kept}"
        );
        assert!(text.contains(
            "ExecStart=\"/opt/an/agentnotify\" openclaw watch --url ws://127.0.0.1:18789 --token-file \"/home/me/.config/agentnotify/openclaw_gateway_token\""
        ));
    }
}
