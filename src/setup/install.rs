//! `install-harness`: plans the edit of a host's hook file (and, for Codex with
//! `--trust`, of `config.toml`) without writing anything; the caller applies or shows it.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::codex::{self, CodexConfig};
use super::codex_trust::{self, TrustState};
use super::command::HookCommand;
use super::error::SetupError;
use super::files::{backup_path, free_backup_path, Snapshot};
use super::host::{Env, Host, Scope};
use super::json_config::{self, Position, Upsert};
use super::notify_hooks;
use super::plan::FileChange;
use super::snippets;

/// Mode of a hook file we create (hosts create theirs the same way; no secrets inside).
pub const JSON_MODE: u32 = 0o644;

/// What the person asked `install-harness` to do.
#[derive(Debug, Clone)]
pub struct InstallRequest {
    pub scope: Scope,
    pub command: HookCommand,
    /// The PermissionRequest hook (questions answered remotely).
    pub ask: bool,
    /// The notify-only hooks ("Claude finished in shop", SPEC §11.7).
    pub notify: bool,
    pub trust: bool,
    pub force: bool,
}

/// Changes to make and what to tell the person about them.
#[derive(Debug, Default)]
pub struct Planned {
    pub changes: Vec<FileChange>,
    pub lines: Vec<String>,
}

impl Planned {
    pub fn is_noop(&self) -> bool {
        self.changes.iter().all(FileChange::is_noop)
    }
}

/// Parses a JSON hook file; `Ok(None)` when it does not exist.
pub fn load_json(snapshot: &Snapshot) -> Result<Option<Value>, SetupError> {
    let invalid = |message: String, line: usize, column: usize| SetupError::InvalidJson {
        path: snapshot.path.clone(),
        message,
        line,
        column,
    };
    match snapshot.text() {
        None => Ok(None),
        Some(Err(e)) => {
            let bytes = snapshot.bytes.as_deref().unwrap_or_default();
            let before = &bytes[..e.valid_up_to()];
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            let column = before.len()
                - before
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1)
                + 1;
            Err(invalid("not UTF-8 text".into(), line, column))
        }
        Some(Ok(text)) => json_config::parse(text).map(Some).map_err(|e| {
            let message = e.to_string();
            let message = message
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_string();
            invalid(message, e.line(), e.column())
        }),
    }
}

/// Plans installing `request.command` for `host`.
pub fn plan(
    env: &Env,
    host: Host,
    request: &InstallRequest,
    dry_run: bool,
) -> Result<Planned, SetupError> {
    let would = |done: &str, planned: &str| {
        if dry_run {
            planned.to_string()
        } else {
            done.to_string()
        }
    };
    let path = env.hook_file(host, request.scope)?;
    let snapshot = Snapshot::read(&path)?;
    let mut planned = Planned::default();

    // Anything we cannot merge into is refused, unless --force says to replace it.
    let mut discarded = false;
    let original = match load_json(&snapshot) {
        Ok(value) => value,
        Err(SetupError::InvalidJson {
            message,
            line,
            column,
            ..
        }) if request.force => {
            planned.lines.push(format!(
                "--force: {} is not valid JSON ({message}, line {line}, column {column}); replacing it",
                path.display()
            ));
            discarded = true;
            None
        }
        Err(e) => return Err(e),
    };
    let mut doc = original
        .clone()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let mut problems: Vec<String> = json_config::check_shape(&doc)
        .err()
        .map(|p| p.to_string())
        .into_iter()
        .collect();
    let ask = &json_config::ASK_PRE_TOOL_USE;
    if request.ask && host == Host::Claude && json_config::check_shape(&doc).is_ok() {
        if let Err(p) = json_config::check_shape_at(&doc, ask) {
            problems.push(p.to_string());
        }
    }
    if request.notify && problems.is_empty() {
        problems.extend(notify_hooks::shape_problems(&doc, host));
    }
    if host == Host::Codex {
        let extra = codex::extra_root_keys(&doc);
        if !extra.is_empty() {
            problems.push(format!(
                "Codex accepts only \"description\" and \"hooks\" at the top level, so it rejects this file because of {}",
                extra.iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if !problems.is_empty() {
        let problem = problems.join("; ");
        if !request.force {
            return Err(SetupError::WrongShape { path, problem });
        }
        planned.lines.push(format!(
            "--force: replacing what {} could not use: {problem}",
            path.display()
        ));
        json_config::repair_shape(&mut doc);
        if host == Host::Claude && json_config::check_shape_at(&doc, ask).is_err() {
            doc["hooks"][ask.event] = Value::Array(Vec::new());
        }
        notify_hooks::repair(&mut doc, host);
        if host == Host::Codex {
            codex::drop_extra_root_keys(&mut doc);
        }
        discarded = true;
    }

    let had_ours = original.as_ref().is_some_and(|v| {
        !json_config::find_ours(v).is_empty()
            || notify_hooks::events(host)
                .iter()
                .any(|e| !json_config::find_in(v, e, notify_hooks::is_notify).is_empty())
    });
    let (action, position) = if request.ask {
        let group = snippets::hook_group(&request.command);
        let (action, position) = json_config::upsert(&mut doc, group).expect("shape checked above");
        // Claude asks hooks about AskUserQuestion only in its default mode; PreToolUse covers
        // the other modes (SPEC §13.3). Appended after PermissionRequest, so positions hold.
        if host == Host::Claude {
            let group = snippets::hook_group_at(&request.command, ask);
            json_config::upsert_at(&mut doc, group, ask).expect("shape checked above");
        }
        (action, Some(position))
    } else {
        (Upsert::Unchanged, None)
    };
    let notify_at = if request.notify {
        notify_hooks::install(&mut doc, host, &request.command.exe).1
    } else {
        Vec::new()
    };
    let changed = discarded || original.as_ref() != Some(&doc);
    let indent = snapshot
        .text()
        .and_then(Result::ok)
        .map(json_config::detect_indent)
        .unwrap_or_else(|| "  ".to_string());
    let after = if changed {
        Some(json_config::render(&doc, &indent).into_bytes())
    } else {
        snapshot.bytes.clone()
    };
    let existed = snapshot.bytes.is_some();
    let mut change = FileChange::new(snapshot, after, JSON_MODE);
    if changed && existed {
        if discarded {
            change.backup_to = Some(free_backup_path(&path));
        } else if !backup_path(&path).exists() && !had_ours {
            // The backup is the file as it was before we ever touched it; a file that
            // already holds our hook is not that.
            change.backup_to = Some(backup_path(&path));
        }
    }

    let where_ = format!("{} ({} scope)", path.display(), request.scope.name());
    planned.lines.push(match (changed, action) {
        (false, _) => format!("{}: already up to date in {where_}", host.display_name()),
        (true, _) if !request.ask => format!(
            "{}: {} the notify hooks in {where_}",
            host.display_name(),
            would("installed", "would install")
        ),
        (true, Upsert::Added) => format!(
            "{}: {} the PermissionRequest hook in {where_}",
            host.display_name(),
            would("installed", "would install")
        ),
        (true, _) => format!(
            "{}: {} our PermissionRequest hook in place in {where_}",
            host.display_name(),
            would("updated", "would update")
        ),
    });
    if changed && request.ask {
        planned.lines.push(format!(
            "  runs: {} (host timeout {} s)",
            request.command.command_line(),
            request.command.handler_timeout_secs()
        ));
        if host == Host::Claude {
            planned.lines.push(format!(
                "  and, as a PreToolUse hook for AskUserQuestion outside the default permission mode: {}",
                request.command.command_line_for(ask.action)
            ));
        }
    }
    if changed && request.notify {
        let events: Vec<&str> = notify_at.iter().map(|(e, _)| e.as_str()).collect();
        planned.lines.push(format!(
            "  notify hooks ({}): {} (prints nothing; posts \"{} finished\")",
            events.join(", "),
            notify_hooks::command_line(host, &request.command.exe),
            match host {
                Host::Claude => "Claude",
                Host::Codex => "Codex",
            }
        ));
    }
    if let Some(backup) = &change.backup_to {
        planned.lines.push(format!(
            "  previous content {} {}",
            would("saved as", "would be saved as"),
            backup.display()
        ));
    }
    planned.changes.push(change);

    if host == Host::Codex {
        let handlers: Vec<(String, Position)> = position
            .map(|p| (json_config::EVENT.to_string(), p))
            .into_iter()
            .chain(notify_at)
            .collect();
        codex_trust_step(
            env,
            &path,
            &doc,
            &handlers,
            request.trust,
            dry_run,
            &mut planned,
        )?;
    }
    Ok(planned)
}

/// Codex runs a hook only once the person trusts it: record trust (`--trust`) or say
/// plainly what to do. `handlers`: each of our handlers, by event, where it sits.
fn codex_trust_step(
    env: &Env,
    hooks_json: &Path,
    doc: &Value,
    handlers: &[(String, Position)],
    trust: bool,
    dry_run: bool,
    planned: &mut Planned,
) -> Result<(), SetupError> {
    let entries: Vec<(String, String)> = handlers
        .iter()
        .map(|(event, position)| {
            let group = doc["hooks"][event][position.group]
                .as_object()
                .expect("upsert placed our handler in an object group");
            let handler = &group["hooks"][position.handler];
            let event_name = codex_trust::event_name(event);
            (
                codex_trust::trust_key_for(hooks_json, &event_name, *position),
                codex_trust::trust_hash_for(&event_name, group, handler),
            )
        })
        .collect();
    let config_path = env.codex_config()?;
    if trust {
        let config = CodexConfig::load(&config_path)?;
        match config.plan_trust_all(&entries)? {
            Some((change, changed)) => {
                for (key, hash) in entries.iter().filter(|(k, _)| changed.contains(k)) {
                    planned.lines.push(format!(
                        "Codex trust: {} [hooks.state.\"{key}\"] trusted_hash = \"{hash}\" in {}",
                        if dry_run { "would record" } else { "recorded" },
                        config_path.display()
                    ));
                }
                if let Some(backup) = &change.backup_to {
                    planned.lines.push(format!(
                        "  previous content {} {}",
                        if dry_run {
                            "would be saved as"
                        } else {
                            "saved as"
                        },
                        backup.display()
                    ));
                }
                planned.changes.push(change);
            }
            None => planned.lines.push(format!(
                "Codex trust: already recorded in {}",
                config_path.display()
            )),
        }
        return Ok(());
    }
    let config = CodexConfig::load(&config_path);
    let states: Result<Vec<TrustState>, _> = config.as_ref().map(|c| {
        entries
            .iter()
            .map(|(key, hash)| codex_trust::state(&c.doc, key, hash))
            .collect()
    });
    match states {
        Ok(states) if states.iter().all(|s| *s == TrustState::Trusted) => {
            planned.lines.push(format!(
                "Codex trust: trusted (recorded in {})",
                config_path.display()
            ))
        }
        Ok(states) => {
            let other = states
                .iter()
                .find(|s| **s != TrustState::Trusted)
                .expect("not all trusted");
            let why = if *other == TrustState::Modified {
                "the trust recorded for this hook is for an earlier version of it, so Codex skips it"
            } else {
                "Codex skips hooks nobody has trusted yet, silently in `codex exec`"
            };
            planned
                .lines
                .push(format!("Codex trust: {}. {why}.", other.name()));
            planned.lines.extend(trust_instructions(&config_path));
        }
        Err(e) => {
            planned
                .lines
                .push(format!("Codex trust: cannot tell ({e})."));
            planned.lines.extend(trust_instructions(&config_path));
        }
    }
    Ok(())
}

/// The two ways to trust the hook, as printed after a Codex install.
pub fn trust_instructions(config_path: &Path) -> Vec<String> {
    vec![
        "  You must trust the hook once: start `codex`, type /hooks, and trust the agentnotify-hook entry".to_string(),
        format!(
            "  (or re-run this command with --trust to record that trust in {}).",
            config_path.display()
        ),
    ]
}

/// Absolute, canonical path of the running executable, for the hook command.
pub fn default_command_path() -> Result<PathBuf, SetupError> {
    let exe = std::env::current_exe().map_err(SetupError::CurrentExe)?;
    std::fs::canonicalize(&exe).map_err(SetupError::CurrentExe)
}
