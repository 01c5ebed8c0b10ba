//! `agentnotify answer [ID]` (SPEC §13.5): answering as a person in a terminal.
//!
//! The question is fetched once and everything shown comes from that one record, so the
//! answer carries the digest and nonce of exactly what the person read. Every string from
//! the record goes through the model's rendering before it reaches the terminal, which
//! therefore never receives a raw control character from a question (SPEC §13.2).

use std::io::IsTerminal;

use super::args::AnswerArgs;
use super::tui::{Asked, Tui};
use super::CliError;
use crate::client::{Client, ClientError};
use crate::model::{AnswerSubmission, Interaction, Kind, Status};

/// The model's one rendering for people (SPEC §13.2): no control character passes raw.
pub use crate::model::render::render_visible as shown;

/// One offered answer, as the record has it.
#[derive(Debug, Clone)]
pub struct Offer {
    pub id: String,
    pub label: String,
    pub detail: Option<String>,
}

/// The question as this command shows it, parsed from one broker record.
#[derive(Debug, Clone)]
pub struct Question {
    pub id: String,
    pub kind: String,
    pub agent: String,
    pub project: Option<String>,
    pub prompt: String,
    pub body: Option<String>,
    pub choices: Vec<Offer>,
    /// The longest text answer: `text_max_length` for text questions, `other_max_length`
    /// where "Other" is offered, `None` where no text is accepted.
    pub text_max: Option<usize>,
    /// `(min, max)` selections of a multi-choice question.
    pub selections: Option<(usize, usize)>,
    pub created_at: String,
    pub expires_at: String,
    digest: String,
    nonce: String,
}

impl Question {
    pub fn from_record(i: &Interaction) -> Result<Question, CliError> {
        let q = &i.question;
        let kind = q.kind.as_str().to_string();
        let choices = q
            .choices
            .iter()
            .map(|c| Offer {
                id: c.id.clone(),
                label: c.label.clone(),
                detail: c.detail.clone(),
            })
            .collect();
        let text_max = if q.kind == Kind::Text {
            Some(q.text_max_length.unwrap_or(500) as usize)
        } else if q.allow_other {
            Some(q.other_max_length.unwrap_or(500) as usize)
        } else {
            None
        };
        let selections = match (q.min_selections, q.max_selections) {
            _ if q.kind != Kind::MultiChoice => None,
            (Some(min), Some(max)) => Some((min as usize, max as usize)),
            _ => Some((1, q.choices.len().max(1))),
        };
        Ok(Question {
            id: i.id.clone(),
            agent: q.agent.clone(),
            project: q.project.clone(),
            prompt: q.prompt.clone(),
            body: q.body.clone().filter(|b| !b.is_empty()),
            choices,
            text_max,
            selections,
            created_at: i.created_at.to_rfc3339(),
            expires_at: i.expires_at.to_rfc3339(),
            digest: i.request_digest.clone(),
            nonce: i.nonce.clone(),
            kind,
        })
    }

    pub fn is_multi(&self) -> bool {
        self.kind == "multi_choice"
    }

    pub fn is_text(&self) -> bool {
        self.kind == "text"
    }

    /// "Other": a choice question that also takes a text answer.
    pub fn allows_other(&self) -> bool {
        !self.is_text() && self.text_max.is_some()
    }

    fn label_of(&self, id: &str) -> String {
        self.choices
            .iter()
            .find(|c| c.id == id)
            .map_or_else(|| id.to_string(), |c| c.label.clone())
    }
}

/// What the person chose: choice ids, a text, or (multi-choice with "Other") both.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    pub choice_ids: Vec<String>,
    pub text: Option<String>,
}

impl Answer {
    /// The respond body for this question's kind, bound to the digest and nonce of the
    /// record that was shown.
    fn submission(&self, q: &Question) -> AnswerSubmission {
        let (choice_id, choice_ids) = if q.is_multi() {
            let ids = (!self.choice_ids.is_empty()).then(|| self.choice_ids.clone());
            (None, ids)
        } else {
            (self.choice_ids.first().cloned(), None)
        };
        AnswerSubmission {
            response_id: format!("cli-{}", crate::model::new_id()),
            request_digest: Some(q.digest.clone()),
            nonce: Some(q.nonce.clone()),
            choice_id,
            choice_ids,
            text: self.text.clone(),
            source: "cli".into(),
            device_id: None,
        }
    }
}

/// Runs `agentnotify answer`.
pub async fn run(a: AnswerArgs) -> Result<(), CliError> {
    let client = super::connect().await?;
    if !a.choices.is_empty() || a.text.is_some() {
        let id = a.id.as_deref().unwrap_or_default();
        let record = client.get_interaction(id).await?;
        let q = Question::from_record(&record)?;
        if record.status != Status::Pending {
            return Err(ended(&record));
        }
        print!("{}", as_text(&q));
        let answer = from_flags(&q, a.choices, a.text)?;
        return submit(&client, &q, &answer).await;
    }
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(CliError::Usage(
            "agentnotify answer needs a terminal to show the question; give the id with \
             --choice or --text to answer without one"
                .into(),
        ));
    }
    if let Some(id) = &a.id {
        // A question that is no longer pending is reported before any screen opens.
        let record = client.get_interaction(id).await?;
        if record.status != Status::Pending {
            return Err(ended(&record));
        }
    }
    let mut tui =
        Tui::start().map_err(|e| CliError::Other(format!("cannot use the terminal: {e}")))?;
    loop {
        let id = match &a.id {
            Some(id) => id.clone(),
            None => match tui.pick(&client).await? {
                Some(id) => id,
                None => return Ok(()),
            },
        };
        let record = client.get_interaction(&id).await?;
        if record.status != Status::Pending {
            drop(tui);
            return Err(ended(&record));
        }
        let q = Question::from_record(&record)?;
        let mut watcher = tokio::spawn(until_ended(client.clone(), id));
        let asked = tui.ask(&q, &mut watcher).await;
        watcher.abort();
        match asked? {
            Asked::Answer(answer) => {
                drop(tui);
                return submit(&client, &q, &answer).await;
            }
            Asked::Ended(record) => {
                drop(tui);
                return Err(ended(&record));
            }
            Asked::Back if a.id.is_none() => continue,
            Asked::Back | Asked::Quit => return Ok(()),
        }
    }
}

/// Resolves once the question leaves `pending`, with its record (an observer's waits: they
/// do not keep an owner's lease alive).
async fn until_ended(client: Client, id: String) -> Interaction {
    loop {
        match client.wait(&id, 60, false).await {
            Ok(v) if v.status != Status::Pending => return v,
            Ok(_) => {}
            // The broker went away: nothing to report until it is back.
            Err(_) => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
        }
    }
}

/// Turns `--choice` / `--text` into an answer, refusing what this question does not offer
/// (the broker checks again; this only gives a clearer message).
fn from_flags(
    q: &Question,
    choices: Vec<String>,
    text: Option<String>,
) -> Result<Answer, CliError> {
    let offered = || {
        q.choices
            .iter()
            .map(|c| c.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for c in &choices {
        if !q.choices.iter().any(|o| &o.id == c) {
            let why = if q.is_text() {
                "this question takes a text answer (--text)".to_string()
            } else {
                format!("the choices are: {}", offered())
            };
            return Err(CliError::Usage(format!(
                "--choice {} is not one of this question's choices; {why}",
                shown(c)
            )));
        }
    }
    if let Some((min, max)) = q.selections {
        let count = choices.len() + usize::from(text.is_some());
        if count < min || count > max {
            let other = if q.allows_other() {
                " (an Other --text counts as one)"
            } else {
                ""
            };
            return Err(CliError::Usage(format!(
                "this question takes {min} to {max} choices: give --choice that many times{other}"
            )));
        }
    }
    if choices.len() > 1 && !q.is_multi() {
        return Err(CliError::Usage(
            "--choice may be given once: this question takes one choice".into(),
        ));
    }
    if let Some(t) = &text {
        match q.text_max {
            None => {
                return Err(CliError::Usage(format!(
                    "--text is not accepted: this question takes one of its choices ({})",
                    offered()
                )))
            }
            Some(max) if t.chars().count() > max => {
                return Err(CliError::Usage(format!(
                    "--text must be at most {max} characters for this question"
                )))
            }
            Some(_) => {}
        }
    }
    if q.is_text() && text.is_none() {
        return Err(CliError::Usage(
            "this question takes a text answer: give --text".into(),
        ));
    }
    if !q.is_multi() && !choices.is_empty() && text.is_some() {
        return Err(CliError::Usage(
            "give either --choice or --text for this question, not both".into(),
        ));
    }
    Ok(Answer {
        choice_ids: choices,
        text,
    })
}

/// Sends the answer, bound to the digest and nonce of the record that was shown, and
/// reports what the broker recorded (from its reply, which may be an earlier answer).
async fn submit(client: &Client, q: &Question, answer: &Answer) -> Result<(), CliError> {
    match client.respond(&q.id, &answer.submission(q)).await {
        Ok(record) => {
            println!(
                "Answered {} (recorded by the broker).",
                recorded_answer(&record)
            );
            Ok(())
        }
        Err(ClientError::Api { code, .. })
            if code == "already_answered" || code == "not_pending" =>
        {
            Err(ended(&client.get_interaction(&q.id).await?))
        }
        Err(e) => Err(e.into()),
    }
}

/// The accepted answer of a record, for people: labels and quoted text, rendered.
pub fn recorded_answer(record: &Interaction) -> String {
    let q = Question::from_record(record).ok();
    let Some(r) = &record.response else {
        return "(no answer)".into();
    };
    let label = |id: &str| {
        q.as_ref()
            .map_or_else(|| id.to_string(), |q| q.label_of(id))
    };
    let mut parts: Vec<String> = Vec::new();
    if let Some(id) = &r.choice_id {
        parts.push(format!("“{}”", shown(&label(id))));
    }
    for id in r.choice_ids.iter().flatten() {
        parts.push(format!("“{}”", shown(&label(id))));
    }
    if let Some(t) = &r.text {
        parts.push(format!("the text “{}”", shown(t)));
    }
    if parts.is_empty() {
        parts.push("(no answer)".into());
    }
    format!("{} from {}", parts.join(", "), shown(&r.source))
}

/// The error for a question that is no longer waiting, saying what the broker recorded.
fn ended(record: &Interaction) -> CliError {
    let what = match record.status.as_str() {
        "answered" => format!(
            "this question was already answered: {} (already_answered)",
            recorded_answer(record)
        ),
        "expired" => "this question expired before it was answered (not_pending)".into(),
        "cancelled" => {
            "this question was withdrawn; the agent no longer waits for it (not_pending)".into()
        }
        "superseded" => "this question was replaced by a newer version of it; run \
                         `agentnotify answer` to see that one (not_pending)"
            .into(),
        other => format!("this question is {} (not_pending)", shown(other)),
    };
    CliError::Other(what)
}

/// The whole question as plain text for `answer ID --choice …`, every string rendered.
pub fn as_text(q: &Question) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{}", shown(&heading(q)));
    out.push('\n');
    for line in shown(&q.prompt).lines() {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(body) = &q.body {
        let text = shown(body);
        let _ = writeln!(out, "\n  ┌─ {}", lines_label(body));
        for line in text.lines() {
            let _ = writeln!(out, "  │ {line}");
        }
        let _ = writeln!(out, "  └─");
    }
    out.push('\n');
    for (i, c) in q.choices.iter().enumerate() {
        let _ = writeln!(out, "  {}. {}  [{}]", i + 1, shown(&c.label), shown(&c.id));
        for line in c
            .detail
            .as_deref()
            .map(shown)
            .iter()
            .flat_map(|d| d.lines())
        {
            let _ = writeln!(out, "       {line}");
        }
    }
    out.push('\n');
    out
}

/// "claude · shop · Permission", the question's provenance in one line.
pub fn heading(q: &Question) -> String {
    let kind = match q.kind.as_str() {
        "permission" => "Permission",
        "single_choice" => "Choice",
        "multi_choice" => "Choose several",
        "text" => "Question",
        other => other,
    };
    let mut parts = vec![q.agent.clone()];
    parts.extend(q.project.clone());
    parts.push(kind.to_string());
    parts.join(" · ")
}

/// "1 line", "34 lines": the size of a body, as every surface labels it.
pub fn lines_label(body: &str) -> String {
    match body.lines().count() {
        1 => "1 line".into(),
        n => format!("{n} lines"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn question(kind: &str, extra: Value) -> Question {
        let mut v = json!({
            "kind": kind, "agent": "claude", "prompt": "Pick",
            "choices": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        let record = crate::model::InteractionRequest::from_json(&v)
            .unwrap()
            .into_interaction(crate::model::Timestamp::now());
        Question::from_record(&record).unwrap()
    }

    #[test]
    fn flags_are_checked_against_what_the_question_offers() {
        let q = question("permission", json!({}));
        let e = from_flags(&q, vec!["c".into()], None).unwrap_err();
        assert!(e.to_string().contains("the choices are: a, b"), "{e}");
        assert!(from_flags(&q, vec!["a".into(), "b".into()], None).is_err());
        assert!(from_flags(&q, vec![], Some("x".into())).is_err());
        let a = from_flags(&q, vec!["b".into()], None).unwrap();
        assert_eq!(a.submission(&q).choice_id.as_deref(), Some("b"));

        let multi = question(
            "multi_choice",
            json!({"min_selections": 1, "max_selections": 3, "allow_other": true, "other_max_length": 3}),
        );
        let a = from_flags(&multi, vec!["a".into(), "b".into()], Some("xy".into())).unwrap();
        let f = a.submission(&multi);
        assert_eq!(f.choice_ids, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(f.text.as_deref(), Some("xy"));
        assert!(from_flags(&multi, vec![], Some("long".into())).is_err());
        let e = from_flags(&multi, vec![], None).unwrap_err();
        assert!(e.to_string().contains("takes 1 to 3 choices"), "{e}");

        let text = question("text", json!({"choices": [], "text_max_length": 5}));
        assert!(from_flags(&text, vec!["a".into()], None).is_err());
        assert_eq!(
            from_flags(&text, vec![], Some("hello".into()))
                .unwrap()
                .submission(&text)
                .text
                .as_deref(),
            Some("hello")
        );
    }

    #[test]
    fn the_recorded_answer_is_told_with_labels() {
        let mut record = crate::model::InteractionRequest::from_json(&json!({
            "kind": "single_choice", "agent": "claude", "prompt": "Pick",
            "choices": [{"id": "a", "label": "Alpha\u{202e}"}, {"id": "b", "label": "B"}],
        }))
        .unwrap()
        .into_interaction(crate::model::Timestamp::now());
        record.response = Some(crate::model::Response {
            response_id: "r".into(),
            choice_id: Some("a".into()),
            choice_ids: None,
            text: None,
            source: "web".into(),
            device_id: None,
            created_at: crate::model::Timestamp::now(),
        });
        assert_eq!(recorded_answer(&record), "“Alpha⟨U+202E⟩” from web");
    }
}
