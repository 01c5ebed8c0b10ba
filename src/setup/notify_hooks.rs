//! The notify-only hooks (SPEC §11.7) that `install-harness --notify` adds: the host's
//! Stop-like events run `agentnotify-hook <host> notify`, which prints nothing and posts
//! "Claude finished in shop". The groups come from `harness/<host>/notify.json`.

use serde_json::Value;

use super::command::{shell_quote, shell_split, HOOK_EXE_NAME};
use super::host::Host;
use super::json_config::{self, Position, Upsert};

const CLAUDE_NOTIFY: &str = include_str!("../../harness/claude/notify.json");
const CODEX_NOTIFY: &str = include_str!("../../harness/codex/notify.json");

fn snippet(host: Host) -> Value {
    let text = match host {
        Host::Claude => CLAUDE_NOTIFY,
        Host::Codex => CODEX_NOTIFY,
    };
    serde_json::from_str(text).expect("the harness snippets are valid JSON")
}

/// The events we install a notify hook under, in snippet order.
pub fn events(host: Host) -> Vec<String> {
    snippet(host)["hooks"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The command line of the notify hook.
pub fn command_line(host: Host, exe: &str) -> String {
    format!("{} {} notify", shell_quote(exe), host.as_str())
}

/// True when a handler runs `agentnotify-hook … notify`.
pub fn is_notify(handler: &Value) -> bool {
    let Some(words) = handler
        .get("command")
        .and_then(Value::as_str)
        .and_then(shell_split)
    else {
        return false;
    };
    let mut words = words
        .iter()
        .skip_while(|w| w.contains('=') && !w.contains('/'));
    let Some(exe) = words.next() else {
        return false;
    };
    let name = std::path::Path::new(exe)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    (name == HOOK_EXE_NAME || name == format!("{HOOK_EXE_NAME}.exe"))
        && words.any(|w| w == "notify")
}

/// Our group for `event`, command filled in.
fn group(host: Host, event: &str, exe: &str) -> Value {
    let mut g = snippet(host)["hooks"][event][0].clone();
    g["hooks"][0]["command"] = Value::String(command_line(host, exe));
    g
}

/// The events whose `hooks.<event>` is not an array (we will not edit those).
pub fn shape_problems(doc: &Value, host: Host) -> Vec<String> {
    events(host)
        .into_iter()
        .filter(|e| !json_config::event_is_array(doc, e))
        .map(|e| {
            format!(
                "\"hooks\".\"{e}\" must be an array but is {}",
                json_config::type_name(&doc["hooks"][&e])
            )
        })
        .collect()
}

/// `--force`: replaces a wrong-typed event list with an empty one.
pub fn repair(doc: &mut Value, host: Host) {
    for e in events(host) {
        if !json_config::event_is_array(doc, &e) {
            doc["hooks"][&e] = Value::Array(Vec::new());
        }
    }
}

/// Adds (or updates in place) our handler under every notify event. Returns where each is
/// and whether anything changed.
pub fn install(doc: &mut Value, host: Host, exe: &str) -> (bool, Vec<(String, Position)>) {
    let mut changed = false;
    let mut at = Vec::new();
    for e in events(host) {
        let (action, position) = json_config::upsert_in(doc, &e, group(host, &e, exe), is_notify);
        changed |= action != Upsert::Unchanged;
        at.push((e, position));
    }
    (changed, at)
}

/// Removes every notify handler of ours; returns where they were.
pub fn remove(doc: &mut Value, host: Host, original: Option<&Value>) -> Vec<(String, Position)> {
    let mut removed = Vec::new();
    for e in events(host) {
        for p in json_config::remove_in(doc, &e, is_notify, original) {
            removed.push((e.clone(), p));
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_every_event_once_and_removes_them_again() {
        let mut doc = serde_json::json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/bin/other"}]}]}});
        let before = doc.clone();
        let (changed, at) = install(&mut doc, Host::Claude, "/b/agentnotify-hook");
        assert!(changed);
        assert_eq!(at.len(), 4);
        assert_eq!(
            doc["hooks"]["Stop"][1]["hooks"][0]["command"],
            "/b/agentnotify-hook claude notify"
        );
        assert_eq!(doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 10);
        let (again, _) = install(&mut doc, Host::Claude, "/b/agentnotify-hook");
        assert!(!again, "a second install changes nothing");
        assert_eq!(remove(&mut doc, Host::Claude, Some(&before)).len(), 4);
        assert_eq!(doc, before);
        assert!(!is_notify(
            &serde_json::json!({"command": "/b/agentnotify-hook claude ask-permission"})
        ));
    }
}
