//! Interactions (SPEC §2): one durable record per question, at most one accepted answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::digest::{request_digest, DigestInput, DIGEST_VERSION};
use super::fields::{invalid, is_token_id, Fields, Invalid};
use super::time::Timestamp;

/// What kind of answer a question takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Permission,
    SingleChoice,
    /// Several choices at once, within `min_selections..=max_selections` (SPEC §13.3).
    MultiChoice,
    Text,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Permission => "permission",
            Kind::SingleChoice => "single_choice",
            Kind::MultiChoice => "multi_choice",
            Kind::Text => "text",
        }
    }
    /// Kinds answered by choosing among `choices`.
    pub fn has_choices(self) -> bool {
        self != Kind::Text
    }
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "permission" => Some(Kind::Permission),
            "single_choice" => Some(Kind::SingleChoice),
            "multi_choice" => Some(Kind::MultiChoice),
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
    /// The chosen ids of a `multi_choice`, in the order given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_ids: Option<Vec<String>>,
    /// A `text` answer, or the "Other" text of a choice kind with `allow_other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    pub created_at: Timestamp,
}

/// Everything a person is shown of a question, and so everything its digest binds
/// (SPEC §2.1, §13.4). `Interaction`, the request, the web view and the phone payload embed
/// it, so a displayed field is written down once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub agent: String,
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub kind: Kind,
    pub prompt: String,
    /// What actually runs, shown whole under the prompt (SPEC §13.1); exact, never trimmed.
    #[serde(default)]
    pub body: Option<String>,
    pub choices: Vec<Choice>,
    pub text_max_length: Option<u32>,
    /// `multi_choice` only: how many choices an answer takes.
    #[serde(default)]
    pub min_selections: Option<u32>,
    #[serde(default)]
    pub max_selections: Option<u32>,
    /// Choice kinds: an "Other" text is accepted too, up to `other_max_length`.
    #[serde(default)]
    pub allow_other: bool,
    #[serde(default)]
    pub other_max_length: Option<u32>,
}

impl Question {
    /// The v2 digest of what is shown (SPEC §13.4).
    pub fn digest(&self) -> String {
        request_digest(&DigestInput {
            kind: self.kind,
            agent: &self.agent,
            project: self.project.as_deref(),
            session_id: self.session_id.as_deref(),
            prompt: &self.prompt,
            body: self.body.as_deref(),
            choices: &self.choices,
            text_max_length: self.text_max_length,
            selections: self.min_selections.zip(self.max_selections),
            other_max_length: self.other_max_length,
        })
    }
}

/// The durable record of one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interaction {
    pub id: String,
    pub key: Option<String>,
    pub agent_instance: Option<String>,
    pub turn_id: Option<String>,
    pub native_request_id: Option<String>,
    #[serde(flatten)]
    pub question: Question,
    pub status: Status,
    pub request_digest: String,
    /// Which digest encoding `request_digest` uses: 1 (SPEC §2.1, records made before
    /// §13.4) or 2. Answers are compared with the stored digest, so both stay answerable.
    #[serde(default = "digest_v1")]
    pub digest_version: u8,
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

fn digest_v1() -> u8 {
    1
}

pub const TTL_MIN: i64 = 30;
pub const TTL_MAX: i64 = 3600;
pub const TTL_DEFAULT: i64 = 600;
pub const TEXT_MAX_DEFAULT: u32 = 500;
/// Longest `prompt`, in characters (after trimming).
pub const PROMPT_MAX: usize = 2000;
/// Longest `body`, in characters (SPEC §13.1).
pub const BODY_MAX: usize = 16_384;
/// Fewest and most `choices` of a choice kind.
pub const CHOICES_MIN: usize = 2;
pub const CHOICES_MAX: usize = 12;
/// Largest `text_max_length` and `other_max_length`.
pub const TEXT_MAX_LIMIT: u32 = 2000;
/// `other_max_length` when `allow_other` is set without one.
pub const OTHER_MAX_DEFAULT: u32 = 500;
/// Most entries a `choice_ids` answer may carry before it is refused as malformed.
pub const CHOICE_IDS_MAX: usize = 64;

/// A validated, normalised `POST /v1/interactions/request` body; serialises as that body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InteractionRequest {
    pub key: Option<String>,
    pub agent_instance: Option<String>,
    pub turn_id: Option<String>,
    pub native_request_id: Option<String>,
    #[serde(flatten)]
    pub question: Question,
    pub ttl_seconds: u32,
    pub owner_lease: bool,
}

impl InteractionRequest {
    /// Validates and normalises a request body (SPEC §2, §4.4, §13).
    pub fn from_json(body: &Value) -> Result<InteractionRequest, Invalid> {
        let f = Fields::of(body)?;
        let kind = match f.raw("kind") {
            None => Kind::Permission,
            Some(Value::String(s)) => Kind::parse(s.trim()).ok_or_else(|| {
                invalid("kind must be one of permission, single_choice, multi_choice, text")
            })?,
            Some(_) => return Err(invalid("kind must be a string")),
        };
        let prompt = match f.raw("prompt") {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(_) => return Err(invalid("prompt must be a string")),
            None => String::new(),
        };
        let n = prompt.chars().count();
        if n == 0 || n > PROMPT_MAX {
            return Err(invalid(format!("prompt must be 1-{PROMPT_MAX} characters")));
        }
        // Exact: what runs is shown as it is. Empty counts as absent.
        let body_text = f
            .opt_exact_str("body", 0, BODY_MAX)
            .map_err(|_| {
                invalid(format!(
                    "body must be a string of at most {BODY_MAX} characters"
                ))
            })?
            .filter(|b| !b.is_empty());
        let mut choices = parse_choices(f.raw("choices"))?;
        let mut text_max_length = None;
        // Checked for every kind, used only by the kinds they belong to.
        let text_max = f.opt_int("text_max_length", 1, TEXT_MAX_LIMIT.into())?;
        let min_sel = f.opt_int("min_selections", 1, CHOICES_MAX as i64 + 1)?;
        let max_sel = f.opt_int("max_selections", 1, CHOICES_MAX as i64 + 1)?;
        let other = f.opt_bool("allow_other")?.unwrap_or(false);
        let other_max = f.opt_int("other_max_length", 1, TEXT_MAX_LIMIT.into())?;
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
                if !(CHOICES_MIN..=CHOICES_MAX).contains(&choices.len()) {
                    return Err(invalid(format!(
                        "choices must contain {CHOICES_MIN} to {CHOICES_MAX} entries for this kind"
                    )));
                }
            }
        }
        let allow_other = other && matches!(kind, Kind::SingleChoice | Kind::MultiChoice);
        let (min_selections, max_selections) = match kind {
            Kind::MultiChoice => {
                let (min, max) = selection_bounds(choices.len(), allow_other, min_sel, max_sel)?;
                (Some(min), Some(max))
            }
            _ => (None, None),
        };
        let ttl = f
            .opt_clamped_int("ttl_seconds", TTL_MIN, TTL_MAX)?
            .unwrap_or(TTL_DEFAULT);
        Ok(InteractionRequest {
            key: f.opt_str("key", 100)?,
            agent_instance: f.opt_str("agent_instance", 100)?,
            turn_id: f.opt_str("turn_id", 200)?,
            native_request_id: f.opt_str("native_request_id", 200)?,
            question: Question {
                agent: f.opt_str("agent", 100)?.unwrap_or_else(|| "unknown".into()),
                project: f.opt_str("project", 200)?,
                session_id: f.opt_str("session_id", 200)?,
                kind,
                prompt,
                body: body_text,
                choices,
                text_max_length,
                min_selections,
                max_selections,
                allow_other,
                other_max_length: allow_other
                    .then(|| other_max.map(|n| n as u32).unwrap_or(OTHER_MAX_DEFAULT)),
            },
            ttl_seconds: ttl as u32,
            owner_lease: f.opt_bool("owner_lease")?.unwrap_or(false),
        })
    }

    /// The digest (v2) this request's question would carry.
    pub fn digest(&self) -> String {
        self.question.digest()
    }

    /// A new pending interaction with a fresh id and nonce.
    pub fn into_interaction(self, now: Timestamp) -> Interaction {
        let request_digest = self.digest();
        Interaction {
            id: super::new_id(),
            key: self.key,
            agent_instance: self.agent_instance,
            turn_id: self.turn_id,
            native_request_id: self.native_request_id,
            question: self.question,
            status: Status::Pending,
            request_digest,
            digest_version: DIGEST_VERSION,
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

/// `1 <= min <= max <= choices` (one more with "Other", which counts as a selection).
/// Defaults: at least one, at most all.
fn selection_bounds(
    choices: usize,
    allow_other: bool,
    min: Option<i64>,
    max: Option<i64>,
) -> Result<(u32, u32), Invalid> {
    let most = (choices + usize::from(allow_other)) as i64;
    let min = min.unwrap_or(1);
    let max = max.unwrap_or(most);
    if min > most {
        return Err(invalid(format!(
            "min_selections must be between 1 and {most} for these choices"
        )));
    }
    if max < min || max > most {
        return Err(invalid(format!(
            "max_selections must be between min_selections ({min}) and {most} for these choices"
        )));
    }
    Ok((min as u32, max as u32))
}

fn parse_choices(raw: Option<&Value>) -> Result<Vec<Choice>, Invalid> {
    let items = match raw {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid("choices must be an array")),
    };
    if items.len() > CHOICES_MAX {
        return Err(invalid(format!(
            "choices must contain {CHOICES_MIN} to {CHOICES_MAX} entries for this kind"
        )));
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

/// A validated `POST /v1/interactions/{id}/respond` body (rule 0 of SPEC §3.3);
/// serialises as that body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerSubmission {
    pub response_id: String,
    pub request_digest: Option<String>,
    pub nonce: Option<String>,
    pub choice_id: Option<String>,
    pub choice_ids: Option<Vec<String>>,
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
            choice_ids: choice_ids(f.raw("choice_ids"))?,
            text: f.opt_exact_str("text", 0, 100_000)?,
            source,
            device_id: f.opt_exact_str("device_id", 1, 128)?,
        })
    }
}

/// Rule 0 for `choice_ids`: an array of short strings. Whether they are offered, unique
/// and within the bounds is rule 5's business (`invalid_answer`).
fn choice_ids(raw: Option<&Value>) -> Result<Option<Vec<String>>, Invalid> {
    let malformed = || {
        invalid(format!(
            "choice_ids must be an array of at most {CHOICE_IDS_MAX} strings of 1-128 characters"
        ))
    };
    let Some(raw) = raw else { return Ok(None) };
    let items = raw.as_array().ok_or_else(malformed)?;
    if items.len() > CHOICE_IDS_MAX {
        return Err(malformed());
    }
    items
        .iter()
        .map(|v| match v.as_str() {
            Some(s) if (1..=128).contains(&s.chars().count()) => Ok(s.to_string()),
            _ => Err(malformed()),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
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
            choice_ids: sub.choice_ids.clone(),
            text: sub.text.clone(),
            source: sub.source.clone(),
            device_id: sub.device_id.clone(),
            created_at: now,
        })
    }

    /// Rule 5 (SPEC §3.3, §13.3): exactly one of `choice_id` / `choice_ids` / `text`, the one
    /// the kind takes; an "Other" text may stand instead of a choice (or, on a multi_choice,
    /// beside `choice_ids`, counting as one selection) when the question allows it.
    fn check_shape(&self, sub: &AnswerSubmission) -> Result<(), String> {
        let other = self.question.allow_other && self.question.kind.has_choices();
        match self.question.kind {
            Kind::Text => {
                if sub.choice_id.is_some() || sub.choice_ids.is_some() {
                    return Err("this question takes text, not a choice".into());
                }
                let max = self.question.text_max_length.unwrap_or(TEXT_MAX_DEFAULT);
                match &sub.text {
                    None => Err("give exactly one of choice_id or text".into()),
                    Some(t) => check_text("text", t, max),
                }
            }
            Kind::Permission | Kind::SingleChoice => {
                if sub.choice_ids.is_some() {
                    return Err("this question takes one choice_id, not choice_ids".into());
                }
                match (&sub.choice_id, &sub.text) {
                    (Some(_), Some(_)) => {
                        Err("give exactly one of choice_id or text, not both".into())
                    }
                    (None, None) => Err("give exactly one of choice_id or text".into()),
                    (Some(c), None) => self.check_offered(std::slice::from_ref(c)),
                    (None, Some(t)) if other => check_text("text", t, self.other_limit()),
                    (None, Some(_)) => Err("this question takes a choice_id, not text".into()),
                }
            }
            Kind::MultiChoice => {
                if sub.choice_id.is_some() {
                    return Err("this question takes choice_ids, not choice_id".into());
                }
                if sub.text.is_some() && !other {
                    return Err("this question takes choice_ids, not text".into());
                }
                if sub.choice_ids.is_none() && sub.text.is_none() {
                    return Err("give choice_ids".into());
                }
                let ids = sub.choice_ids.as_deref().unwrap_or(&[]);
                self.check_offered(ids)?;
                for (n, id) in ids.iter().enumerate() {
                    if ids[..n].contains(id) {
                        return Err("choice_ids must be unique".into());
                    }
                }
                if let Some(t) = &sub.text {
                    check_text("text", t, self.other_limit())?;
                }
                let count = ids.len() + usize::from(sub.text.is_some());
                let min = self.question.min_selections.unwrap_or(1) as usize;
                let max = self
                    .question
                    .max_selections
                    .map_or(self.question.choices.len(), |m| m as usize);
                if count < min || count > max {
                    let other_note = if other {
                        " (an Other text counts as one)"
                    } else {
                        ""
                    };
                    return Err(format!(
                        "choice_ids must name {min} to {max} choices{other_note}"
                    ));
                }
                Ok(())
            }
        }
    }

    fn other_limit(&self) -> u32 {
        self.question.other_max_length.unwrap_or(OTHER_MAX_DEFAULT)
    }

    fn check_offered(&self, ids: &[String]) -> Result<(), String> {
        let field = if self.question.kind == Kind::MultiChoice {
            "choice_ids names a choice that is not offered"
        } else {
            "choice_id is not one of the offered choices"
        };
        match ids
            .iter()
            .all(|c| self.question.choices.iter().any(|x| &x.id == c))
        {
            true => Ok(()),
            false => Err(field.into()),
        }
    }
}

fn check_text(field: &str, t: &str, max: u32) -> Result<(), String> {
    let n = t.chars().count();
    if n == 0 || n > max as usize {
        Err(format!("{field} must be 1-{max} characters"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(body: Value) -> Interaction {
        InteractionRequest::from_json(&body)
            .unwrap()
            .into_interaction(Timestamp::now())
    }

    fn answer(i: &Interaction, extra: Value) -> Verdict {
        let mut body = json!({
            "response_id": "r1", "request_digest": i.request_digest, "nonce": i.nonce,
        });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        i.judge(
            &AnswerSubmission::from_json(&body).unwrap(),
            Timestamp::now(),
        )
    }

    fn refused(v: Verdict) -> String {
        match v {
            Verdict::Refuse(AnswerRefusal::InvalidAnswer(why)) => why,
            other => panic!("not refused as invalid_answer: {other:?}"),
        }
    }

    fn three() -> Value {
        json!([{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"}])
    }

    #[test]
    fn multi_choice_answers_stay_within_the_offered_ids_and_bounds() {
        let i = ask(
            json!({"kind": "multi_choice", "prompt": "Pick", "choices": three(),
                           "min_selections": 1, "max_selections": 2}),
        );
        assert!(
            matches!(answer(&i, json!({"choice_ids": ["a", "c"]})), Verdict::Accept(r)
            if r.choice_ids == Some(vec!["a".into(), "c".into()]))
        );
        assert!(refused(answer(&i, json!({"choice_ids": ["a", "a"]}))).contains("unique"));
        assert!(refused(answer(&i, json!({"choice_ids": ["a", "z"]}))).contains("not offered"));
        assert!(refused(answer(&i, json!({"choice_ids": []}))).contains("1 to 2"));
        assert!(refused(answer(&i, json!({"choice_ids": ["a", "b", "c"]}))).contains("1 to 2"));
        assert!(refused(answer(&i, json!({"choice_id": "a"}))).contains("choice_ids"));
        assert!(refused(answer(&i, json!({"choice_ids": ["a"], "text": "x"}))).contains("text"));
    }

    #[test]
    fn other_text_is_taken_only_where_allowed_and_counts_as_a_selection() {
        let multi = ask(
            json!({"kind": "multi_choice", "prompt": "Pick", "choices": three(),
                               "allow_other": true, "other_max_length": 5}),
        );
        assert_eq!(multi.question.max_selections, Some(4));
        assert!(matches!(
            answer(
                &multi,
                json!({"choice_ids": ["a", "b", "c"], "text": "mine"})
            ),
            Verdict::Accept(_)
        ));
        assert!(matches!(
            answer(&multi, json!({"text": "mine"})),
            Verdict::Accept(_)
        ));
        assert!(refused(answer(&multi, json!({"text": "too long"}))).contains("1-5"));
        let single = ask(
            json!({"kind": "single_choice", "prompt": "Pick", "choices": three(),
                                "allow_other": true}),
        );
        assert_eq!(single.question.other_max_length, Some(OTHER_MAX_DEFAULT));
        assert!(matches!(
            answer(&single, json!({"text": "mine"})),
            Verdict::Accept(_)
        ));
        assert!(refused(answer(&single, json!({"choice_id": "a", "text": "x"}))).contains("both"));
        let closed = ask(json!({"kind": "single_choice", "prompt": "Pick", "choices": three()}));
        assert!(refused(answer(&closed, json!({"text": "mine"}))).contains("not text"));
        let permission = ask(json!({"prompt": "Run?", "allow_other": true}));
        assert!(!permission.question.allow_other && permission.question.other_max_length.is_none());
    }

    #[test]
    fn new_fields_are_checked_with_messages_that_name_them() {
        let err = |body: Value| InteractionRequest::from_json(&body).unwrap_err().0;
        let long = "x".repeat(BODY_MAX + 1);
        assert_eq!(
            err(json!({"prompt": "Run?", "body": long})),
            "body must be a string of at most 16384 characters"
        );
        assert!(err(json!({"prompt": "Run?", "body": 5})).starts_with("body must be a string"));
        let multi = |min: i64, max: i64| {
            err(
                json!({"kind": "multi_choice", "prompt": "P", "choices": three(),
                       "min_selections": min, "max_selections": max}),
            )
        };
        assert_eq!(
            multi(4, 4),
            "min_selections must be between 1 and 3 for these choices"
        );
        assert_eq!(
            multi(2, 1),
            "max_selections must be between min_selections (2) and 3 for these choices"
        );
        assert_eq!(multi(0, 1), "min_selections must be between 1 and 13");
        assert_eq!(
            err(
                json!({"kind": "single_choice", "prompt": "P", "choices": three(), "allow_other": "yes"})
            ),
            "allow_other must be true or false"
        );
        assert_eq!(
            err(
                json!({"kind": "single_choice", "prompt": "P", "choices": three(), "other_max_length": 0})
            ),
            "other_max_length must be between 1 and 2000"
        );
        let sub = AnswerSubmission::from_json(&json!({"response_id": "r", "choice_ids": "a"}));
        assert!(sub
            .unwrap_err()
            .0
            .starts_with("choice_ids must be an array"));
    }

    #[test]
    fn the_body_is_kept_exact_and_bound_by_the_digest() {
        let body = "  rm -rf build\u{202E}\n";
        let i = ask(json!({"prompt": "Run?", "body": body}));
        assert_eq!(i.question.body.as_deref(), Some(body));
        assert_eq!(i.digest_version, 2);
        let other = ask(json!({"prompt": "Run?", "body": "rm -rf build"}));
        assert_ne!(i.request_digest, other.request_digest);
        assert_eq!(
            ask(json!({"prompt": "Run?", "body": ""})).question.body,
            None
        );
    }

    #[test]
    fn a_record_stored_before_v2_reads_back_and_stays_answerable() {
        let mut json = serde_json::to_value(ask(json!({"prompt": "Deploy?"}))).unwrap();
        let map = json.as_object_mut().unwrap();
        for new in [
            "body",
            "min_selections",
            "max_selections",
            "allow_other",
            "other_max_length",
            "digest_version",
        ] {
            map.remove(new);
        }
        map.insert("request_digest".into(), json!("0".repeat(64)));
        let old: Interaction = serde_json::from_value(json).unwrap();
        assert_eq!(old.digest_version, 1);
        assert!(matches!(
            answer(&old, json!({"choice_id": "deny"})),
            Verdict::Accept(_)
        ));
    }
}
