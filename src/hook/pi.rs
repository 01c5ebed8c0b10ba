//! `agentnotify-hook pi gate [--timeout S]`: one gated Pi tool call, asked at the broker.
//!
//! Our Pi extension spawns this for each gated call while Pi's own dialog is open, and
//! kills it (SIGTERM) when that dialog is answered first: the question is then withdrawn.
//! Prints `{"decision":"allow"}` or `{"decision":"deny"}`, or nothing on any failure (the
//! dialog decides); always exits 0. The extension, not this process, talks to Pi: the
//! discovery, the token and the broker's proof stay in one Rust client.

use std::time::Duration;

use serde_json::{json, Value};

use super::payload::{truncate, Question};
use crate::model::digest::hex_sha256;
use crate::model::interaction::BODY_MAX;

/// The whole gate: `Some(true)` allow, `Some(false)` deny, `None` (print nothing) when
/// Pi's own dialog decides. The flow, its signals and its withdrawal are the hook's own
/// (`run::ask_question`).
pub fn ask(stdin: &[u8], budget: Duration) -> Option<bool> {
    let call: Value = serde_json::from_slice(stdin).ok()?;
    let Some(request) = question(&call, budget.as_secs()) else {
        if let Ok(paths) = crate::paths::Paths::from_env() {
            let _log = crate::logging::init_blocking(&paths, "hook", "info");
            tracing::info!("pi call not asked remotely; Pi's dialog decides");
        }
        return None;
    };
    let notification = json!({
        "title": "Pi needs permission",
        "message": truncate(request["prompt"].as_str().unwrap_or("").lines().next().unwrap_or(""), 4000),
        "type": "permission_required",
        "priority": "high",
        "agent": "pi",
        "project": request["project"],
        "key": request["key"].as_str().map(|k| format!("{k}-notify")),
    });
    let question = Question {
        request,
        notification,
        option_labels: Vec::new(),
        question_text: None,
        multi: false,
    };
    let record = super::run::ask_question(question, budget)?;
    match record.response?.choice_id?.as_str() {
        "allow-once" => Some(true),
        "deny" => Some(false),
        _ => None,
    }
}

/// What the person is asked for one call: a one-line prompt and, whole, what runs.
pub fn question(call: &Value, ttl_seconds: u64) -> Option<Value> {
    let tool = call["tool_name"].as_str().filter(|t| !t.is_empty())?;
    let input = &call["input"];
    let path = input["path"].as_str().unwrap_or("?");
    let (prompt, body) = match tool {
        "bash" => (
            "Pi wants to run a command".to_string(),
            input["command"].as_str()?.to_string(),
        ),
        "write" => (
            format!("Pi wants to write {path}"),
            input["content"].as_str().unwrap_or("").to_string(),
        ),
        "edit" => (
            format!("Pi wants to edit {path}"),
            serde_json::to_string_pretty(input).ok()?,
        ),
        other => (
            format!("Pi wants to use {other}"),
            serde_json::to_string_pretty(input).ok()?,
        ),
    };
    // Nothing is cut (SPEC §13.1): what does not fit is left to Pi's dialog.
    if body.chars().count() > BODY_MAX || prompt.chars().count() > 2000 {
        return None;
    }
    let project = call["cwd"]
        .as_str()
        .and_then(crate::model::fields::project_of);
    let fingerprint = json!([
        project,
        call["session_id"],
        call["tool_call_id"],
        tool,
        input
    ]);
    Some(json!({
        "key": format!("pi-{}", &hex_sha256(fingerprint.to_string().as_bytes())[..48]),
        "agent": "pi",
        "project": project,
        "session_id": call["session_id"].as_str(),
        "native_request_id": call["tool_call_id"].as_str(),
        "kind": "permission",
        "prompt": prompt,
        "body": if body.is_empty() { Value::Null } else { Value::String(body) },
        "ttl_seconds": ttl_seconds.clamp(30, 3600),
        "owner_lease": true,
    }))
}
