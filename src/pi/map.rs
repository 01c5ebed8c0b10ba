//! Pi's RPC dialogs as questions, and answers as Pi's replies (pure; unit-tested).
//!
//! `select` → `single_choice` (the options as labels, ids `o1`…, since an option may hold
//! any text), `confirm` → `permission` (allow → `confirmed: true`), `input`/`editor` →
//! `text`. A dialog that cannot be shown whole (too long a title, too many options) is not
//! asked remotely: the person's own RPC client still shows it.

use serde_json::{json, Value};

use crate::model::digest::hex_sha256;
use crate::model::interaction::{CHOICES_MAX, PROMPT_MAX, TEXT_MAX_LIMIT};
use crate::model::Response;

/// Longest option label the broker takes.
const LABEL_MAX: usize = 200;

/// Which dialog a request opened, with what its answer needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Dialog {
    Select { options: Vec<String> },
    Confirm,
    Text,
}

/// One dialog to ask at the broker.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// Pi's request id (a UUID), echoed in the reply.
    pub ui_id: String,
    pub dialog: Dialog,
    /// The `POST /v1/interactions/request` body.
    pub request: Value,
    /// Pi's own timeout for the dialog: at its end Pi answers itself and withdraws it.
    pub timeout_ms: Option<u64>,
}

/// Why a record from Pi is not asked remotely (logged without its content).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unasked {
    #[error("{0} is missing or not a string")]
    Field(&'static str),
    #[error("title must be 1-{PROMPT_MAX} characters")]
    Title,
    #[error("options must be 2-{CHOICES_MAX} strings of 1-{LABEL_MAX} characters")]
    Options,
    #[error("the text to show is too long to show whole")]
    TooLong,
}

/// What the wrapper knows about the session, for the question's context.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub project: Option<String>,
    pub ttl_seconds: u64,
}

/// Maps one record from Pi's stdout. `Ok(None)`: not a dialog (events, responses,
/// fire-and-forget UI methods such as `notify`).
pub fn dialog(record: &Value, ctx: &Context) -> Result<Option<Asked>, Unasked> {
    if record["type"] != "extension_ui_request" {
        return Ok(None);
    }
    let method = record["method"].as_str().unwrap_or("");
    if !matches!(method, "select" | "confirm" | "input" | "editor") {
        return Ok(None);
    }
    let ui_id = str_of(record, "id")?;
    let title = str_of(record, "title")?.trim();
    if title.is_empty() || title.chars().count() > PROMPT_MAX {
        return Err(Unasked::Title);
    }
    let optional = |name| record[name].as_str().filter(|s| !s.is_empty());
    let (dialog, kind, choices, body) = match method {
        "select" => {
            let options: Vec<String> = record["options"]
                .as_array()
                .ok_or(Unasked::Options)?
                .iter()
                .map(|o| o.as_str().map(str::to_string).ok_or(Unasked::Options))
                .collect::<Result<_, _>>()?;
            let fits = |o: &String| (1..=LABEL_MAX).contains(&o.trim().chars().count());
            if !(2..=CHOICES_MAX).contains(&options.len()) || !options.iter().all(fits) {
                return Err(Unasked::Options);
            }
            let choices: Vec<Value> = options
                .iter()
                .enumerate()
                .map(|(i, o)| json!({"id": format!("o{}", i + 1), "label": o}))
                .collect();
            (Dialog::Select { options }, "single_choice", choices, None)
        }
        "confirm" => {
            let message = optional("message").map(str::to_string);
            (Dialog::Confirm, "permission", Vec::new(), message)
        }
        "input" => {
            let hint = optional("placeholder").map(|p| format!("Placeholder: {p}"));
            (Dialog::Text, "text", Vec::new(), hint)
        }
        _ => {
            let prefill = optional("prefill").map(str::to_string);
            (Dialog::Text, "text", Vec::new(), prefill)
        }
    };
    let timeout_ms = record["timeout"].as_u64().filter(|t| *t > 0);
    let ttl = match timeout_ms {
        Some(ms) => ms.div_ceil(1000),
        None => ctx.ttl_seconds,
    };
    let mut request = json!({
        "key": format!("pi-{}", &hex_sha256(ui_id.as_bytes())[..48]),
        "agent": "pi",
        "project": ctx.project,
        "native_request_id": ui_id,
        "kind": kind,
        "prompt": title,
        "ttl_seconds": ttl.clamp(30, 3600),
        "owner_lease": true,
    });
    if !choices.is_empty() {
        request["choices"] = Value::Array(choices);
    }
    if let Some(body) = body {
        request["body"] = Value::String(body);
    }
    if dialog == Dialog::Text {
        request["text_max_length"] = json!(TEXT_MAX_LIMIT);
    }
    crate::model::InteractionRequest::from_json(&request).map_err(|_| Unasked::TooLong)?;
    Ok(Some(Asked {
        ui_id: ui_id.to_string(),
        dialog,
        request,
        timeout_ms,
    }))
}

/// Pi's reply for an answered question; `None` if the answer does not fit the dialog.
pub fn reply(asked: &Asked, response: &Response) -> Option<Value> {
    let id = &asked.ui_id;
    match &asked.dialog {
        Dialog::Select { options } => {
            let n: usize = response
                .choice_id
                .as_deref()?
                .strip_prefix('o')?
                .parse()
                .ok()?;
            let value = options.get(n.checked_sub(1)?)?;
            Some(json!({"type": "extension_ui_response", "id": id, "value": value}))
        }
        Dialog::Confirm => {
            let confirmed = match response.choice_id.as_deref()? {
                "allow-once" => true,
                "deny" => false,
                _ => return None,
            };
            Some(json!({"type": "extension_ui_response", "id": id, "confirmed": confirmed}))
        }
        Dialog::Text => {
            let text = response.text.as_deref()?;
            Some(json!({"type": "extension_ui_response", "id": id, "value": text}))
        }
    }
}

/// Pi's reply when the question expired: the dialog is dismissed.
pub fn cancelled(ui_id: &str) -> Value {
    json!({"type": "extension_ui_response", "id": ui_id, "cancelled": true})
}

/// The id of a reply the person's own client sent for a dialog, if the line is one.
pub fn reply_id(line: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(line).ok()?;
    (v["type"] == "extension_ui_response")
        .then(|| v["id"].as_str().map(str::to_string))
        .flatten()
}

fn str_of<'a>(record: &'a Value, name: &'static str) -> Result<&'a str, Unasked> {
    record[name].as_str().ok_or(Unasked::Field(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            project: Some("shop".into()),
            ttl_seconds: 600,
        }
    }

    fn request(fields: Value) -> Value {
        let mut r = json!({"type": "extension_ui_request", "id": "u-1"});
        r.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        r
    }

    fn answer(choice: Option<&str>, text: Option<&str>) -> Response {
        serde_json::from_value(json!({
            "response_id": "r", "choice_id": choice, "text": text, "source": "cli",
            "created_at": "2026-12-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn each_dialog_becomes_its_question_kind_and_each_answer_its_reply() {
        let select = request(json!({"method": "select", "title": "Pick", "options": ["a b", "c"]}));
        let asked = dialog(&select, &ctx()).unwrap().unwrap();
        assert_eq!(asked.request["kind"], "single_choice");
        assert_eq!(
            asked.request["choices"][0],
            json!({"id": "o1", "label": "a b"})
        );
        assert_eq!(asked.request["native_request_id"], "u-1");
        assert_eq!(asked.request["project"], "shop");
        assert_eq!(
            reply(&asked, &answer(Some("o2"), None)),
            Some(json!({"type": "extension_ui_response", "id": "u-1", "value": "c"}))
        );
        assert_eq!(reply(&asked, &answer(Some("o9"), None)), None);

        let confirm = request(json!({"method": "confirm", "title": "Go?", "message": "sure"}));
        let asked = dialog(&confirm, &ctx()).unwrap().unwrap();
        assert_eq!(
            (
                asked.request["kind"].as_str(),
                asked.request["body"].as_str()
            ),
            (Some("permission"), Some("sure"))
        );
        assert_eq!(
            reply(&asked, &answer(Some("allow-once"), None)).unwrap()["confirmed"],
            true
        );
        assert_eq!(
            reply(&asked, &answer(Some("deny"), None)).unwrap()["confirmed"],
            false
        );

        for method in ["input", "editor"] {
            let r = request(json!({"method": method, "title": "Name?", "prefill": "x"}));
            let asked = dialog(&r, &ctx()).unwrap().unwrap();
            assert_eq!(asked.request["kind"], "text");
            assert_eq!(
                reply(&asked, &answer(None, Some("Ada"))).unwrap()["value"],
                "Ada"
            );
        }
        assert_eq!(cancelled("u-1")["cancelled"], true);
    }

    #[test]
    fn a_timeout_sets_the_lifetime_and_no_timeout_takes_the_default() {
        let r = request(json!({"method": "input", "title": "Quick", "timeout": 90_500}));
        let asked = dialog(&r, &ctx()).unwrap().unwrap();
        assert_eq!(
            (asked.timeout_ms, asked.request["ttl_seconds"].as_u64()),
            (Some(90_500), Some(91))
        );
        let r = request(json!({"method": "input", "title": "Quick", "timeout": 1500}));
        assert_eq!(
            dialog(&r, &ctx()).unwrap().unwrap().request["ttl_seconds"],
            30
        );
        let r = request(json!({"method": "input", "title": "Slow"}));
        assert_eq!(
            dialog(&r, &ctx()).unwrap().unwrap().request["ttl_seconds"],
            600
        );
    }

    #[test]
    fn what_is_no_dialog_or_cannot_be_shown_whole_is_not_asked() {
        for other in [
            json!({"type": "response", "id": "1"}),
            request(json!({"method": "notify", "message": "hi"})),
            request(json!({"method": "setStatus"})),
            json!("just a string"),
        ] {
            assert_eq!(dialog(&other, &ctx()), Ok(None), "{other}");
        }
        let long = "x".repeat(2001);
        let twelve_plus: Vec<String> = (0..13).map(|i| i.to_string()).collect();
        for (bad, why) in [
            (
                request(json!({"method": "select", "title": "t", "options": ["one"]})),
                Unasked::Options,
            ),
            (
                request(json!({"method": "select", "title": "t", "options": twelve_plus})),
                Unasked::Options,
            ),
            (
                request(json!({"method": "select", "title": "t", "options": ["", "b"]})),
                Unasked::Options,
            ),
            (
                request(json!({"method": "select", "title": "t", "options": "ab"})),
                Unasked::Options,
            ),
            (
                request(json!({"method": "confirm", "title": long})),
                Unasked::Title,
            ),
            (
                request(json!({"method": "confirm", "title": "   "})),
                Unasked::Title,
            ),
            (
                request(json!({"method": "confirm"})),
                Unasked::Field("title"),
            ),
            (
                json!({"type": "extension_ui_request", "method": "confirm", "title": "t"}),
                Unasked::Field("id"),
            ),
            (
                request(json!({"method": "editor", "title": "t", "prefill": "y".repeat(16_385)})),
                Unasked::TooLong,
            ),
        ] {
            assert_eq!(dialog(&bad, &ctx()), Err(why), "{bad:.80}");
        }
    }

    #[test]
    fn only_a_dialog_reply_names_its_id() {
        assert_eq!(
            reply_id(br#"{"type":"extension_ui_response","id":"u-1","value":"a"}"#).as_deref(),
            Some("u-1")
        );
        assert_eq!(reply_id(br#"{"type":"prompt","id":"u-1"}"#), None);
        assert_eq!(reply_id(b"garbage"), None);
    }
}
