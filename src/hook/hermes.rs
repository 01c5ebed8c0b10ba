//! `agentnotify-hook hermes ask-approval` (SPEC §10.2): the broker side of our Hermes
//! approval transport (`harness/hermes/agentnotify/__init__.py`).
//!
//! The plugin hands over Hermes' `ApprovalRequest` as JSON on stdin; this opens one
//! permission question offering exactly the host's `allowed_choices`, keyed by its
//! `request_id`, waits within Hermes' own approval timeout, and prints the chosen choice id
//! (`once`, `session`, `always` or `deny`) as one line. Anything else prints nothing: the
//! plugin then raises, and Hermes blocks the command (or falls back to its own prompt).
//! The plugin calls this binary rather than speaking HTTP itself, so discovery, the token,
//! the broker's proof, spawning and the owner lease live in one place.

use std::time::Duration;

use serde_json::{json, Value};

use super::payload::{truncate, Question};
use crate::model::interaction::BODY_MAX;

/// How long before Hermes' deadline we give up, so the host still gets our silence (and
/// our withdrawal) before it stops listening.
const MARGIN: Duration = Duration::from_secs(2);

/// Hermes' choices and how the person sees them.
const LABELS: &[(&str, &str)] = &[
    ("once", "Allow once"),
    ("session", "Allow for this session"),
    ("always", "Always allow"),
    ("deny", "Deny"),
];

/// What one approval request asks: the question, the choices Hermes accepts, the budget.
#[derive(Debug)]
pub struct Approval {
    pub question: Question,
    pub allowed: Vec<String>,
    pub budget: Duration,
}

/// Reads Hermes' request; `Err` names what is wrong (logged, never printed).
pub fn plan(
    request: &Value,
    max_budget: Duration,
    project: Option<&str>,
) -> Result<Approval, String> {
    let request_id = request["request_id"]
        .as_str()
        .filter(|id| crate::model::fields::is_token_id(id))
        .ok_or("request_id must match ^[A-Za-z0-9_-]{1,64}$")?;
    let command = request["command"]
        .as_str()
        .filter(|c| !c.trim().is_empty())
        .ok_or("command must be a non-empty string")?;
    if command.chars().count() > BODY_MAX {
        return Err(format!("command is over {BODY_MAX} characters"));
    }
    let timeout = request["timeout_seconds"]
        .as_f64()
        .filter(|t| t.is_finite() && *t > 0.0)
        .ok_or("timeout_seconds must be a positive number")?;
    let budget = Duration::from_secs_f64(timeout.min(3600.0))
        .saturating_sub(MARGIN)
        .min(max_budget);
    if budget.is_zero() {
        return Err("timeout_seconds leaves no time to ask".into());
    }
    let allowed: Vec<String> = request["allowed_choices"]
        .as_array()
        .ok_or("allowed_choices must be an array")?
        .iter()
        .map(|c| c.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or("allowed_choices must hold strings")?;
    let mut choices = Vec::new();
    for c in &allowed {
        let (_, label) = LABELS
            .iter()
            .find(|(id, _)| id == c)
            .ok_or("allowed_choices holds a choice Hermes does not define")?;
        choices.push(json!({"id": c, "label": label}));
    }
    if !allowed.iter().any(|c| c == "deny") || allowed.len() < 2 {
        return Err("allowed_choices must offer deny and at least one allow".into());
    }
    let description = request["description"].as_str().unwrap_or("").trim();
    let prompt = if description.is_empty() {
        "Hermes wants to run a command".to_string()
    } else {
        truncate(
            &format!("Hermes wants to run a command: {description}"),
            2000,
        )
    };
    let key = format!("hermes-{request_id}");
    let title = match project {
        Some(p) => format!("Hermes needs permission in {p}"),
        None => "Hermes needs permission".to_string(),
    };
    let ttl = budget.as_secs().clamp(30, 3600);
    Ok(Approval {
        question: Question {
            request: json!({
                "key": key,
                "agent": "hermes",
                "project": project,
                "native_request_id": request_id,
                "kind": "permission",
                "prompt": prompt,
                "body": command,
                "choices": choices,
                "ttl_seconds": ttl,
                "owner_lease": true,
            }),
            notification: json!({
                "title": truncate(&title, 200),
                "message": truncate(command.lines().next().unwrap_or(""), 4000),
                "type": "permission_required",
                "priority": "high",
                "agent": "hermes",
                "project": project,
                "key": format!("{key}-notify"),
            }),
            option_labels: Vec::new(),
            question_text: None,
            multi: false,
        },
        allowed,
        budget,
    })
}

/// The whole flow: the chosen choice id, or `None` (print nothing).
pub fn ask(stdin: &[u8], max_budget: Duration) -> Option<String> {
    let request: Value = serde_json::from_slice(stdin).ok()?;
    let project = std::env::current_dir()
        .ok()
        .and_then(|d| d.to_str().and_then(crate::model::fields::project_of));
    let approval = match plan(&request, max_budget, project.as_deref()) {
        Ok(a) => a,
        Err(why) => {
            if let Ok(paths) = crate::paths::Paths::from_env() {
                let _log = crate::logging::init_blocking(&paths, "hook", "info");
                tracing::info!(reason = %why, "hermes request not asked");
            }
            return None;
        }
    };
    let record = super::run::ask_question(approval.question, approval.budget)?;
    let choice = record.response?.choice_id?;
    approval.allowed.contains(&choice).then_some(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Value {
        json!({"schema_version": 1, "request_id": "d7e1e7f2aa", "digest": "74", "command": "rm -rf build",
               "description": "delete in root path", "pattern_key": "delete in root path",
               "pattern_keys": ["delete in root path"], "surface": "cli", "timeout_seconds": 20,
               "allowed_choices": ["once", "session", "always", "deny"]})
    }

    #[test]
    fn offers_the_hosts_own_choices_keyed_by_request_id_within_its_timeout() {
        let a = plan(&request(), Duration::from_secs(590), Some("shop")).unwrap();
        let r = &a.question.request;
        assert_eq!(r["key"], "hermes-d7e1e7f2aa");
        assert_eq!(r["body"], "rm -rf build");
        let labels: Vec<_> = r["choices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["label"].clone())
            .collect();
        assert_eq!(
            labels,
            [
                "Allow once",
                "Allow for this session",
                "Always allow",
                "Deny"
            ]
        );
        assert_eq!(a.budget, Duration::from_secs(18));
        assert!(crate::model::InteractionRequest::from_json(r).is_ok());
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        for (field, value) in [
            ("request_id", json!("a b")),
            ("command", json!("")),
            ("timeout_seconds", json!(0)),
            ("allowed_choices", json!(["once", "yolo", "deny"])),
            ("allowed_choices", json!(["once"])),
        ] {
            let mut r = request();
            r[field] = value;
            let err = plan(&r, Duration::from_secs(590), None).unwrap_err();
            assert!(err.contains(field), "{err}");
        }
    }
}
