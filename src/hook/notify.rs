//! Notify-only hooks (SPEC §11.7): `agentnotify-hook <claude|codex> notify` turns a host's
//! Stop / SubagentStop / StopFailure / Notification / SessionEnd event into a notification
//! ("Claude finished in shop"), keyed per session so repeats update one in place.
//!
//! It never blocks the host and never changes what the host does: it prints nothing (a
//! Stop hook's output could keep the agent going), exits 0 at once, and leaves posting to a
//! detached child of its own (`notify --post`), which attaches to or starts the broker.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::payload::{truncate, Host};
use crate::client;
use crate::paths::Paths;

/// The notification a host event becomes, or `None` for events that need none (Claude's
/// `Notification` about a permission prompt: the question itself is already out).
pub fn plan(host: Host, event: &Value) -> Option<Value> {
    let name = match host {
        Host::Claude => "Claude",
        Host::Codex => "Codex",
    };
    let project = event["cwd"]
        .as_str()
        .and_then(|c| std::path::Path::new(c).file_name())
        .and_then(|n| n.to_str())
        .map(str::to_string);
    let place = project
        .as_deref()
        .map(|p| format!(" in {p}"))
        .unwrap_or_default();
    let last = event["last_assistant_message"]
        .as_str()
        .filter(|m| !m.trim().is_empty())
        .map(|m| truncate(m.trim(), 500));
    let (kind, priority, title, message) = match event["hook_event_name"].as_str()? {
        "Stop" => (
            "completed",
            "normal",
            format!("{name} finished{place}"),
            last.unwrap_or_else(|| format!("{name} is waiting for your next prompt.")),
        ),
        "SubagentStop" if host == Host::Claude => (
            "completed",
            "low",
            format!("{name}'s subagent finished{place}"),
            last.unwrap_or_else(|| "A subagent finished its task.".into()),
        ),
        "StopFailure" if host == Host::Claude => (
            "error",
            "high",
            format!("{name} stopped with an error{place}"),
            format!(
                "Error: {}.",
                event["error"]
                    .as_str()
                    .map(|e| truncate(e, 64))
                    .unwrap_or_else(|| "unknown".into())
            ),
        ),
        "Notification" if host == Host::Claude => {
            match event["notification_type"].as_str().unwrap_or("") {
                // The PermissionRequest hook has already asked the question.
                "permission_prompt" => return None,
                "idle_prompt" | "agent_needs_input" | "elicitation_dialog" => (
                    "input_required",
                    "high",
                    format!("{name} is waiting for you{place}"),
                    event["message"]
                        .as_str()
                        .map(|m| truncate(m, 500))
                        .unwrap_or_else(|| format!("{name} needs your input.")),
                ),
                "agent_completed" => (
                    "completed",
                    "normal",
                    format!("{name} finished{place}"),
                    format!("{name} is waiting for your next prompt."),
                ),
                _ => return None,
            }
        }
        // The same title as Stop: it updates that notification in place, and what the person
        // needs to know is the same (nothing is running any more).
        "SessionEnd" => (
            "completed",
            "low",
            format!("{name} finished{place}"),
            format!(
                "The session ended ({}).",
                event["reason"]
                    .as_str()
                    .map(|r| truncate(r, 32))
                    .unwrap_or_else(|| "other".into())
            ),
        ),
        _ => return None,
    };
    let session = event["session_id"].as_str().unwrap_or("none");
    let mut body = json!({
        "title": truncate(&title, 200),
        "message": message,
        "type": kind,
        "priority": priority,
        "agent": host.as_str(),
        "key": truncate(&format!("{}:session:{session}", host.as_str()), 200),
        "metadata": {"event": event["hook_event_name"], "session_id": session},
    });
    if let Some(p) = project {
        body["project"] = json!(truncate(&p, 200));
    }
    Some(body)
}

/// The hook side: plan, hand to a detached poster, return. Prints nothing.
pub fn notify(host: Host, stdin: &[u8]) {
    let Ok(event) = serde_json::from_slice::<Value>(stdin) else {
        return;
    };
    let Some(body) = plan(host, &event) else {
        return;
    };
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let mut cmd = Command::new(me);
    cmd.args([host.as_str(), "notify", "--post"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own session: the host may kill the hook's process group once it returns.
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    if let Ok(mut child) = cmd.spawn() {
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(body.to_string().as_bytes());
        }
    }
}

/// The detached poster: attach to (or start) the broker and post the notification.
pub fn post(stdin: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(stdin) else {
        return;
    };
    let Ok(paths) = Paths::from_env() else {
        return;
    };
    let _log = crate::logging::init_blocking(&paths, "hook", "info");
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    // Checked by the model's rules before any broker is started for it.
    let request = match crate::model::NotificationRequest::from_json(&body) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e.0, "notification not posted: not a valid notification");
            return;
        }
    };
    runtime.block_on(async {
        let posted = async {
            let client = client::attach_or_spawn(&paths).await?;
            client.notify(&request).await
        };
        match tokio::time::timeout(std::time::Duration::from_secs(10), posted).await {
            Ok(Ok(n)) => tracing::info!(id = %n.id, "notification posted"),
            Ok(Err(e)) => tracing::warn!(error = %e, "notification not posted"),
            Err(_) => tracing::warn!("notification not posted: timed out"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_becomes_finished_in_the_project_keyed_per_session() {
        let n = plan(
            Host::Claude,
            &json!({"hook_event_name": "Stop", "cwd": "/home/dev/shop", "session_id": "s1", "stop_hook_active": false}),
        )
        .unwrap();
        assert_eq!(n["title"], "Claude finished in shop");
        assert_eq!(n["type"], "completed");
        assert_eq!(n["project"], "shop");
        assert_eq!(n["key"], "claude:session:s1");
        let again = plan(
            Host::Claude,
            &json!({"hook_event_name": "SessionEnd", "cwd": "/home/dev/shop", "session_id": "s1", "reason": "other"}),
        )
        .unwrap();
        assert_eq!(again["key"], n["key"], "one notification per session");
    }

    #[test]
    fn a_permission_prompt_notification_is_skipped_and_idle_is_input_required() {
        let skip = json!({"hook_event_name": "Notification", "notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"});
        assert!(plan(Host::Claude, &skip).is_none());
        let idle = json!({"hook_event_name": "Notification", "notification_type": "idle_prompt", "message": "Claude is waiting for your input", "cwd": "/x/shop", "session_id": "s"});
        assert_eq!(plan(Host::Claude, &idle).unwrap()["type"], "input_required");
        let codex = json!({"hook_event_name": "Stop", "cwd": "/x/shop", "session_id": "t", "last_assistant_message": "Done: tests pass."});
        let n = plan(Host::Codex, &codex).unwrap();
        assert_eq!(n["title"], "Codex finished in shop");
        assert_eq!(n["message"], "Done: tests pass.");
        assert!(plan(Host::Codex, &json!({"hook_event_name": "PreToolUse"})).is_none());
    }
}
