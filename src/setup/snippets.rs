//! What we install into hosts, read from the top-level `harness/` folder at compile time so
//! setup needs no network and no file beside the binary (`harness/README.md`).
//!
//! A placeholder is a string `"{{name}}"`: the snippets stay valid JSON / TOML, and a
//! placeholder is replaced by a value of any type, so `"{{timeout}}"` becomes a number.

use serde_json::Value;
use toml_edit::{DocumentMut, Item};

use super::command::HookCommand;
use super::host::Host;
use super::json_config::{Slot, ASK_PRE_TOOL_USE, PERMISSION};

const CLAUDE_SETTINGS: &str = include_str!("../../harness/claude/settings.json");
const CODEX_HOOKS: &str = include_str!("../../harness/codex/hooks.json");
const CODEX_TRUST: &str = include_str!("../../harness/codex/trust.toml");

/// The host's snippet: its whole hook file as a fresh machine gets it.
fn hook_file(host: Host) -> &'static str {
    match host {
        Host::Claude => CLAUDE_SETTINGS,
        Host::Codex => CODEX_HOOKS,
    }
}

/// Our `PermissionRequest` group for `cmd.host`, placeholders filled: what install merges
/// into the host's hook file. Its one handler is ours.
pub fn hook_group(cmd: &HookCommand) -> Value {
    hook_group_at(cmd, &PERMISSION)
}

/// Our group for another slot of the host's hook file (Claude's `PreToolUse` for
/// AskUserQuestion), placeholders filled.
pub fn hook_group_at(cmd: &HookCommand, slot: &Slot) -> Value {
    let mut file: Value =
        serde_json::from_str(hook_file(cmd.host)).expect("the harness snippets are valid JSON");
    fill_json(
        &mut file,
        &[
            ("command", cmd.command_line().into()),
            (
                "pre_tool_use_command",
                cmd.command_line_for(ASK_PRE_TOOL_USE.action).into(),
            ),
            ("timeout", cmd.handler_timeout_secs().into()),
        ],
    );
    file["hooks"][slot.event][0].take()
}

/// The fields of the Codex trust entry (`[hooks.state."{{key}}"]`) recording `hash`.
pub fn trust_fields(hash: &str) -> Vec<(String, Item)> {
    let doc: DocumentMut = CODEX_TRUST
        .parse()
        .expect("the harness trust snippet is valid TOML");
    let entry = doc["hooks"]["state"]["{{key}}"]
        .as_table_like()
        .expect("the trust snippet holds the entry");
    entry
        .iter()
        .map(|(name, item)| {
            let item = match item.as_str() {
                Some("{{hash}}") => toml_edit::value(hash),
                _ => item.clone(),
            };
            (name.to_string(), item)
        })
        .collect()
}

/// Replaces every string `"{{name}}"` in `value` by the value given for `name`.
fn fill_json(value: &mut Value, values: &[(&str, Value)]) {
    match value {
        Value::String(s) => {
            let given = s
                .strip_prefix("{{")
                .and_then(|rest| rest.strip_suffix("}}"))
                .and_then(|name| values.iter().find(|(n, _)| *n == name));
            if let Some((_, v)) = given {
                *value = v.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill_json(v, values)),
        Value::Object(map) => map.values_mut().for_each(|v| fill_json(v, values)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_snippet_fills_completely() {
        for host in Host::ALL {
            let group = hook_group(&HookCommand {
                host,
                exe: "/b/agentnotify-hook".into(),
                budget_secs: 590,
            });
            assert_eq!(
                group["hooks"][0]["command"],
                format!(
                    "/b/agentnotify-hook {} ask-permission --timeout 590",
                    host.as_str()
                )
            );
            assert_eq!(group["hooks"][0]["timeout"], 600);
            assert!(!group.to_string().contains("{{"), "{group}");
        }
        let fields = trust_fields("sha256:ab");
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].0, "trusted_hash");
        assert_eq!(fields[0].1.as_str(), Some("sha256:ab"));
    }
}
