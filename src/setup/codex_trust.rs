//! Codex hook trust: the hash Codex records for a trusted hook, and editing the
//! `[hooks.state."…"]` entry in `config.toml` without disturbing anything else.
//!
//! Recipe (verified against real Codex, see HOSTS.md): the entry key is
//! `<absolute hooks.json path>:permission_request:<group index>:<handler index>` and
//! `trusted_hash = "sha256:" + hex(sha256(JSON))`, JSON being the compact, key-sorted,
//! non-ASCII-raw serialisation of
//! `{"event_name":"permission_request","matcher":…,"hooks":[{"type","command","timeout","async"}]}`.
//! The path is not hashed; any change to the command or timeout invalidates trust. A group
//! without a `matcher` (our Stop hook: Codex ignores matchers there) has no `matcher` key in
//! the hashed JSON at all — verified with the real Codex by the host suite.

use std::path::Path;

use serde_json::{Map, Value};
use toml_edit::{DocumentMut, Item, Table};

use super::command::HOST_DEFAULT_TIMEOUT_SECS;
use super::json_config::Position;
use super::snippets;
use crate::hook::payload::canonical;
use crate::model::digest::hex_sha256;

/// Codex's snake_case name of the event, used in keys and hashes.
pub const EVENT_NAME: &str = "permission_request";

/// Whether the hook at a position is trusted by Codex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustState {
    /// `trusted_hash` matches the hook as it is now.
    Trusted,
    /// No trust entry: Codex skips the hook.
    Untrusted,
    /// A trust entry exists for another version of the hook: Codex skips it.
    Modified,
}

impl TrustState {
    pub fn name(&self) -> &'static str {
        match self {
            TrustState::Trusted => "trusted",
            TrustState::Untrusted => "untrusted",
            TrustState::Modified => "modified",
        }
    }
}

/// The `[hooks.state]` key Codex uses for the handler at `position` in `hooks_json`.
pub fn trust_key(hooks_json: &Path, position: Position) -> String {
    trust_key_for(hooks_json, EVENT_NAME, position)
}

/// [`trust_key`] for a handler of another event (`event_name` in Codex's snake_case).
pub fn trust_key_for(hooks_json: &Path, event_name: &str, position: Position) -> String {
    format!(
        "{}:{event_name}:{}:{}",
        hooks_json.display(),
        position.group,
        position.handler
    )
}

/// Codex's snake_case name of a hook event (`Stop` → `stop`, `PermissionRequest` →
/// `permission_request`).
pub fn event_name(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `sha256:<hex>` of the handler as Codex sees it (defaults filled in as Codex does).
pub fn trust_hash(group: &Map<String, Value>, handler: &Value) -> String {
    trust_hash_for(EVENT_NAME, group, handler)
}

/// [`trust_hash`] for a handler of another event.
pub fn trust_hash_for(event_name: &str, group: &Map<String, Value>, handler: &Value) -> String {
    let field = |name: &str| handler.get(name).cloned();
    let mut hook = Map::new();
    hook.insert(
        "type".into(),
        field("type").unwrap_or_else(|| "command".into()),
    );
    hook.insert("command".into(), field("command").unwrap_or(Value::Null));
    hook.insert(
        "timeout".into(),
        field("timeout").unwrap_or_else(|| HOST_DEFAULT_TIMEOUT_SECS.into()),
    );
    hook.insert("async".into(), field("async").unwrap_or(Value::Bool(false)));
    let mut identity = Map::new();
    identity.insert("event_name".into(), event_name.into());
    if let Some(m) = group.get("matcher") {
        identity.insert("matcher".into(), m.clone());
    }
    identity.insert("hooks".into(), Value::Array(vec![Value::Object(hook)]));
    // Key-sorted (byte order): `serde_json` here keeps insertion order, while Codex hashes
    // key-sorted JSON.
    let json = serde_json::to_string(&canonical(&Value::Object(identity)))
        .expect("serialising a Value to memory cannot fail");
    format!("sha256:{}", hex_sha256(json.as_bytes()))
}

/// The recorded `trusted_hash` for `key`, if any.
pub fn recorded_hash<'a>(doc: &'a DocumentMut, key: &str) -> Option<&'a str> {
    doc.get("hooks")?
        .get("state")?
        .get(key)?
        .get("trusted_hash")?
        .as_str()
}

/// Compares the recorded trust for `key` with `hash`.
pub fn state(doc: &DocumentMut, key: &str, hash: &str) -> TrustState {
    match recorded_hash(doc, key) {
        Some(found) if found == hash => TrustState::Trusted,
        Some(_) => TrustState::Modified,
        None => TrustState::Untrusted,
    }
}

/// Names a `[features]` switch that turns Codex hooks off, if one is set to false.
pub fn hooks_feature_off(doc: &DocumentMut) -> Option<&'static str> {
    let features = doc.get("features")?;
    ["hooks", "codex_hooks"]
        .into_iter()
        .find(|name| features.get(name).and_then(Item::as_bool) == Some(false))
}

/// Records `hash` as trusted for `key`, creating `[hooks.state."key"]` only if missing and
/// touching nothing else. Returns whether the document changed; `Err` names a wrong type.
pub fn set_trusted(doc: &mut DocumentMut, key: &str, hash: &str) -> Result<bool, String> {
    if recorded_hash(doc, key) == Some(hash) {
        return Ok(false);
    }
    let hooks = child_table(doc.as_table_mut(), "hooks", "hooks")?;
    let state = child_table(hooks, "state", "hooks.state")?;
    let entry = match state.get_mut(key) {
        Some(item) => item
            .as_table_like_mut()
            .ok_or_else(|| format!("hooks.state.\"{key}\" must be a table"))?,
        None => {
            state.insert(key, Item::Table(Table::new()));
            state
                .get_mut(key)
                .and_then(Item::as_table_like_mut)
                .expect("just inserted")
        }
    };
    for (name, item) in snippets::trust_fields(hash) {
        entry.insert(&name, item);
    }
    Ok(true)
}

/// Removes the trust entry for `key` (the whole `[hooks.state."key"]` table) and the
/// implicit `hooks.state` / `hooks` parents it leaves empty. Returns whether it changed.
pub fn remove(doc: &mut DocumentMut, key: &str) -> bool {
    let Some(state) = doc
        .get_mut("hooks")
        .and_then(|h| h.get_mut("state"))
        .and_then(Item::as_table_like_mut)
    else {
        return false;
    };
    if state.remove(key).is_none() {
        return false;
    }
    let hooks = doc["hooks"].as_table_like_mut().expect("walked above");
    if is_empty_implicit(hooks.get("state")) {
        hooks.remove("state");
    }
    if is_empty_implicit(doc.get("hooks")) {
        doc.remove("hooks");
    }
    true
}

fn is_empty_implicit(item: Option<&Item>) -> bool {
    match item {
        Some(Item::Table(t)) => t.is_empty() && (t.is_implicit() || t.is_dotted()),
        _ => false,
    }
}

/// Gets `parent[name]` as a table, creating an implicit one (no header of its own) when
/// missing. Inline tables are not tables here: `Err` asks the person to fix the type.
fn child_table<'a>(parent: &'a mut Table, name: &str, path: &str) -> Result<&'a mut Table, String> {
    let item = parent.entry(name).or_insert_with(|| {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    });
    item.as_table_mut()
        .ok_or_else(|| format!("`{path}` must be a table ([{path}])"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(command: &str) -> (Map<String, Value>, Value) {
        let handler = json!({"type": "command", "command": command, "timeout": 600});
        let group = json!({"matcher": "*", "hooks": [handler.clone()]});
        (group.as_object().unwrap().clone(), handler)
    }

    #[test]
    fn hash_matches_the_recipe() {
        // Expected value computed independently (Python: json.dumps(sort_keys=True,
        // separators=(",", ":"), ensure_ascii=False), then sha256).
        let (g, h) = group("/usr/local/bin/agentnotify-hook codex ask-permission --timeout 590");
        assert_eq!(
            trust_hash(&g, &h),
            "sha256:3a3bd1dae4623dad2fe17e34accd778abf2908a29dcf082890af023d68e8bf1d"
        );
        let (g, h) =
            group("'/home/zoë/my bin/agentnotify-hook' codex ask-permission --timeout 590");
        assert_eq!(
            trust_hash(&g, &h),
            "sha256:5b77caafe3b7d62b75fe41de8fab3b9e3236d66d144694e49b91b57fd39c2c4d"
        );
    }

    #[test]
    fn key_names_the_file_and_position() {
        assert_eq!(
            trust_key(
                Path::new("/h/.codex/hooks.json"),
                Position {
                    group: 2,
                    handler: 1
                }
            ),
            "/h/.codex/hooks.json:permission_request:2:1"
        );
    }

    const CONFIG: &str = "# my codex config\nmodel = \"o3\" # inline comment\n\n[projects.\"/src/app\"]\ntrust_level = \"trusted\"\n\n# trailing comment\n";

    #[test]
    fn set_and_remove_preserve_everything_else() {
        let mut doc: DocumentMut = CONFIG.parse().unwrap();
        assert!(set_trusted(
            &mut doc,
            "/h/hooks.json:permission_request:0:0",
            "sha256:ab"
        )
        .unwrap());
        let text = doc.to_string();
        assert!(
            text.starts_with(CONFIG.trim_end_matches("# trailing comment\n")),
            "{text}"
        );
        assert!(text.contains("[hooks.state.\"/h/hooks.json:permission_request:0:0\"]\ntrusted_hash = \"sha256:ab\"\n"), "{text}");
        assert!(
            !text.contains("[hooks]") && !text.contains("[hooks.state]\n"),
            "{text}"
        );

        let mut again: DocumentMut = text.parse().unwrap();
        assert!(!set_trusted(
            &mut again,
            "/h/hooks.json:permission_request:0:0",
            "sha256:ab"
        )
        .unwrap());
        assert!(set_trusted(
            &mut again,
            "/h/hooks.json:permission_request:0:0",
            "sha256:cd"
        )
        .unwrap());
        let updated = again.to_string();
        assert_eq!(updated.matches("[hooks.state.").count(), 1, "{updated}");
        assert_eq!(
            state(&again, "/h/hooks.json:permission_request:0:0", "sha256:cd"),
            TrustState::Trusted
        );
        assert_eq!(
            state(&again, "/h/hooks.json:permission_request:0:0", "sha256:ab"),
            TrustState::Modified
        );
        assert_eq!(
            state(&again, "/h/hooks.json:permission_request:0:1", "sha256:ab"),
            TrustState::Untrusted
        );

        assert!(remove(&mut again, "/h/hooks.json:permission_request:0:0"));
        assert!(again.get("hooks").is_none());
        let reparsed: toml::Table = again.to_string().parse().unwrap();
        assert_eq!(reparsed, CONFIG.parse::<toml::Table>().unwrap());
    }

    #[test]
    fn remove_keeps_other_trust_entries() {
        let text = "[hooks.state.\"other:stop:0:0\"]\ntrusted_hash = \"sha256:00\"\n";
        let mut doc: DocumentMut = text.parse().unwrap();
        set_trusted(&mut doc, "mine:permission_request:0:0", "sha256:11").unwrap();
        assert!(remove(&mut doc, "mine:permission_request:0:0"));
        assert_eq!(doc.to_string(), text);
        assert!(!remove(&mut doc, "mine:permission_request:0:0"));
    }

    #[test]
    fn wrong_types_are_reported() {
        let mut doc: DocumentMut = "hooks = 3\n".parse().unwrap();
        assert!(set_trusted(&mut doc, "k", "sha256:00").is_err());
        assert_eq!(doc.to_string(), "hooks = 3\n");
    }

    #[test]
    fn feature_switch_is_read() {
        let doc: DocumentMut = "[features]\nhooks = false\n".parse().unwrap();
        assert_eq!(hooks_feature_off(&doc), Some("hooks"));
        let doc: DocumentMut = "[features]\nhooks = true\n".parse().unwrap();
        assert_eq!(hooks_feature_off(&doc), None);
    }
}
