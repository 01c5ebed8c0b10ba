//! ARC 0.2 envelopes (SPEC §10.1), read strictly: an unknown core field, a wrong version
//! or a field in the wrong event type is refused with a message naming the field. What an
//! event asks for is expressed in the model's own requests, so the broker applies the same
//! rules to it as to everything else.

use serde_json::{json, Map, Value};

use super::digest::hex_sha256;
use super::fields::{invalid, is_token_id, Fields, Invalid};
use super::interaction::{AnswerSubmission, InteractionRequest, PROMPT_MAX};
use super::notification::{NotificationRequest, Priority};
use super::time::Timestamp;

pub const ARC_VERSION: &str = "0.2";

const TOP: &[&str] = &[
    "arc_version",
    "event_id",
    "event_type",
    "occurred_at",
    "sender",
    "context",
    "request",
    "response",
    "extensions",
];
const SENDER: &[&str] = &["id", "name", "version", "instance_id"];
const CONTEXT: &[&str] = &[
    "session_id",
    "correlation_id",
    "project",
    "cwd",
    "pid",
    "turn_id",
    "native_request_id",
];
const REQUEST: &[&str] = &[
    "key", "kind", "title", "message", "priority", "response", "outcome",
];
const ANSWER_SPEC: &[&str] = &["kind", "choices", "text_max_length", "expires_at"];
const ANSWER: &[&str] = &[
    "response_id",
    "digest",
    "nonce",
    "choice_id",
    "text",
    "source",
    "device_id",
];
const OUR_EXTENSION: &[&str] = &["notification_type"];
const OUTCOMES: &[&str] = &[
    "answered",
    "expired",
    "cancelled",
    "superseded",
    "not_needed",
];

/// A validated ARC 0.2 event.
#[derive(Debug, Clone, PartialEq)]
pub struct ArcEvent {
    pub event_id: String,
    /// The condition's key: `request.key`, or for an unkeyed created event
    /// `arc:` + sha256hex(sender.id + "\n" + event_id).
    pub key: String,
    pub action: ArcAction,
}

/// What the event asks the broker to do.
#[derive(Debug, Clone, PartialEq)]
pub enum ArcAction {
    /// `request.created`: a notification, and a question when `request.response` is given.
    Open {
        notification: NotificationRequest,
        interaction: Option<Box<InteractionRequest>>,
    },
    /// `request.updated`: the notification's new text.
    Update { notification: NotificationRequest },
    /// `response.submitted`: an answer (SPEC §3.3) to the question under the key.
    Answer(AnswerSubmission),
    /// `request.resolved`: the condition is over; with an outcome an open question is withdrawn.
    Resolve { outcome: Option<String> },
}

impl ArcEvent {
    /// Reads an envelope; `now` turns the answer spec's absolute `expires_at` into a TTL.
    pub fn from_json(body: &Value, now: Timestamp) -> Result<ArcEvent, Invalid> {
        let top = object(body, "request body")?;
        only(top, TOP, "")?;
        let f = Fields::of(body)?;
        match f.raw("arc_version") {
            Some(Value::String(v)) if v == ARC_VERSION => {}
            _ => return Err(invalid("arc_version must be \"0.2\"")),
        }
        let event_id = f
            .opt_exact_str("event_id", 1, 512)?
            .ok_or_else(|| invalid("event_id must be 1-512 characters"))?;
        let event_type = match f.raw("event_type").and_then(Value::as_str) {
            Some(t @ ("request.created" | "request.updated" | "response.submitted"
            | "request.resolved")) => t,
            _ => {
                return Err(invalid(
                    "event_type must be one of request.created, request.updated, response.submitted, request.resolved",
                ))
            }
        };
        let occurred = f.raw("occurred_at").and_then(Value::as_str);
        if occurred.and_then(rfc3339).is_none() {
            return Err(invalid("occurred_at must be an RFC 3339 time"));
        }
        let sender = Sender::read(f.raw("sender"))?;
        let context = Context::read(f.raw("context"))?;
        let notification_type = extensions(f.raw("extensions"))?;
        let request_value = f
            .raw("request")
            .ok_or_else(|| invalid("request must be an object"))?;
        let request = object(request_value, "request")?;
        only(request, REQUEST, "request.")?;
        let r = Fields::of(request_value)?;
        let key = prefixed("request.", r.opt_str("key", 100))?;
        if event_type != "response.submitted" && f.raw("response").is_some() {
            return Err(invalid("response is allowed only on response.submitted"));
        }
        if event_type != "request.resolved" && r.raw("outcome").is_some() {
            return Err(invalid(
                "request.outcome is allowed only on request.resolved",
            ));
        }
        if event_type != "request.created" && r.raw("response").is_some() {
            return Err(invalid(
                "request.response is allowed only on request.created",
            ));
        }
        let key = match (key, event_type) {
            (Some(k), _) => k,
            (None, "request.created") => unkeyed(&sender.id, &event_id),
            (None, _) => return Err(invalid(format!("request.key is required on {event_type}"))),
        };
        let action = match event_type {
            "request.created" | "request.updated" => {
                let notification = describe(
                    &r,
                    &sender,
                    &context,
                    &key,
                    &event_id,
                    notification_type.as_deref(),
                )?;
                if event_type == "request.updated" {
                    ArcAction::Update { notification }
                } else {
                    let interaction = match r.raw("response") {
                        None => None,
                        Some(spec) => Some(Box::new(question(
                            spec,
                            &notification.message,
                            &sender,
                            &context,
                            &key,
                            now,
                        )?)),
                    };
                    ArcAction::Open {
                        notification,
                        interaction,
                    }
                }
            }
            "response.submitted" => {
                for name in ["kind", "title", "message", "priority"] {
                    if r.raw(name).is_some() {
                        return Err(invalid(format!(
                            "request.{name} is not allowed on response.submitted (only request.key)"
                        )));
                    }
                }
                let answer = f
                    .raw("response")
                    .ok_or_else(|| invalid("response is required on response.submitted"))?;
                ArcAction::Answer(submission(answer)?)
            }
            _ => {
                let outcome = match r.raw("outcome") {
                    None => None,
                    Some(Value::String(o)) if OUTCOMES.contains(&o.as_str()) => Some(o.clone()),
                    Some(_) => {
                        return Err(invalid(
                            "request.outcome must be one of answered, expired, cancelled, superseded, not_needed",
                        ))
                    }
                };
                ArcAction::Resolve { outcome }
            }
        };
        Ok(ArcEvent {
            event_id,
            key,
            action,
        })
    }
}

/// `arc:` + sha256hex(sender.id + "\n" + event_id): the same event always names the same
/// condition, so a replay finds it.
pub fn unkeyed(sender_id: &str, event_id: &str) -> String {
    format!(
        "arc:{}",
        hex_sha256(format!("{sender_id}\n{event_id}").as_bytes())
    )
}

struct Sender {
    id: String,
    name: Option<String>,
    instance_id: Option<String>,
}

impl Sender {
    fn read(raw: Option<&Value>) -> Result<Sender, Invalid> {
        let raw = raw.ok_or_else(|| invalid("sender must be an object"))?;
        only(object(raw, "sender")?, SENDER, "sender.")?;
        let f = Fields::of(raw)?;
        let id = prefixed("sender.", f.opt_str("id", 100))?
            .ok_or_else(|| invalid("sender.id must be 1-100 characters"))?;
        prefixed("sender.", f.opt_str("version", 100))?;
        Ok(Sender {
            id,
            name: prefixed("sender.", f.opt_str("name", 160))?,
            instance_id: prefixed("sender.", f.opt_str("instance_id", 100))?,
        })
    }

    fn display(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

#[derive(Default)]
struct Context {
    session_id: Option<String>,
    correlation_id: Option<String>,
    project: Option<String>,
    turn_id: Option<String>,
    native_request_id: Option<String>,
}

impl Context {
    fn read(raw: Option<&Value>) -> Result<Context, Invalid> {
        let Some(raw) = raw else {
            return Ok(Context::default());
        };
        only(object(raw, "context")?, CONTEXT, "context.")?;
        let f = Fields::of(raw)?;
        let p = "context.";
        prefixed(p, f.opt_str("cwd", 1024))?;
        prefixed(p, f.opt_int("pid", 0, i64::MAX))?;
        Ok(Context {
            session_id: prefixed(p, f.opt_str("session_id", 100))?,
            correlation_id: prefixed(p, f.opt_str("correlation_id", 200))?,
            project: prefixed(p, f.opt_str("project", 200))?,
            turn_id: prefixed(p, f.opt_str("turn_id", 200))?,
            native_request_id: prefixed(p, f.opt_str("native_request_id", 200))?,
        })
    }
}

/// `extensions`: every name starts with `x-`; only `x-agentnotify` is ours and checked.
fn extensions(raw: Option<&Value>) -> Result<Option<String>, Invalid> {
    let Some(raw) = raw else { return Ok(None) };
    let all = object(raw, "extensions")?;
    if let Some(name) = all.keys().find(|k| !k.starts_with("x-")) {
        return Err(invalid(format!(
            "extensions.{} is not an extension (names start with x-)",
            clip(name)
        )));
    }
    let Some(ours) = all.get("x-agentnotify").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let p = "extensions.x-agentnotify.";
    only(object(ours, "extensions.x-agentnotify")?, OUR_EXTENSION, p)?;
    match Fields::of(ours)?.raw("notification_type") {
        None => Ok(None),
        Some(Value::String(t)) if is_token_id(t) => Ok(Some(t.clone())),
        Some(_) => Err(invalid(format!(
            "{p}notification_type must match ^[A-Za-z0-9_-]{{1,64}}$"
        ))),
    }
}

/// The notification a created or updated event describes.
fn describe(
    r: &Fields,
    sender: &Sender,
    context: &Context,
    key: &str,
    event_id: &str,
    notification_type: Option<&str>,
) -> Result<NotificationRequest, Invalid> {
    let kind = r.raw("kind").and_then(Value::as_str).unwrap_or("");
    let name = sender.display();
    let (kind_type, urgent, title) = match kind {
        "information" => ("info", false, format!("Update from {name}")),
        "question" => ("input_required", true, format!("{name} needs input")),
        "permission" => ("permission_required", true, format!("{name} needs permission")),
        "blocked" => ("blocked", true, format!("{name} is blocked")),
        "failure" => ("error", true, format!("{name} reported a failure")),
        "completion" => ("completed", false, format!("{name} completed work")),
        _ => {
            return Err(invalid(
                "request.kind must be one of information, question, permission, blocked, failure, completion",
            ))
        }
    };
    let message = prefixed("request.", r.opt_str("message", 4000))?
        .ok_or_else(|| invalid("request.message must be 1-4000 characters"))?;
    let priority = match prefixed("request.", r.opt_str("priority", 16))? {
        None if urgent => Priority::High,
        None => Priority::Normal,
        Some(p) => Priority::parse(&p).ok_or_else(|| {
            invalid("request.priority must be one of low, normal, high, critical")
        })?,
    };
    let mut metadata = Map::new();
    metadata.insert("arc_version".into(), ARC_VERSION.into());
    metadata.insert("arc_event_id".into(), event_id.into());
    metadata.insert("arc_sender_id".into(), sender.id.clone().into());
    if let Some(c) = &context.correlation_id {
        metadata.insert("arc_correlation_id".into(), c.clone().into());
    }
    if let Some(s) = &context.session_id {
        metadata.insert("arc_session_id".into(), s.clone().into());
    }
    Ok(NotificationRequest {
        title: prefixed("request.", r.opt_str("title", 200))?.unwrap_or(title),
        message,
        kind: notification_type.unwrap_or(kind_type).to_string(),
        priority,
        agent: Some(sender.id.clone()),
        project: context.project.clone(),
        key: Some(key.to_string()),
        interaction_id: None,
        metadata: Some(Value::Object(metadata)),
    })
}

/// `request.response`: the answer spec that makes a created request answerable.
fn question(
    spec: &Value,
    message: &str,
    sender: &Sender,
    context: &Context,
    key: &str,
    now: Timestamp,
) -> Result<InteractionRequest, Invalid> {
    let p = "request.response.";
    only(object(spec, "request.response")?, ANSWER_SPEC, p)?;
    let f = Fields::of(spec)?;
    let kind = match f.raw("kind").and_then(Value::as_str) {
        Some(k @ ("permission" | "single_choice" | "text")) => k,
        _ => {
            return Err(invalid(
                "request.response.kind must be one of permission, single_choice, text",
            ))
        }
    };
    if kind == "text" && f.raw("choices").is_some() {
        return Err(invalid(
            "request.response.choices is not allowed for kind text",
        ));
    }
    if kind != "text" {
        if f.raw("text_max_length").is_some() {
            return Err(invalid(
                "request.response.text_max_length is allowed only for kind text",
            ));
        }
        let n = f.raw("choices").and_then(Value::as_array).map(Vec::len);
        if !matches!(n, Some(2..=12)) {
            return Err(invalid(
                "request.response.choices must contain 2 to 12 entries for this kind",
            ));
        }
    }
    let expires = f
        .raw("expires_at")
        .and_then(Value::as_str)
        .and_then(rfc3339)
        .ok_or_else(|| invalid("request.response.expires_at must be an RFC 3339 time"))?;
    if expires <= now {
        return Err(invalid("request.response.expires_at must be in the future"));
    }
    if message.chars().count() > PROMPT_MAX {
        return Err(invalid(format!(
            "request.message must be at most {PROMPT_MAX} characters when request.response is present"
        )));
    }
    let ttl = now.until(expires).as_millis().div_ceil(1000) as u64;
    let body = json!({
        "key": key,
        "kind": kind,
        "prompt": message,
        "choices": f.raw("choices"),
        "text_max_length": f.raw("text_max_length"),
        "ttl_seconds": ttl,
        "agent": sender.id,
        "agent_instance": sender.instance_id,
        "project": context.project,
        "session_id": context.session_id,
        "turn_id": context.turn_id,
        "native_request_id": context.native_request_id,
    });
    prefixed(p, InteractionRequest::from_json(&body))
}

/// The top-level `response` of `response.submitted`: SPEC §3.3's body by other names.
fn submission(raw: &Value) -> Result<AnswerSubmission, Invalid> {
    only(object(raw, "response")?, ANSWER, "response.")?;
    let f = Fields::of(raw)?;
    let has = |n| f.raw(n).is_some();
    if has("choice_id") == has("text") {
        return Err(invalid(
            "response must carry exactly one of choice_id and text",
        ));
    }
    match f.raw("digest").and_then(Value::as_str) {
        Some(d) if d.len() == 64 && d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {}
        _ => {
            return Err(invalid(
                "response.digest must be 64 lowercase hex characters",
            ))
        }
    }
    let mut body = raw.clone();
    if let Value::Object(m) = &mut body {
        if let Some(d) = m.remove("digest") {
            m.insert("request_digest".into(), d);
        }
    }
    prefixed("response.", AnswerSubmission::from_json(&body))
        .map_err(|e| Invalid(e.0.replace("response.request_digest", "response.digest")))
}

/// RFC 3339 with `Z` or a numeric offset (`+02:00`), which producers in other time zones send.
fn rfc3339(s: &str) -> Option<Timestamp> {
    if let Some(t) = Timestamp::parse_rfc3339(s) {
        return Some(t);
    }
    let at = s.len().checked_sub(6).filter(|&i| s.is_char_boundary(i))?;
    let (local, offset) = s.split_at(at);
    let (sign, hm) = offset.split_at(1);
    let (h, m) = hm.split_once(':')?;
    let (h, m): (u64, u64) = (h.parse().ok()?, m.parse().ok()?);
    if h > 23 || m > 59 || !matches!(sign, "+" | "-") || !local.contains('T') {
        return None;
    }
    let utc = Timestamp::parse_rfc3339(&format!("{local}Z"))?;
    let shift = std::time::Duration::from_secs(h * 3600 + m * 60);
    Some(if sign == "+" {
        utc.minus(shift)
    } else {
        utc.plus(shift)
    })
}

fn object<'a>(v: &'a Value, name: &str) -> Result<&'a Map<String, Value>, Invalid> {
    v.as_object()
        .ok_or_else(|| invalid(format!("{name} must be a JSON object")))
}

/// Refuses the first field not in `allowed` (unknown core fields are errors in ARC).
fn only(map: &Map<String, Value>, allowed: &[&str], prefix: &str) -> Result<(), Invalid> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(invalid(format!(
            "{prefix}{} is not a field of ARC {ARC_VERSION}",
            clip(k)
        ))),
    }
}

/// Field names are echoed, but never at length.
fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Puts the object's path in front of a message that names a field inside it.
fn prefixed<T>(prefix: &str, r: Result<T, Invalid>) -> Result<T, Invalid> {
    r.map_err(|e| {
        if e.0.starts_with(prefix) {
            e
        } else {
            Invalid(format!("{prefix}{}", e.0))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(event_type: &str, request: Value) -> Value {
        json!({
            "arc_version": "0.2", "event_id": "e1", "event_type": event_type,
            "occurred_at": "2026-12-01T10:00:00Z",
            "sender": {"id": "codex", "name": "Codex"},
            "request": request,
        })
    }

    #[test]
    fn unkeyed_created_events_get_the_arc_key() {
        let e = ArcEvent::from_json(
            &envelope(
                "request.created",
                json!({"kind": "question", "message": "m"}),
            ),
            Timestamp::now(),
        )
        .unwrap();
        assert_eq!(e.key, unkeyed("codex", "e1"));
        assert_eq!(
            e.key,
            format!("arc:{}", hex_sha256(b"codex\ne1")),
            "sha256 of sender id, newline, event id"
        );
        let ArcAction::Open { notification, .. } = e.action else {
            panic!()
        };
        assert_eq!(notification.title, "Codex needs input");
        assert_eq!(notification.kind, "input_required");
        assert_eq!(notification.priority, Priority::High);
    }

    #[test]
    fn times_with_offsets_are_rfc3339_too() {
        let z = rfc3339("2026-12-01T10:00:00Z").unwrap();
        assert_eq!(rfc3339("2026-12-01T12:00:00+02:00"), Some(z));
        assert_eq!(rfc3339("2026-12-01T09:30:00.000-00:30"), Some(z));
        for bad in [
            "yesterday",
            "2026-12-01T10:00:00+25:00",
            "+02:00",
            "2026-12-01T10:00:0é+0:00",
        ] {
            assert_eq!(rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn errors_name_the_nested_field() {
        let now = Timestamp::now();
        let e = |v: Value| ArcEvent::from_json(&v, now).unwrap_err().0;
        let mut v = envelope(
            "request.created",
            json!({"kind": "question", "message": "m"}),
        );
        v["sender"]["nick"] = json!("x");
        assert_eq!(e(v), "sender.nick is not a field of ARC 0.2");
        let v = envelope(
            "request.created",
            json!({"kind": "question", "message": ""}),
        );
        assert_eq!(e(v), "request.message must be 1-4000 characters");
        let v = envelope(
            "request.created",
            json!({"kind": "permission", "message": "m", "response": {
                "kind": "permission", "expires_at": "2999-01-01T00:00:00Z",
                "choices": [{"id": "a b", "label": "A"}, {"id": "b", "label": "B"}]}}),
        );
        assert_eq!(
            e(v),
            "request.response.choice id must match ^[A-Za-z0-9_-]{1,64}$"
        );
    }
}
