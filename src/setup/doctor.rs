//! `doctor`: checks that a permission request can actually reach the person, and says how
//! to fix each thing that is off.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::codex::CodexConfig;
use super::codex_trust::{self, TrustState};
use super::command::{
    parse_hook_command, DEFAULT_BUDGET_SECS, HOOK_EXE_NAME, HOST_DEFAULT_TIMEOUT_SECS,
};
use super::files::{file_mode, Snapshot};
use super::health::{health, Health};
use super::host::{Env, Harness, Host, Scope};
use super::install::load_json;
use super::json_config;
use crate::client::{self, Client};
use crate::fsutil::is_executable_file;
use crate::paths::Paths;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Worth knowing, not a problem.
    Info,
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub host: Option<&'static str>,
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    pub fix: Option<String>,
    /// Codex trust state (`trusted` / `untrusted` / `modified`) for trust checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<&'static str>,
}

impl Check {
    /// A line about `host` (`None`: about agentnotify itself).
    pub(super) fn new(
        host: Option<Harness>,
        name: &'static str,
        status: Status,
        detail: impl Into<String>,
    ) -> Check {
        Check {
            host: host.map(Harness::as_str),
            name,
            status,
            detail: detail.into(),
            fix: None,
            trust: None,
        }
    }

    pub(super) fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
}

/// What `doctor` found for one host.
pub struct HostReport {
    /// Our integration is in place (faults in it are among `checks`).
    pub set_up: bool,
    pub checks: Vec<Check>,
}

/// The status of the line saying a host is not set up: a problem when it was named.
pub(super) fn absent(required: bool) -> Status {
    if required {
        Status::Fail
    } else {
        Status::Info
    }
}

/// Everything `doctor` found.
#[derive(Debug, Serialize)]
pub struct Report {
    pub ok: bool,
    pub checks: Vec<Check>,
}

impl Report {
    /// The human form: one line per check, fixes indented below failures.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for check in &self.checks {
            let tag = match check.status {
                Status::Ok => "ok  ",
                Status::Info => "info",
                Status::Fail => "FAIL",
            };
            let scope = check.host.map(|h| format!("{h}: ")).unwrap_or_default();
            out.push_str(&format!(
                "{tag}  {scope}{}: {}\n",
                check.name.replace('_', " "),
                check.detail
            ));
            if let Some(fix) = &check.fix {
                out.push_str(&format!("      fix: {fix}\n"));
            }
        }
        let failures = self
            .checks
            .iter()
            .filter(|c| c.status == Status::Fail)
            .count();
        if failures == 0 {
            out.push_str("All good.\n");
        } else {
            out.push_str(&format!("{failures} problem(s) found.\n"));
        }
        out
    }
}

/// Runs every check. `hosts` empty means every host, and a problem only if none is set up
/// (no request could reach you); a named host must be set up, and only named ones are checked.
pub fn run(env: &Env, hosts: &[Harness]) -> Report {
    let mut checks = vec![binary_on_path(env)];
    match Paths::from_env() {
        Ok(paths) => {
            checks.push(broker(&paths));
            // Asked of a running broker once, for every check that needs it.
            let client =
                Client::from_env_override().or_else(|| client::from_files(&paths).map(|(c, _)| c));
            let status = client.as_ref().and_then(super::health::channels_status);
            checks.extend(channels(status.as_ref()));
            checks.extend(super::links::checks(
                &paths,
                client.as_ref(),
                status.as_ref(),
            ));
            checks.push(token_file(&paths.token_file()));
        }
        Err(e) => checks.push(
            Check::new(None, "agentnotify_files", Status::Fail, e.to_string())
                .fix("set HOME, or AGENTNOTIFY_HOME to the folder agentnotify should use"),
        ),
    }
    let explicit = !hosts.is_empty();
    let mut any_set_up = false;
    for host in Harness::ALL {
        if explicit && !hosts.contains(&host) {
            continue;
        }
        let found = host_report(env, host, explicit);
        any_set_up |= found.set_up;
        checks.extend(found.checks);
    }
    if !explicit && !any_set_up {
        checks.push(
            Check::new(
                None,
                "hosts",
                Status::Fail,
                "none is set up, so no permission request can reach you",
            )
            .fix("set up one of the hosts above (`agentnotify setup` offers those it finds here)"),
        );
    }
    let ok = checks.iter().all(|c| c.status != Status::Fail);
    Report { ok, checks }
}

/// One host's checks. `required`: it was named, so not being set up is a problem.
fn host_report(env: &Env, host: Harness, required: bool) -> HostReport {
    match host {
        Harness::Claude => host_checks(env, Host::Claude, required),
        Harness::Codex => host_checks(env, Host::Codex, required),
        Harness::Pi => super::pi::doctor(env, required),
        Harness::Hermes => super::hermes::doctor(required),
        Harness::Openclaw => super::openclaw::doctor(env, required),
    }
}

fn binary_on_path(env: &Env) -> Check {
    match env.which(HOOK_EXE_NAME) {
        Some(path) => Check::new(None, "binary_on_path", Status::Ok, path.display().to_string()),
        None => Check::new(None, "binary_on_path", Status::Fail, format!("{HOOK_EXE_NAME} is not on PATH"))
            .fix("add the folder holding agentnotify-hook to PATH (`cargo install` puts it in ~/.cargo/bin)"),
    }
}

fn broker(paths: &Paths) -> Check {
    let name = "broker";
    // The broker every client would use: the env override, else the one `broker.json` names.
    let (client, explicit) = match Client::from_env_override() {
        Some(client) => (client, true),
        None => match client::from_files(paths) {
            Some((client, _)) => (client, false),
            None if paths.broker_json().exists() => {
                return Check::new(
                    None,
                    name,
                    Status::Ok,
                    format!(
                        "not running ({} is unreadable and will be replaced; starts on demand)",
                        paths.broker_json().display()
                    ),
                )
            }
            None => return Check::new(None, name, Status::Ok, "not running (starts on demand)"),
        },
    };
    let url = client.address();
    match health(&client) {
        Health::Down if explicit => Check::new(None, name, Status::Fail, format!("nothing answers at {url} (AGENTNOTIFY_URL)"))
            .fix("start the broker there (`agentnotify daemon`) or unset AGENTNOTIFY_URL"),
        Health::Down => Check::new(None, name, Status::Ok, "not running (starts on demand)"),
        Health::Ok { version, api } if api == crate::API_VERSION => {
            Check::new(None, name, Status::Ok, format!("reachable at {url} (version {version})"))
        }
        Health::Ok { version, api } => Check::new(
            None,
            name,
            Status::Info,
            format!("a broker speaking api {api} (version {version}) runs at {url}; it is replaced once idle"),
        ),
        Health::Foreign(what) => Check::new(None, name, Status::Fail, format!("{url} answers, but not as the agentnotify broker ({what})"))
            .fix(if explicit {
                "point AGENTNOTIFY_URL at the broker, or unset it".to_string()
            } else {
                format!("stop the program listening there, or delete {}", paths.broker_json().display())
            }),
    }
}

/// Delivery channels (SPEC §11): dead letters and unavailable channels are problems. Asked
/// of a running broker only (doctor never starts one).
fn channels(status: Option<&serde_json::Value>) -> Option<Check> {
    let status = status?;
    let list = status["channels"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return None;
    }
    let dead = status["dead_letters"].as_u64().unwrap_or(0);
    let unavailable: Vec<String> = list
        .iter()
        .filter(|c| c["available"] != true)
        .map(|c| {
            format!(
                "{} ({})",
                c["id"].as_str().unwrap_or("?"),
                c["unavailable_reason"].as_str().unwrap_or("unavailable")
            )
        })
        .collect();
    let name = "channels";
    if dead > 0 {
        return Some(
            Check::new(
                None,
                name,
                Status::Fail,
                format!("{dead} delivery(ies) failed for 24 h and were dead-lettered"),
            )
            .fix("see `agentnotify channels status` for which channel and why"),
        );
    }
    if !unavailable.is_empty() {
        return Some(
            Check::new(
                None,
                name,
                Status::Fail,
                format!("unavailable: {}", unavailable.join(", ")),
            )
            .fix("see docs/DELIVERY.md; `agentnotify channels disable ID` silences a channel"),
        );
    }
    Some(Check::new(
        None,
        name,
        Status::Ok,
        format!("{} channel(s), nothing dead-lettered", list.len()),
    ))
}

fn token_file(path: &Path) -> Check {
    let name = "token_file";
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(_) => {
            return Check::new(
                None,
                name,
                Status::Ok,
                format!("{} not created yet (made on first use)", path.display()),
            )
        }
    };
    let mode = file_mode(path).unwrap_or(0);
    let mut problems = Vec::new();
    if !meta.is_file() {
        problems.push("is not a regular file".to_string());
    }
    #[cfg(unix)]
    if mode & 0o777 != 0o600 {
        problems.push(format!(
            "has permissions {:04o}, must be 0600",
            mode & 0o777
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            problems.push("belongs to another user".to_string());
        }
    }
    if problems.is_empty() {
        Check::new(
            None,
            name,
            Status::Ok,
            format!("{} ({:04o})", path.display(), mode & 0o777),
        )
    } else {
        Check::new(
            None,
            name,
            Status::Fail,
            format!("{} {}", path.display(), problems.join(", ")),
        )
        .fix(format!(
            "chmod 600 {0} (or delete it: a new token is made on next use)",
            path.display()
        ))
    }
}

/// Checks one hook host in every scope; set up when our hook is installed in any of them.
fn host_checks(env: &Env, host: Host, required: bool) -> HostReport {
    let who = Some(Harness::from(host));
    let mut checks = Vec::new();
    let mut files: Vec<(Scope, PathBuf)> = Vec::new();
    for scope in [Scope::User, Scope::Project] {
        match env.hook_file(host, scope) {
            Ok(path) if !files.iter().any(|(_, p)| *p == path) => files.push((scope, path)),
            Ok(_) => {}
            Err(e) => checks.push(Check::new(who, "config", Status::Fail, e.to_string())),
        }
    }
    let mut installed = false;
    for (scope, path) in &files {
        let value = match Snapshot::read(path).and_then(|s| load_json(&s)) {
            Ok(Some(value)) => value,
            Ok(None) => continue,
            Err(e) => {
                checks.push(
                    Check::new(who, "config", Status::Fail, e.to_string()).fix(format!(
                        "fix {} (it must be valid JSON for {} to use it)",
                        path.display(),
                        host.display_name()
                    )),
                );
                continue;
            }
        };
        let found = json_config::find_ours(&value);
        if found.is_empty() {
            continue;
        }
        installed = true;
        let reinstall = reinstall_command(host, *scope);
        if found.len() > 1 {
            checks.push(
                Check::new(
                    who,
                    "hook_installed",
                    Status::Fail,
                    format!("{} copies in {}", found.len(), path.display()),
                )
                .fix(format!("run `{reinstall}` (it keeps one)")),
            );
        } else {
            checks.push(Check::new(
                who,
                "hook_installed",
                Status::Ok,
                format!("{} ({} scope)", path.display(), scope.name()),
            ));
        }
        for f in &found {
            checks.push(command_check(host, f.handler, &reinstall));
            if host == Host::Codex {
                checks.extend(codex_trust_checks(env, path, f, &reinstall));
            }
        }
        if host == Host::Claude {
            // An install from before the PreToolUse path lacks it (SPEC §13.3).
            let ask = json_config::find_ours_at(&value, &json_config::ASK_PRE_TOOL_USE);
            checks.push(if ask.is_empty() {
                Check::new(
                    who,
                    "ask_user_question_hook",
                    Status::Info,
                    format!(
                        "no PreToolUse hook for AskUserQuestion in {}: outside the default permission mode Claude's questions are asked at the terminal only",
                        path.display()
                    ),
                )
                .fix(format!("run `{reinstall}` to add it"))
            } else {
                Check::new(
                    who,
                    "ask_user_question_hook",
                    Status::Ok,
                    "PreToolUse hook for AskUserQuestion installed".to_string(),
                )
            });
        }
        let notify_events: Vec<String> = super::notify_hooks::events(host)
            .into_iter()
            .filter(|e| !json_config::find_in(&value, e, super::notify_hooks::is_notify).is_empty())
            .collect();
        if !notify_events.is_empty() {
            checks.push(Check::new(
                who,
                "notify_hooks",
                Status::Ok,
                format!(
                    "notify hooks ({}) in {}",
                    notify_events.join(", "),
                    path.display()
                ),
            ));
        }
        if host == Host::Claude && value.get("disableAllHooks") == Some(&Value::Bool(true)) {
            checks.push(
                Check::new(
                    who,
                    "hooks_enabled",
                    Status::Fail,
                    format!(
                        "{} sets \"disableAllHooks\": true, so Claude runs no hook",
                        path.display()
                    ),
                )
                .fix(format!(
                    "remove \"disableAllHooks\" from {}",
                    path.display()
                )),
            );
        }
    }
    if !installed {
        checks.push(
            Check::new(who, "hook_installed", absent(required), "not installed").fix(format!(
                "run `agentnotify setup --host {}` (or `{}{}`)",
                host.as_str(),
                reinstall_command(host, Scope::User),
                if host == Host::Codex { " --trust" } else { "" }
            )),
        );
    }
    HostReport {
        set_up: installed,
        checks,
    }
}

fn reinstall_command(host: Host, scope: Scope) -> String {
    let scope = if scope == Scope::Project {
        " --scope project"
    } else {
        ""
    };
    format!(
        "agentnotify-hook install-harness {} --ask{scope}",
        host.as_str()
    )
}

/// The handler's executable exists and runs, it is for this host, and its budget ends
/// before the host's timeout.
fn command_check(host: Host, handler: &Value, reinstall: &str) -> Check {
    let name = "command";
    let line = handler["command"].as_str().unwrap_or_default();
    let parsed = parse_hook_command(line).expect("found as ours, so it parses");
    let mut problems = Vec::new();
    let exe = Path::new(&parsed.exe);
    if !exe.is_absolute() {
        problems.push(format!(
            "{} is not an absolute path (hosts do not promise a PATH)",
            parsed.exe
        ));
    } else if !is_executable_file(exe) {
        problems.push(format!("{} is missing or not executable", parsed.exe));
    }
    if parsed.host.as_deref() != Some(host.as_str()) {
        problems.push(format!(
            "it does not run the bridge for {} (`{} ask-permission`)",
            host.display_name(),
            host.as_str()
        ));
    }
    let budget = parsed.budget_secs.unwrap_or(DEFAULT_BUDGET_SECS);
    let timeout = handler["timeout"]
        .as_u64()
        .unwrap_or(HOST_DEFAULT_TIMEOUT_SECS);
    if budget >= timeout {
        problems.push(format!("its wait budget ({budget} s) does not end before the host timeout ({timeout} s), so the host kills it first"));
    }
    if problems.is_empty() {
        Check::new(
            Some(host.into()),
            name,
            Status::Ok,
            format!(
                "{} is executable; waits {budget} s of the host's {timeout} s",
                parsed.exe
            ),
        )
    } else {
        Check::new(Some(host.into()), name, Status::Fail, problems.join("; "))
            .fix(format!("run `{reinstall}`"))
    }
}

fn codex_trust_checks(
    env: &Env,
    hooks_json: &Path,
    found: &json_config::Found<'_>,
    reinstall: &str,
) -> Vec<Check> {
    let host = Some(Harness::Codex);
    let config_path = match env.codex_config() {
        Ok(p) => p,
        Err(e) => return vec![Check::new(host, "trust", Status::Fail, e.to_string())],
    };
    let config = match CodexConfig::load(&config_path) {
        Ok(c) => c,
        Err(e) => return vec![Check::new(host, "trust", Status::Fail, e.to_string())],
    };
    let mut checks = Vec::new();
    if let Some(flag) = codex_trust::hooks_feature_off(&config.doc) {
        checks.push(
            Check::new(
                host,
                "hooks_enabled",
                Status::Fail,
                format!(
                    "{} sets [features] {flag} = false, so Codex runs no hook",
                    config_path.display()
                ),
            )
            .fix(format!(
                "remove `{flag} = false` from [features] in {}",
                config_path.display()
            )),
        );
    }
    let key = codex_trust::trust_key(hooks_json, found.position);
    let hash = codex_trust::trust_hash(found.group, found.handler);
    let state = codex_trust::state(&config.doc, &key, &hash);
    let fix = format!(
        "start `codex`, type /hooks and trust the agentnotify-hook entry, or run `{reinstall} --trust`"
    );
    let mut check = match state {
        TrustState::Trusted => Check::new(host, "trust", Status::Ok, format!("trusted in {}", config_path.display())),
        TrustState::Untrusted => Check::new(host, "trust", Status::Fail,
            "untrusted: Codex skips this hook (silently in `codex exec`) until you trust it").fix(fix.clone()),
        TrustState::Modified => Check::new(host, "trust", Status::Fail,
            "modified: the trust recorded is for an earlier version of this hook, so Codex skips it").fix(fix),
    };
    check.trust = Some(state.name());
    checks.push(check);
    checks
}
