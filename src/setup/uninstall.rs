//! `uninstall-harness`: plans removing exactly our handlers (and, for Codex, their trust
//! entries), giving back the pre-install bytes when nothing else changed meanwhile.

use serde_json::{Map, Value};

use super::codex::CodexConfig;
use super::codex_trust;
use super::error::SetupError;
use super::files::{backup_path, Snapshot};
use super::host::{Env, Host, Scope};
use super::install::{load_json, Planned, JSON_MODE};
use super::json_config::{self, Position};
use super::notify_hooks;
use super::plan::FileChange;

/// Plans removing our hook from `host`'s file for `scope`.
pub fn plan(env: &Env, host: Host, scope: Scope, dry_run: bool) -> Result<Planned, SetupError> {
    let would = |done: &'static str, planned: &'static str| if dry_run { planned } else { done };
    let path = env.hook_file(host, scope)?;
    let snapshot = Snapshot::read(&path)?;
    let mut planned = Planned::default();
    let Some(current) = load_json(&snapshot)? else {
        planned.lines.push(format!(
            "{}: nothing to remove ({} does not exist)",
            host.display_name(),
            path.display()
        ));
        return Ok(planned);
    };
    json_config::check_shape(&current).map_err(|p| SetupError::WrongShapeNoForce {
        path: path.clone(),
        problem: p.to_string(),
    })?;

    let backup = backup_path(&path);
    let backup_bytes = std::fs::read(&backup).ok();
    let backup_value = backup_bytes
        .as_deref()
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| json_config::parse(t).ok());

    let mut doc = current.clone();
    let mut removed =
        json_config::remove_ours(&mut doc, backup_value.as_ref()).expect("shape checked above");
    // Claude also has our AskUserQuestion PreToolUse handler (left alone if that part of
    // the file is not ours to read).
    let ask = &json_config::ASK_PRE_TOOL_USE;
    if host == Host::Claude && json_config::check_shape_at(&doc, ask).is_ok() {
        removed.extend(
            json_config::remove_ours_at(&mut doc, backup_value.as_ref(), ask)
                .expect("shape checked"),
        );
    }
    // The notify hooks too (where their event lists are arrays: others we leave alone).
    let removed_notify = if notify_hooks::shape_problems(&doc, host).is_empty() {
        notify_hooks::remove(&mut doc, host, backup_value.as_ref())
    } else {
        Vec::new()
    };
    if removed.is_empty() && removed_notify.is_empty() {
        planned.lines.push(format!(
            "{}: not installed in {}; nothing changed",
            host.display_name(),
            path.display()
        ));
        return Ok(planned);
    }
    let moved = others_moved(&current, &doc);

    let mut lines = Vec::new();
    let change = if backup_value.as_ref() == Some(&doc) {
        lines.push(format!(
            "  {} the original bytes from {}",
            would("restored", "would restore"),
            backup.display()
        ));
        let mut change = FileChange::new(snapshot, backup_bytes, JSON_MODE);
        change.remove_backup = Some(backup);
        change
    } else if backup_bytes.is_none() && doc == Value::Object(Map::new()) {
        lines.push(format!(
            "  {} the file, which install had created",
            would("removed", "would remove")
        ));
        let mut change = FileChange::new(snapshot, None, JSON_MODE);
        change.prune_parent = env.may_prune_folder(host, scope);
        change
    } else {
        if backup_bytes.is_some() {
            lines.push(format!(
                "  other changes were made since install, so {} (your pre-install copy) stays",
                backup.display()
            ));
        }
        let indent = snapshot
            .text()
            .and_then(Result::ok)
            .map(json_config::detect_indent)
            .unwrap_or_else(|| "  ".to_string());
        let text = json_config::render(&doc, &indent);
        FileChange::new(snapshot, Some(text.into_bytes()), JSON_MODE)
    };
    planned.lines.push(format!(
        "{}: {} {} PermissionRequest handler(s){} from {} ({} scope)",
        host.display_name(),
        would("removed", "would remove"),
        removed.len(),
        if removed_notify.is_empty() {
            String::new()
        } else {
            format!(" and {} notify handler(s)", removed_notify.len())
        },
        path.display(),
        scope.name()
    ));
    planned.lines.extend(lines);
    planned.changes.push(change);

    if host == Host::Codex {
        let keys: Vec<String> =
            removed
                .iter()
                .map(|p| codex_trust::trust_key(&path, *p))
                .chain(removed_notify.iter().map(|(e, p)| {
                    codex_trust::trust_key_for(&path, &codex_trust::event_name(e), *p)
                }))
                .collect();
        let config_path = env.codex_config()?;
        match CodexConfig::load(&config_path) {
            Ok(config) => {
                let prune = env.may_prune_folder(Host::Codex, Scope::User);
                if let Some(change) = config.plan_untrust(&keys, prune) {
                    planned.lines.push(format!(
                        "Codex trust: {} the entry for our hook from {}",
                        would("removed", "would remove"),
                        config_path.display()
                    ));
                    planned.changes.push(change);
                }
            }
            Err(e) => planned.lines.push(format!(
                "Codex trust: left {} alone ({e})",
                config_path.display()
            )),
        }
        if moved {
            planned.lines.push(
                "Codex trust: other PermissionRequest hooks moved up in the file; Codex keys trust by position, \
                 so it will ask you to review them again (/hooks)."
                    .to_string(),
            );
        }
    }
    Ok(planned)
}

/// True when removing ours changed the position of any other handler.
fn others_moved(before: &Value, after: &Value) -> bool {
    let positions = |doc: &Value, skip_ours: bool| -> Vec<(Position, Value)> {
        let Some(groups) = doc["hooks"][json_config::EVENT].as_array() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            let Some(handlers) = group.get("hooks").and_then(Value::as_array) else {
                continue;
            };
            for (h, handler) in handlers.iter().enumerate() {
                if !(skip_ours && json_config::is_ours(handler)) {
                    out.push((
                        Position {
                            group: g,
                            handler: h,
                        },
                        handler.clone(),
                    ));
                }
            }
        }
        out
    };
    positions(before, true) != positions(after, false)
}
