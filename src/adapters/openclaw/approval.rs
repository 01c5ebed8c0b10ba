//! One OpenClaw exec approval as the person sees it, and the way back: pure functions from
//! the Gateway's `exec.approval.requested` payload (or an `exec.approval.list` entry, the
//! same shape) to an interaction request, and from the answer to a Gateway decision.

use serde_json::{json, Value};

use crate::model::interaction::{TTL_MAX, TTL_MIN};
use crate::model::{Interaction, InteractionRequest, Invalid, Status};

/// The decisions OpenClaw knows, with the labels the person sees, in the order offered.
const DECISIONS: &[(&str, &str)] = &[
    ("allow-once", "Allow once"),
    ("allow-always", "Always allow"),
    ("deny", "Deny"),
];

/// A pending exec approval, read from the Gateway.
/// A short name for the Gateway at `url`, in every key its watcher makes. Two watchers (two
/// Gateways) sharing one broker each clean up only their own questions: without it, each
/// took the other's for approvals no longer pending and withdrew them.
pub fn gateway_scope(url: &str) -> String {
    crate::model::digest::hex_sha256(url.trim_end_matches('/').as_bytes())[..8].to_string()
}

/// The start of every key made for the Gateway `gateway` names.
pub fn key_prefix(gateway: &str) -> String {
    format!("openclaw:{gateway}:")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub id: String,
    pub command: String,
    pub cwd: Option<String>,
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
    /// The subset of [`DECISIONS`] OpenClaw accepts for this approval, in our order.
    pub allowed: Vec<&'static str>,
    pub expires_at_ms: Option<i64>,
}

/// Why a payload is not an approval we can ask about; OpenClaw's own route stays.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotAsked {
    #[error("the approval has no id")]
    NoId,
    #[error("the approval has no command")]
    NoCommand,
    #[error("the approval allows fewer than two known decisions")]
    TooFewDecisions,
    #[error("the question is not valid: {0}")]
    Invalid(String),
}

impl Approval {
    /// Reads a payload; anything unexpected is refused rather than guessed at.
    pub fn parse(payload: &Value) -> Result<Approval, NotAsked> {
        let id = non_empty(&payload["id"]).ok_or(NotAsked::NoId)?;
        let request = &payload["request"];
        let command = match non_empty(&request["command"]) {
            Some(c) => c,
            None => argv_command(&request["commandArgv"]).ok_or(NotAsked::NoCommand)?,
        };
        // Without a list the Gateway's own default for an ask-always policy applies.
        let offered: Vec<&str> = match request["allowedDecisions"].as_array() {
            Some(list) => list.iter().filter_map(Value::as_str).collect(),
            None => vec!["allow-once", "deny"],
        };
        let allowed: Vec<&'static str> = DECISIONS
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| offered.contains(id))
            .collect();
        if allowed.len() < 2 {
            return Err(NotAsked::TooFewDecisions);
        }
        Ok(Approval {
            id,
            command,
            cwd: non_empty(&request["cwd"]),
            agent_id: non_empty(&request["agentId"]),
            session_key: non_empty(&request["sessionKey"]),
            allowed,
            expires_at_ms: payload["expiresAtMs"].as_i64(),
        })
    }

    /// The broker key: one interaction per approval of the Gateway `gateway` names
    /// ([`gateway_scope`]), reused on reconnect and back-fill.
    pub fn key(&self, gateway: &str) -> String {
        format!("{}{}", key_prefix(gateway), self.id)
    }

    /// The interaction to open; the TTL ends with the Gateway's own deadline (at most the
    /// broker's longest), so the question never outlives the approval.
    pub fn interaction(&self, gateway: &str, now_ms: i64) -> Result<InteractionRequest, NotAsked> {
        let ttl = match self.expires_at_ms {
            Some(at) => ((at - now_ms) / 1000).clamp(TTL_MIN, TTL_MAX),
            None => TTL_MAX,
        };
        let choices: Vec<Value> = self
            .allowed
            .iter()
            .map(|id| json!({"id": id, "label": label(id)}))
            .collect();
        let agent = match &self.agent_id {
            Some(a) if a != "main" => format!("OpenClaw ({a})"),
            _ => "OpenClaw".to_string(),
        };
        let body = json!({
            "key": self.key(gateway),
            "native_request_id": self.id,
            "agent": agent,
            "project": self.cwd.as_deref().and_then(crate::model::fields::project_of),
            "session_id": self.session_key,
            "kind": "permission",
            "prompt": "Run this command?",
            "body": self.command,
            "choices": choices,
            "ttl_seconds": ttl,
        });
        InteractionRequest::from_json(&body).map_err(|Invalid(e)| NotAsked::Invalid(e))
    }
}

/// The Gateway decision for an answered interaction, only if it is one OpenClaw allows
/// here; `None` for anything else (no answer, another kind of answer): nothing is resolved.
pub fn decision(approval: &Approval, record: &Interaction) -> Option<&'static str> {
    if record.status != Status::Answered {
        return None;
    }
    let chosen = record.response.as_ref()?.choice_id.as_deref()?;
    approval.allowed.iter().copied().find(|d| *d == chosen)
}

fn label(id: &str) -> &'static str {
    DECISIONS
        .iter()
        .find(|(d, _)| *d == id)
        .map(|(_, l)| *l)
        .unwrap_or("?")
}

fn non_empty(v: &Value) -> Option<String> {
    v.as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `commandArgv` joined with shell quoting where a word needs it, so it reads as run.
fn argv_command(v: &Value) -> Option<String> {
    let words: Vec<&str> = v.as_array()?.iter().filter_map(Value::as_str).collect();
    if words.is_empty() {
        return None;
    }
    let quoted: Vec<String> = words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect();
    Some(quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(allowed: Value) -> Value {
        json!({
            "approvalKind": "exec",
            "id": "d3f897cd",
            "request": {
                "command": "rm -rf work/victim",
                "cwd": "/home/me/shop",
                "host": "gateway",
                "agentId": "main",
                "sessionKey": "agent:main:main",
                "allowedDecisions": allowed,
                "unavailableDecisions": ["allow-always"]
            },
            "createdAtMs": 1_000_000,
            "expiresAtMs": 1_000_000 + 1_800_000
        })
    }

    #[test]
    fn offers_only_the_allowed_decisions_in_a_fixed_order() {
        let a = Approval::parse(&payload(json!(["deny", "allow-once", "bogus"]))).unwrap();
        assert_eq!(a.allowed, vec!["allow-once", "deny"]);
        let req = a.interaction("0a1b2c3d", 1_000_000).unwrap();
        let ids: Vec<_> = req.question.choices.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["allow-once", "deny"]);
        assert_eq!(req.question.body.as_deref(), Some("rm -rf work/victim"));
        assert_eq!(req.question.project.as_deref(), Some("shop"));
        assert_eq!(req.key.as_deref(), Some("openclaw:0a1b2c3d:d3f897cd"));
        assert_eq!(req.ttl_seconds, 1800);
        let all = Approval::parse(&payload(json!(["allow-once", "allow-always", "deny"])));
        assert_eq!(
            all.unwrap().allowed,
            DECISIONS.iter().map(|d| d.0).collect::<Vec<_>>()
        );
    }

    #[test]
    fn refuses_what_it_cannot_ask_faithfully() {
        assert_eq!(
            Approval::parse(&payload(json!(["deny"]))),
            Err(NotAsked::TooFewDecisions)
        );
        assert_eq!(
            Approval::parse(&json!({"request": {}})),
            Err(NotAsked::NoId)
        );
        assert_eq!(
            Approval::parse(&json!({"id": "x", "request": {"cwd": "/"}})),
            Err(NotAsked::NoCommand)
        );
        assert_eq!(Approval::parse(&json!("garbage")), Err(NotAsked::NoId));
    }

    #[test]
    fn argv_is_shown_quoted_and_the_ttl_follows_the_deadline() {
        let p = json!({"id": "x", "request": {"commandArgv": ["echo", "a b", "it's"]},
                       "expiresAtMs": 61_000});
        let a = Approval::parse(&p).unwrap();
        assert_eq!(a.command, r"echo 'a b' 'it'\''s'");
        assert_eq!(a.interaction("g", 0).unwrap().ttl_seconds, 61);
        // Past its deadline the question still gets the shortest TTL the broker allows.
        assert_eq!(
            a.interaction("g", 100_000).unwrap().ttl_seconds,
            TTL_MIN as u32
        );
    }
}
