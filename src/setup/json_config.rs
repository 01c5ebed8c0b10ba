//! Pure edits of a host's JSON hook file: add or replace our `PermissionRequest` handler,
//! remove it again, and render the result.
//!
//! Claude's `settings.json` and Codex's `hooks.json` share the relevant shape:
//! `{"hooks":{"PermissionRequest":[{"matcher":"*","hooks":[{handler}]}]}}`. Everything
//! else in the document is left exactly where it was (`serde_json` keeps key order here).

use serde_json::{Map, Value};

use super::command::parse_hook_command_for;

/// The hook event we install under.
pub const EVENT: &str = "PermissionRequest";

/// Where one kind of handler of ours lives: the event, the group's matcher, and the
/// bridge action its command runs.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub event: &'static str,
    pub matcher: &'static str,
    pub action: &'static str,
    /// Recognises our handler of this slot.
    pub mine: fn(&Value) -> bool,
}

/// The PermissionRequest handler: every tool.
pub const PERMISSION: Slot = Slot {
    event: EVENT,
    matcher: "*",
    action: "ask-permission",
    mine: is_ours,
};

/// Claude only: AskUserQuestion outside the default permission mode (SPEC §13.3).
pub const ASK_PRE_TOOL_USE: Slot = Slot {
    event: "PreToolUse",
    matcher: "AskUserQuestion",
    action: "pre-tool-use",
    mine: is_ours_pre_tool_use,
};

/// True when a handler runs our bridge's `pre-tool-use`.
fn is_ours_pre_tool_use(handler: &Value) -> bool {
    is_ours_at(handler, &ASK_PRE_TOOL_USE)
}

/// Where a handler sits: index of its group in the event's array, and within the group.
/// Codex names trust entries by exactly these two numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub group: usize,
    pub handler: usize,
}

/// A value of the wrong type on the path we must edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeProblem {
    RootNotObject(&'static str),
    HooksNotObject(&'static str),
    EventNotArray(&'static str),
    /// `hooks.<event>` of another slot is not an array.
    SlotNotArray(&'static str, &'static str),
}

impl std::fmt::Display for ShapeProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShapeProblem::RootNotObject(t) => {
                write!(f, "the top level must be a JSON object but is {t}")
            }
            ShapeProblem::HooksNotObject(t) => write!(f, "\"hooks\" must be an object but is {t}"),
            ShapeProblem::EventNotArray(t) => {
                write!(f, "\"hooks\".\"{EVENT}\" must be an array but is {t}")
            }
            ShapeProblem::SlotNotArray(event, t) => {
                write!(f, "\"hooks\".\"{event}\" must be an array but is {t}")
            }
        }
    }
}

/// "an array", "a string", … for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks the types on the path `hooks.PermissionRequest` (absent parts are fine).
pub fn check_shape(root: &Value) -> Result<(), ShapeProblem> {
    check_shape_at(root, &PERMISSION)
}

/// Checks the types on the path `hooks.<slot's event>` (absent parts are fine).
pub fn check_shape_at(root: &Value, slot: &Slot) -> Result<(), ShapeProblem> {
    let root = root
        .as_object()
        .ok_or_else(|| ShapeProblem::RootNotObject(type_name(root)))?;
    let Some(hooks) = root.get("hooks") else {
        return Ok(());
    };
    let hooks = hooks
        .as_object()
        .ok_or_else(|| ShapeProblem::HooksNotObject(type_name(hooks)))?;
    match hooks.get(slot.event) {
        Some(event) if !event.is_array() && slot.event == EVENT => {
            Err(ShapeProblem::EventNotArray(type_name(event)))
        }
        Some(event) if !event.is_array() => {
            Err(ShapeProblem::SlotNotArray(slot.event, type_name(event)))
        }
        _ => Ok(()),
    }
}

/// `--force`: replaces each wrong-typed value on our path with an empty container.
/// Returns the problems it overrode, for the report.
pub fn repair_shape(root: &mut Value) -> Vec<ShapeProblem> {
    let mut fixed = Vec::new();
    while let Err(problem) = check_shape(root) {
        match problem {
            ShapeProblem::RootNotObject(_) => *root = Value::Object(Map::new()),
            ShapeProblem::HooksNotObject(_) => root["hooks"] = Value::Object(Map::new()),
            ShapeProblem::EventNotArray(_) => root["hooks"][EVENT] = Value::Array(Vec::new()),
            ShapeProblem::SlotNotArray(..) => unreachable!("check_shape checks PermissionRequest"),
        }
        fixed.push(problem);
    }
    fixed
}

/// True when a handler runs our bridge (`agentnotify-hook … ask-permission`).
pub fn is_ours(handler: &Value) -> bool {
    is_ours_at(handler, &PERMISSION)
}

/// True when a handler runs our bridge with the slot's action.
pub fn is_ours_at(handler: &Value, slot: &Slot) -> bool {
    handler
        .get("command")
        .and_then(Value::as_str)
        .and_then(|line| parse_hook_command_for(line, slot.action))
        .is_some()
}

/// One of our handlers found in a document.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    pub position: Position,
    pub group: &'a Map<String, Value>,
    pub handler: &'a Value,
}

/// Our handlers in document order. Malformed groups (not objects, no `hooks` array)
/// belong to someone else and are skipped, never touched.
pub fn find_ours(root: &Value) -> Vec<Found<'_>> {
    find_in(root, EVENT, is_ours)
}

/// Our handlers of one slot, in document order.
pub fn find_ours_at<'a>(root: &'a Value, slot: &Slot) -> Vec<Found<'a>> {
    find_in(root, slot.event, slot.mine)
}

/// The handlers `mine` recognises under `event`, in document order.
pub fn find_in<'a>(root: &'a Value, event: &str, mine: fn(&Value) -> bool) -> Vec<Found<'a>> {
    let Some(groups) = root
        .get("hooks")
        .and_then(|h| h.get(event))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let Some(group) = group.as_object() else {
            continue;
        };
        let Some(handlers) = group.get("hooks").and_then(Value::as_array) else {
            continue;
        };
        for (h, handler) in handlers.iter().enumerate() {
            if mine(handler) {
                found.push(Found {
                    position: Position {
                        group: g,
                        handler: h,
                    },
                    group,
                    handler,
                });
            }
        }
    }
    found
}

/// What [`upsert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upsert {
    /// No handler of ours was there; a new group was appended.
    Added,
    /// Ours was there and was rewritten in place (and any duplicates dropped).
    Updated,
    /// Ours was there exactly as wanted.
    Unchanged,
}

/// Puts our handler into the document: replaces the first handler of ours in place with
/// the one in `group` (a [`super::snippets::hook_group`]), drops any further copies, or
/// appends `group` after every existing one (appending keeps the positions, and so the
/// Codex trust, of every other hook).
pub fn upsert(root: &mut Value, group: Value) -> Result<(Upsert, Position), ShapeProblem> {
    check_shape(root)?;
    Ok(upsert_in(root, EVENT, group, is_ours))
}

/// [`upsert`] for one slot.
pub fn upsert_at(
    root: &mut Value,
    group: Value,
    slot: &Slot,
) -> Result<(Upsert, Position), ShapeProblem> {
    check_shape_at(root, slot)?;
    Ok(upsert_in(root, slot.event, group, slot.mine))
}

/// [`upsert`] for any event and recogniser; the shape of `hooks.<event>` must be checked.
pub fn upsert_in(
    root: &mut Value,
    event: &str,
    group: Value,
    mine: fn(&Value) -> bool,
) -> (Upsert, Position) {
    let handler = group["hooks"][0].clone();
    let positions: Vec<Position> = find_in(root, event, mine)
        .iter()
        .map(|f| f.position)
        .collect();
    let Some((&first, duplicates)) = positions.split_first() else {
        let hooks = root
            .as_object_mut()
            .expect("checked: object")
            .entry("hooks")
            .or_insert_with(|| Value::Object(Map::new()));
        let groups = hooks
            .as_object_mut()
            .expect("checked: object")
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .expect("checked: array");
        groups.push(group);
        let position = Position {
            group: groups.len() - 1,
            handler: 0,
        };
        return (Upsert::Added, position);
    };
    let groups = event_groups_mut(root, event).expect("found ours, so the path exists");
    let place = &mut groups[first.group]["hooks"][first.handler];
    let mut action = Upsert::Unchanged;
    if *place != handler {
        *place = handler;
        action = Upsert::Updated;
    }
    if !duplicates.is_empty() {
        remove_positions(groups, duplicates);
        action = Upsert::Updated;
    }
    (action, first)
}

/// Removes every handler of ours, then prunes the groups, the event list and the
/// `hooks` object that this removal left empty. An emptied container that also exists in
/// `original` (the pre-install copy) is kept, so the result can match it again.
/// Returns the positions removed (as they were before removal).
pub fn remove_ours(
    root: &mut Value,
    original: Option<&Value>,
) -> Result<Vec<Position>, ShapeProblem> {
    check_shape(root)?;
    Ok(remove_in(root, EVENT, is_ours, original))
}

/// [`remove_ours`] for one slot.
pub fn remove_ours_at(
    root: &mut Value,
    original: Option<&Value>,
    slot: &Slot,
) -> Result<Vec<Position>, ShapeProblem> {
    check_shape_at(root, slot)?;
    Ok(remove_in(root, slot.event, slot.mine, original))
}

/// [`remove_ours`] for any event and recogniser; the shape must be checked.
pub fn remove_in(
    root: &mut Value,
    event: &str,
    mine: fn(&Value) -> bool,
    original: Option<&Value>,
) -> Vec<Position> {
    let positions: Vec<Position> = find_in(root, event, mine)
        .iter()
        .map(|f| f.position)
        .collect();
    if positions.is_empty() {
        return positions;
    }
    let groups = event_groups_mut(root, event).expect("found ours, so the path exists");
    remove_positions(groups, &positions);
    let had = |path: &[&str]| {
        original.is_some_and(|o| path.iter().try_fold(o, |v, key| v.get(key)).is_some())
    };
    let hooks = root["hooks"].as_object_mut().expect("checked: object");
    if hooks[event].as_array().is_some_and(Vec::is_empty) && !had(&["hooks", event]) {
        hooks.shift_remove(event);
    }
    if hooks.is_empty() && !had(&["hooks"]) {
        root.as_object_mut()
            .expect("checked: object")
            .shift_remove("hooks");
    }
    positions
}

/// Whether `hooks.<event>`, where present, is an array (the root and `hooks` are checked
/// by [`check_shape`]).
pub fn event_is_array(root: &Value, event: &str) -> bool {
    root.get("hooks")
        .and_then(|h| h.get(event))
        .is_none_or(Value::is_array)
}

fn event_groups_mut<'a>(root: &'a mut Value, event: &str) -> Option<&'a mut Vec<Value>> {
    root.get_mut("hooks")?.get_mut(event)?.as_array_mut()
}

/// Removes handlers at `positions` (document order) and drops groups emptied by it.
fn remove_positions(groups: &mut Vec<Value>, positions: &[Position]) {
    for position in positions.iter().rev() {
        let handlers = groups[position.group]["hooks"]
            .as_array_mut()
            .expect("found ours, so this is an array");
        handlers.remove(position.handler);
        if handlers.is_empty() {
            groups.remove(position.group);
        }
    }
}

/// Parses a hook file. An empty (or whitespace-only) file counts as `{}`.
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(text)
}

/// The indentation the file already uses (first indented line), else two spaces.
pub fn detect_indent(text: &str) -> String {
    text.lines()
        .skip(1)
        .map(|line| {
            let content = line.trim_start_matches([' ', '\t']);
            (&line[..line.len() - content.len()], content)
        })
        .find(|(indent, content)| !indent.is_empty() && !content.is_empty())
        .map(|(indent, _)| indent)
        .filter(|indent| indent.chars().all(|c| c == ' ') || indent.chars().all(|c| c == '\t'))
        .unwrap_or("  ")
        .to_string()
}

/// Pretty JSON with the given indentation and a trailing newline.
pub fn render(value: &Value, indent: &str) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut ser)
        .expect("serialising a Value to memory cannot fail");
    let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::command::HookCommand;
    use crate::setup::host::Host;
    use crate::setup::snippets::hook_group;
    use serde_json::json;

    /// Our group, as install merges it.
    fn our_group(exe: &str, budget: u64) -> Value {
        hook_group(&HookCommand {
            host: Host::Claude,
            exe: exe.into(),
            budget_secs: budget,
        })
    }

    /// Our handler, as found in a file.
    fn ours(exe: &str, budget: u64) -> Value {
        our_group(exe, budget)["hooks"][0].clone()
    }

    fn other(cmd: &str) -> Value {
        json!({"type": "command", "command": cmd})
    }

    #[test]
    fn adds_a_group_to_an_empty_document() {
        let mut doc = json!({});
        let (action, pos) = upsert(&mut doc, our_group("/b/agentnotify-hook", 590)).unwrap();
        assert_eq!(action, Upsert::Added);
        assert_eq!(
            pos,
            Position {
                group: 0,
                handler: 0
            }
        );
        assert_eq!(
            render(&doc, "  "),
            r#"{
  "hooks": {
    "PermissionRequest": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "/b/agentnotify-hook claude ask-permission --timeout 590",
            "timeout": 600
          }
        ]
      }
    ]
  }
}
"#
        );
    }

    #[test]
    fn appends_after_other_groups_and_keeps_order_of_everything_else() {
        let mut doc = json!({
            "z": 1, "hooks": {"PreToolUse": [], "PermissionRequest": [
                {"matcher": "Bash", "hooks": [other("/bin/audit")]}
            ]}, "a": 2
        });
        let (action, pos) = upsert(&mut doc, our_group("/b/agentnotify-hook", 590)).unwrap();
        assert_eq!(action, Upsert::Added);
        assert_eq!(
            pos,
            Position {
                group: 1,
                handler: 0
            }
        );
        let keys: Vec<&str> = doc
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys, ["z", "hooks", "a"]);
        let events: Vec<&str> = doc["hooks"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(events, ["PreToolUse", "PermissionRequest"]);
        assert_eq!(doc["hooks"][EVENT][0]["hooks"][0], other("/bin/audit"));
    }

    #[test]
    fn replaces_in_place_and_drops_duplicates() {
        let mut doc = json!({"hooks": {"PermissionRequest": [
            {"matcher": "*", "hooks": [other("/bin/a"), ours("/old/agentnotify-hook", 590)]},
            {"matcher": "*", "hooks": [ours("/older/agentnotify-hook", 100)]},
            {"matcher": "*", "hooks": [other("/bin/b")]}
        ]}});
        let new = ours("/new/agentnotify-hook", 30);
        let (action, pos) = upsert(&mut doc, our_group("/new/agentnotify-hook", 30)).unwrap();
        assert_eq!(action, Upsert::Updated);
        assert_eq!(
            pos,
            Position {
                group: 0,
                handler: 1
            }
        );
        assert_eq!(
            doc,
            json!({"hooks": {"PermissionRequest": [
                {"matcher": "*", "hooks": [other("/bin/a"), new.clone()]},
                {"matcher": "*", "hooks": [other("/bin/b")]}
            ]}})
        );
        let before = doc.clone();
        assert_eq!(
            upsert(&mut doc, our_group("/new/agentnotify-hook", 30))
                .unwrap()
                .0,
            Upsert::Unchanged
        );
        assert_eq!(doc, before);
    }

    #[test]
    fn wrong_types_are_refused_and_repairable() {
        for (mut doc, problem) in [
            (json!([]), ShapeProblem::RootNotObject("an array")),
            (
                json!({"hooks": []}),
                ShapeProblem::HooksNotObject("an array"),
            ),
            (
                json!({"hooks": {"PermissionRequest": {}}}),
                ShapeProblem::EventNotArray("an object"),
            ),
        ] {
            let before = doc.clone();
            assert_eq!(
                upsert(&mut doc, our_group("/b/agentnotify-hook", 590)),
                Err(problem.clone())
            );
            assert_eq!(doc, before, "untouched on refusal");
            assert_eq!(repair_shape(&mut doc), vec![problem]);
            assert!(upsert(&mut doc, our_group("/b/agentnotify-hook", 590)).is_ok());
        }
    }

    #[test]
    fn remove_prunes_only_what_it_emptied() {
        let mut doc = json!({"x": true, "hooks": {"PermissionRequest": [
            {"matcher": "*", "hooks": [other("/bin/a"), ours("/b/agentnotify-hook", 590)]},
            {"matcher": "*", "hooks": [ours("/b/agentnotify-hook", 590)]},
            {"matcher": "Bash", "hooks": []}
        ], "Stop": [{"hooks": [other("/bin/s")]}]}});
        let removed = remove_ours(&mut doc, None).unwrap();
        assert_eq!(
            removed,
            [
                Position {
                    group: 0,
                    handler: 1
                },
                Position {
                    group: 1,
                    handler: 0
                }
            ]
        );
        assert_eq!(
            doc,
            json!({"x": true, "hooks": {"PermissionRequest": [
                {"matcher": "*", "hooks": [other("/bin/a")]},
                {"matcher": "Bash", "hooks": []}
            ], "Stop": [{"hooks": [other("/bin/s")]}]}})
        );

        let mut doc = json!({"x": 1, "hooks": {"PermissionRequest": [
            {"matcher": "*", "hooks": [ours("/b/agentnotify-hook", 590)]}]}});
        remove_ours(&mut doc, None).unwrap();
        assert_eq!(doc, json!({"x": 1}));
    }

    #[test]
    fn remove_keeps_empty_containers_the_original_had() {
        let original = json!({"hooks": {}});
        let mut doc = original.clone();
        upsert(&mut doc, our_group("/b/agentnotify-hook", 590)).unwrap();
        remove_ours(&mut doc, Some(&original)).unwrap();
        assert_eq!(doc, original);
        let original = json!({"hooks": {"PermissionRequest": []}});
        let mut doc = original.clone();
        upsert(&mut doc, our_group("/b/agentnotify-hook", 590)).unwrap();
        remove_ours(&mut doc, Some(&original)).unwrap();
        assert_eq!(doc, original);
    }

    #[test]
    fn remove_without_ours_changes_nothing() {
        let mut doc = json!({"hooks": {}});
        assert!(remove_ours(&mut doc, None).unwrap().is_empty());
        assert_eq!(doc, json!({"hooks": {}}));
    }

    #[test]
    fn indentation_is_detected_and_kept() {
        assert_eq!(detect_indent("{\n    \"a\": 1\n}\n"), "    ");
        assert_eq!(detect_indent("{\n\t\"a\": 1\n}\n"), "\t");
        assert_eq!(detect_indent("{\"a\": 1}"), "  ");
        let text = "{\n    \"a\": [\n        1\n    ],\n    \"é\": \"ü\"\n}\n";
        assert_eq!(render(&parse(text).unwrap(), &detect_indent(text)), text);
    }

    #[test]
    fn empty_files_parse_as_empty_objects() {
        assert_eq!(parse("").unwrap(), json!({}));
        assert_eq!(parse(" \n").unwrap(), json!({}));
        assert!(parse("{").is_err());
    }
}
