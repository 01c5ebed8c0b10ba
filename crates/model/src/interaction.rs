//! Interactions (SPEC §2): one durable record per question, at most one accepted answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::digest::{request_digest, DigestInput};
use super::fields::{invalid, is_token_id, Fields, Invalid};
use super::time::Timestamp;

/// What kind of answer a question takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Permission,
    SingleChoice,
    Text,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Permission => "permission",
            Kind::SingleChoice => "single_choice",
            Kind::Text => "text",
        }
    }
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "permission" => Some(Kind::Permission),
            "single_choice" => Some(Kind::SingleChoice),
            "text" => Some(Kind::Text),
            _ => None,
        }
    }
}

/// Where an interaction is in its life. Every state but `pending` is terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Answered,
    Expired,
    Cancelled,
    Superseded,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Answered => "answered",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
            Status::Superseded => "superseded",
        }
    }
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "pending" => Some(Status::Pending),
            "answered" => Some(Status::Answered),
            "expired" => Some(Status::Expired),
            "cancelled" => Some(Status::Cancelled),
            "superseded" => Some(Status::Superseded),
            _ => None,
        }
    }
    pub fn is_terminal(self) -> bool {
        self != Status::Pending
    }
}

/// One offered answer of a choice kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Choice {
    pub fn new(id: &str, label: &str) -> Choice {
        Choice {
            id: id.into(),
            label: label.into(),
            detail: None,
        }
    }
}

/// The accepted answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub response_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    pub created_at: Timestamp,
}

/// The durable record of one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interaction {
    pub id: String,
    pub key: Option<String>,
    pub agent: String,
    pub agent_instance: Option<String>,
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub turn_id: Option<String>,
    pub native_request_id: Option<String>,
    pub kind: Kind,
    pub prompt: String,
    pub choices: Vec<Choice>,
    pub text_max_length: Option<u32>,
    pub status: Status,
    pub request_digest: String,
    pub nonce: String,
    /// Whether an owner lease keeps this question alive (SPEC §3.1).
    #[serde(default)]
    pub owner_lease: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub expires_at: Timestamp,
    pub answered_at: Option<Timestamp>,
    pub response: Option<Response>,
}

pub const TTL_MIN: i64 = 30;
pub const TTL_MAX: i64 = 3600;
pub const TTL_DEFAULT: i64 = 600;
pub const TEXT_MAX_DEFAULT: u32 = 500;

/// A validated, normalised `POST /v1/interactions/request` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InteractionRequest {
    pub key: Option<String>,
    pub agent: String,
    pub agent_instance: Option<String>,
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub turn_id: Option<String>,
    pub native_request_id: Option<String>,
    pub kind: Kind,
    pub prompt: String,
    pub choices: Vec<Choice>,
    pub text_max_length: Option<u32>,
    pub ttl_seconds: u32,
    pub owner_lease: bool,
}

impl InteractionRequest {
    /// Validates and normalises a request body (SPEC §2, §4.4).
    pub fn from_json(body: &Value) -> Result<InteractionRequest, Invalid> {
        let f = Fields::of(body)?;
        let kind = match f.raw("kind") {
            None => Kind::Permission,
            Some(Value::String(s)) => Kind::parse(s.trim())
                .ok_or_else(|| invalid("kind must be one of permission, single_choice, text"))?,
            Some(_) => return Err(invalid("kind must be a string")),
        };
        let prompt = match f.raw("prompt") {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(_) => return Err(invalid("prompt must be a string")),
            None => String::new(),
        };
        let n = prompt.chars().count();
        if n == 0 || n > 2000 {
            return Err(invalid("prompt must be 1-2000 characters"));
        }
        let mut choices = parse_choices(f.raw("choices"))?;
        let mut text_max_length = None;
        // Checked for every kind, used only by `text`.
        let text_max = f.opt_int("text_max_length", 1, 2000)?;
        match kind {
            Kind::Text => {
                if !choices.is_empty() {
                    return Err(invalid("choices must be empty for kind text"));
                }
                text_max_length = Some(text_max.map(|n| n as u32).unwrap_or(TEXT_MAX_DEFAULT));
            }
            Kind::Permission if choices.is_empty() => {
                choices = vec![
                    Choice::new("allow-once", "Allow once"),
                    Choice::new("deny", "Deny"),
                ];
            }
            _ => {
                if !(2..=12).contains(&choices.len()) {
                    return Err(invalid(
                        "choices must contain 2 to 12 entries for this kind",
                    ));
                }
            }
        }
        let ttl = f
            .opt_clamped_int("ttl_seconds", TTL_MIN, TTL_MAX)?
            .unwrap_or(TTL_DEFAULT);
        Ok(InteractionRequest {
            key: f.opt_str("key", 100)?,
            agent: f.opt_str("agent", 100)?.unwrap_or_else(|| "unknown".into()),
            agent_instance: f.opt_str("agent_instance", 100)?,
            project: f.opt_str("project", 200)?,
            session_id: f.opt_str("session_id", 200)?,
            turn_id: f.opt_str("turn_id", 200)?,
            native_request_id: f.opt_str("native_request_id", 200)?,
            kind,
            prompt,
            choices,
            text_max_length,
            ttl_seconds: ttl as u32,
            owner_lease: f.opt_bool("owner_lease")?.unwrap_or(false),
        })
    }

    /// The digest this request's question would carry.
    pub fn digest(&self) -> String {
        request_digest(&DigestInput {
            kind: self.kind,
            agent: &self.agent,
            project: self.project.as_deref(),
            session_id: self.session_id.as_deref(),
            prompt: &self.prompt,
            choices: &self.choices,
            text_max_length: self.text_max_length,
        })
    }

    /// A new pending interaction with a fresh id and nonce.
    pub fn into_interaction(self, now: Timestamp) -> Interaction {
        let request_digest = self.digest();
        Interaction {
            id: super::new_id(),
            key: self.key,
            agent: self.agent,
            agent_instance: self.agent_instance,
            project: self.project,
            session_id: self.session_id,
            turn_id: self.turn_id,
            native_request_id: self.native_request_id,
            kind: self.kind,
            prompt: self.prompt,
            choices: self.choices,
            text_max_length: self.text_max_length,
            status: Status::Pending,
            request_digest,
            nonce: crate::secret::random_b64url(24),
            owner_lease: self.owner_lease,
            created_at: now,
            updated_at: now,
            expires_at: now.plus(std::time::Duration::from_secs(self.ttl_seconds as u64)),
            answered_at: None,
            response: None,
        }
    }
}

fn parse_choices(raw: Option<&Value>) -> Result<Vec<Choice>, Invalid> {
    let items = match raw {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid("choices must be an array")),
    };
    if items.len() > 12 {
        return Err(invalid(
            "choices must contain 2 to 12 entries for this kind",
        ));
    }
    let mut out: Vec<Choice> = Vec::with_capacity(items.len());
    for item in items {
        let f = Fields::of(item).map_err(|_| invalid("each choice must be an object"))?;
        let id = match f.raw("id") {
            Some(Value::String(s)) if is_token_id(s) => s.clone(),
            _ => return Err(invalid("choice id must match ^[A-Za-z0-9_-]{1,64}$")),
        };
        let label = f
            .opt_str("label", 200)
            .map_err(|_| invalid("choice label must be 1-200 characters"))?
            .ok_or_else(|| invalid("choice label must be 1-200 characters"))?;
        let detail = f
            .opt_str("detail", 500)
            .map_err(|_| invalid("choice detail must be at most 500 characters"))?;
        if out.iter().any(|c| c.id == id) {
            return Err(invalid("choice ids must be unique"));
        }
        out.push(Choice { id, label, detail });
    }
    Ok(out)
}

/// A validated `POST /v1/interactions/{id}/respond` body (rule 0 of SPEC §3.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerSubmission {
    pub response_id: String,
    pub request_digest: Option<String>,
    pub nonce: Option<String>,
    pub choice_id: Option<String>,
    pub text: Option<String>,
    pub source: String,
    pub device_id: Option<String>,
}

impl AnswerSubmission {
    pub fn from_json(body: &Value) -> Result<AnswerSubmission, Invalid> {
        let f = Fields::of(body)?;
        let response_id = f
            .opt_exact_str("response_id", 1, 128)?
            .ok_or_else(|| invalid("response_id must be 1-128 characters"))?;
        let source = match f.raw("source") {
            None => "unknown".to_string(),
            Some(Value::String(s)) if is_token_id(s) => s.clone(),
            Some(_) => return Err(invalid("source must match ^[A-Za-z0-9_-]{1,64}$")),
        };
        Ok(AnswerSubmission {
            response_id,
            request_digest: f.opt_exact_str("request_digest", 0, 128)?,
            nonce: f.opt_exact_str("nonce", 0, 128)?,
            choice_id: f.opt_exact_str("choice_id", 0, 128)?,
            text: f.opt_exact_str("text", 0, 100_000)?,
            source,
            device_id: f.opt_exact_str("device_id", 1, 128)?,
        })
    }
}

/// Why an answer was refused (SPEC §3.3, rules 1–5).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerRefusal {
    #[error("interaction was already answered")]
    AlreadyAnswered,
    #[error("interaction is not pending (it is {})", .0.as_str())]
    NotPending(Status),
    #[error("request_digest does not match the question as asked")]
    DigestMismatch,
    #[error("nonce is missing or does not match")]
    NonceMismatch,
    #[error("{0}")]
    InvalidAnswer(String),
}

impl AnswerRefusal {
    /// The machine-readable `code` of this refusal (SPEC §3.3).
    pub fn code(&self) -> &'static str {
        match self {
            AnswerRefusal::AlreadyAnswered => "already_answered",
            AnswerRefusal::NotPending(_) => "not_pending",
            AnswerRefusal::DigestMismatch => "digest_mismatch",
            AnswerRefusal::NonceMismatch => "nonce_mismatch",
            AnswerRefusal::InvalidAnswer(_) => "invalid_answer",
        }
    }
}

/// What the answer rules decide for one submission.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Same `response_id` as the accepted answer: reply 200 with the record again.
    Replay,
    /// First valid answer: store it.
    Accept(Response),
    Refuse(AnswerRefusal),
}

impl Interaction {
    /// Applies the answer rules 1–5 of SPEC §3.3, in that order, to a submission.
    /// The caller has already swept expiry and holds the broker's lock.
    pub fn judge(&self, sub: &AnswerSubmission, now: Timestamp) -> Verdict {
        use AnswerRefusal::*;
        match self.status {
            Status::Answered => {
                let same = self
                    .response
                    .as_ref()
                    .is_some_and(|r| r.response_id == sub.response_id);
                return if same {
                    Verdict::Replay
                } else {
                    Verdict::Refuse(AlreadyAnswered)
                };
            }
            Status::Pending => {}
            other => return Verdict::Refuse(NotPending(other)),
        }
        if sub.request_digest.as_deref() != Some(self.request_digest.as_str()) {
            return Verdict::Refuse(DigestMismatch);
        }
        let nonce_ok = sub
            .nonce
            .as_deref()
            .is_some_and(|n| crate::secret::constant_time_eq(n.as_bytes(), self.nonce.as_bytes()));
        if !nonce_ok {
            return Verdict::Refuse(NonceMismatch);
        }
        if let Err(why) = self.check_shape(sub) {
            return Verdict::Refuse(InvalidAnswer(why));
        }
        Verdict::Accept(Response {
            response_id: sub.response_id.clone(),
            choice_id: sub.choice_id.clone(),
            text: sub.text.clone(),
            source: sub.source.clone(),
            device_id: sub.device_id.clone(),
            created_at: now,
        })
    }

    fn check_shape(&self, sub: &AnswerSubmission) -> Result<(), String> {
        match (&sub.choice_id, &sub.text, self.kind) {
            (Some(_), Some(_), _) => Err("give exactly one of choice_id or text, not both".into()),
            (None, None, _) => Err("give exactly one of choice_id or text".into()),
            (Some(_), None, Kind::Text) => Err("this question takes text, not a choice_id".into()),
            (None, Some(_), Kind::Permission | Kind::SingleChoice) => {
                Err("this question takes a choice_id, not text".into())
            }
            (Some(c), None, _) => {
                if self.choices.iter().any(|x| &x.id == c) {
                    Ok(())
                } else {
                    Err("choice_id is not one of the offered choices".into())
                }
            }
            (None, Some(t), _) => {
                let max = self.text_max_length.unwrap_or(TEXT_MAX_DEFAULT) as usize;
                let n = t.chars().count();
                if n == 0 || n > max {
                    Err(format!("text must be 1-{max} characters"))
                } else {
                    Ok(())
                }
            }
        }
    }
}
