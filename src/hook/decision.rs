//! Answers → the host's decision JSON (SPEC §6 item 5). Codex gets only `behavior` and
//! `message`, whatever was asked: it drops any decision carrying another field.

use serde::Serialize;
use serde_json::Value;

use super::payload::Host;

/// What the person decided, in host-neutral terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow,
    /// Allow and remember (Claude's `updatedPermissions`).
    AllowAlways(Value),
    /// Allow with a replacement tool input (Claude AskUserQuestion answers).
    AllowWithInput(Value),
    Deny,
}

pub const DENY_MESSAGE: &str = "Denied via agentnotify";

/// The hook event a decision answers: Claude reads a `PreToolUse` decision in its own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    PermissionRequest,
    /// Claude's AskUserQuestion outside the default permission mode (SPEC §13.3).
    PreToolUse,
}

/// `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":…}}`.
#[derive(Serialize)]
struct PreToolUseOutput<'a> {
    #[serde(rename = "hookSpecificOutput")]
    hook_specific_output: PreToolUseSpecific<'a>,
}

#[derive(Serialize)]
struct PreToolUseSpecific<'a> {
    #[serde(rename = "hookEventName")]
    hook_event_name: &'static str,
    #[serde(rename = "permissionDecision")]
    permission_decision: &'static str,
    #[serde(
        rename = "permissionDecisionReason",
        skip_serializing_if = "Option::is_none"
    )]
    reason: Option<&'static str>,
    #[serde(rename = "updatedInput", skip_serializing_if = "Option::is_none")]
    updated_input: Option<&'a Value>,
}

#[derive(Serialize)]
struct Output<'a> {
    #[serde(rename = "hookSpecificOutput")]
    hook_specific_output: Specific<'a>,
}

#[derive(Serialize)]
struct Specific<'a> {
    #[serde(rename = "hookEventName")]
    hook_event_name: &'static str,
    decision: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    behavior: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'static str>,
    #[serde(rename = "updatedInput", skip_serializing_if = "Option::is_none")]
    updated_input: Option<&'a Value>,
    #[serde(rename = "updatedPermissions", skip_serializing_if = "Option::is_none")]
    updated_permissions: Option<&'a Value>,
}

impl Decision {
    /// The one line printed on stdout for `event` (without the newline).
    pub fn render_for(&self, host: Host, event: Event) -> String {
        if event == Event::PermissionRequest || host != Host::Claude {
            return self.render(host);
        }
        let deny = *self == Decision::Deny;
        let out = PreToolUseOutput {
            hook_specific_output: PreToolUseSpecific {
                hook_event_name: "PreToolUse",
                permission_decision: if deny { "deny" } else { "allow" },
                reason: deny.then_some(DENY_MESSAGE),
                updated_input: match self {
                    Decision::AllowWithInput(v) => Some(v),
                    _ => None,
                },
            },
        };
        serde_json::to_string(&out).expect("decision always serialises")
    }

    /// The one line printed on stdout for a `PermissionRequest` (without the newline).
    pub fn render(&self, host: Host) -> String {
        let claude = host == Host::Claude;
        let body = match self {
            Decision::Deny => Body {
                behavior: "deny",
                message: Some(DENY_MESSAGE),
                updated_input: None,
                updated_permissions: None,
            },
            other => Body {
                behavior: "allow",
                message: None,
                updated_input: match other {
                    Decision::AllowWithInput(v) if claude => Some(v),
                    _ => None,
                },
                updated_permissions: match other {
                    Decision::AllowAlways(v) if claude => Some(v),
                    _ => None,
                },
            },
        };
        let out = Output {
            hook_specific_output: Specific {
                hook_event_name: "PermissionRequest",
                decision: body,
            },
        };
        serde_json::to_string(&out).expect("decision always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn allow_and_deny_are_exactly_the_spec_bytes() {
        for host in [Host::Claude, Host::Codex] {
            assert_eq!(
                Decision::Allow.render(host),
                r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}"#
            );
            assert_eq!(
                Decision::Deny.render(host),
                r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"Denied via agentnotify"}}}"#
            );
        }
    }

    #[test]
    fn pre_tool_use_decisions_have_claudes_pre_tool_use_shape() {
        let input = json!({"questions": [], "answers": {"Q?": "A"}});
        assert_eq!(
            Decision::AllowWithInput(input).render_for(Host::Claude, Event::PreToolUse),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"questions":[],"answers":{"Q?":"A"}}}}"#
        );
        assert_eq!(
            Decision::Deny.render_for(Host::Claude, Event::PreToolUse),
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Denied via agentnotify"}}"#
        );
    }

    #[test]
    fn codex_never_gets_extras() {
        let s = json!([{"type": "setMode", "mode": "acceptEdits"}]);
        assert_eq!(
            Decision::AllowAlways(s.clone()).render(Host::Codex),
            Decision::Allow.render(Host::Codex)
        );
        assert_eq!(
            Decision::AllowWithInput(s.clone()).render(Host::Codex),
            Decision::Allow.render(Host::Codex)
        );
        assert!(Decision::AllowAlways(s)
            .render(Host::Claude)
            .contains("updatedPermissions"));
    }
}
