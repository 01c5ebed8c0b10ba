//! What the web page may see of an interaction: everything it displays and the digest that
//! binds an answer to it, but never the nonce (SPEC §2.2) nor the owner's correlation ids.

use serde::Serialize;

use crate::model::render::{display_segments, QuestionDisplay, Segment};
use crate::model::{Choice, Interaction, Kind, Status, Timestamp};

/// An interaction as the page receives it.
#[derive(Debug, Clone, Serialize)]
pub struct InteractionView {
    pub id: String,
    pub agent: String,
    pub agent_instance: Option<String>,
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub kind: Kind,
    pub prompt: String,
    pub body: Option<String>,
    pub choices: Vec<Choice>,
    pub text_max_length: Option<u32>,
    pub min_selections: Option<u32>,
    pub max_selections: Option<u32>,
    pub allow_other: bool,
    pub other_max_length: Option<u32>,
    /// The displayed fields rendered under SPEC §13.2 (escaped code points, mixed-script
    /// words), computed here so the page needs no Unicode tables of its own.
    pub display: QuestionDisplay,
    /// Who asks, rendered the same way (an agent or project name is text from the agent too).
    pub meta_display: MetaDisplay,
    pub status: Status,
    pub request_digest: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub expires_at: Timestamp,
    pub answered_at: Option<Timestamp>,
    pub response: Option<ResponseView>,
}

/// The accepted answer, with the label of the chosen choice resolved for display.
#[derive(Debug, Clone, Serialize)]
pub struct ResponseView {
    pub choice_id: Option<String>,
    pub choice_label: Option<String>,
    /// A multi_choice answer: the chosen ids and their labels, in the order given.
    pub choice_ids: Option<Vec<String>>,
    pub choice_labels: Option<Vec<String>>,
    pub text: Option<String>,
    /// `text`, rendered under SPEC §13.2 for display.
    pub text_display: Option<Vec<Segment>>,
    /// Which surface answered: `web`, `cli`, `relay`, a host id…
    pub source: String,
    pub created_at: Timestamp,
}

/// The agent, its instance and the project, segmented like the question's own fields.
#[derive(Debug, Clone, Serialize)]
pub struct MetaDisplay {
    pub agent: Vec<Segment>,
    pub agent_instance: Option<Vec<Segment>>,
    pub project: Option<Vec<Segment>>,
}

impl MetaDisplay {
    fn of(i: &Interaction) -> MetaDisplay {
        MetaDisplay {
            agent: display_segments(&i.agent),
            agent_instance: i.agent_instance.as_deref().map(display_segments),
            project: i.project.as_deref().map(display_segments),
        }
    }
}

impl From<&Interaction> for InteractionView {
    fn from(i: &Interaction) -> InteractionView {
        let response = i.response.as_ref().map(|r| ResponseView {
            choice_id: r.choice_id.clone(),
            choice_label: r.choice_id.as_ref().and_then(|c| {
                i.choices
                    .iter()
                    .find(|x| &x.id == c)
                    .map(|x| x.label.clone())
            }),
            choice_ids: r.choice_ids.clone(),
            choice_labels: r.choice_ids.as_ref().map(|ids| {
                ids.iter()
                    .filter_map(|c| i.choices.iter().find(|x| &x.id == c))
                    .map(|x| x.label.clone())
                    .collect()
            }),
            text: r.text.clone(),
            text_display: r.text.as_deref().map(display_segments),
            source: r.source.clone(),
            created_at: r.created_at,
        });
        InteractionView {
            id: i.id.clone(),
            agent: i.agent.clone(),
            agent_instance: i.agent_instance.clone(),
            project: i.project.clone(),
            session_id: i.session_id.clone(),
            kind: i.kind,
            prompt: i.prompt.clone(),
            body: i.body.clone(),
            choices: i.choices.clone(),
            text_max_length: i.text_max_length,
            min_selections: i.min_selections,
            max_selections: i.max_selections,
            allow_other: i.allow_other,
            other_max_length: i.other_max_length,
            display: QuestionDisplay::of(i),
            meta_display: MetaDisplay::of(i),
            status: i.status,
            request_digest: i.request_digest.clone(),
            created_at: i.created_at,
            updated_at: i.updated_at,
            expires_at: i.expires_at,
            answered_at: i.answered_at,
            response,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::InteractionRequest;

    #[test]
    fn who_asks_and_text_answers_are_rendered_too() {
        let req = InteractionRequest::from_json(&serde_json::json!({
            "kind": "text", "prompt": "Name?", "agent": "claude\u{202e}", "project": "sh\u{200b}op"
        }))
        .unwrap();
        let mut record = req.into_interaction(Timestamp::now());
        record.response = Some(crate::model::Response {
            response_id: "r1".into(),
            choice_id: None,
            choice_ids: None,
            text: Some("ok\u{1b}[2K".into()),
            source: "cli".into(),
            device_id: None,
            created_at: Timestamp::now(),
        });
        let v = serde_json::to_value(InteractionView::from(&record)).unwrap();
        let text = |segs: &serde_json::Value| -> String {
            segs.as_array()
                .unwrap()
                .iter()
                .map(|s| s["text"].as_str().unwrap())
                .collect()
        };
        assert_eq!(text(&v["meta_display"]["agent"]), "claude⟨U+202E⟩");
        assert_eq!(text(&v["meta_display"]["project"]), "sh⟨U+200B⟩op");
        assert_eq!(text(&v["response"]["text_display"]), "ok⟨U+001B⟩[2K");
        assert_eq!(v["response"]["text"], "ok\u{1b}[2K", "the exact text stays");
    }

    #[test]
    fn the_view_never_carries_the_nonce() {
        let req = InteractionRequest::from_json(&serde_json::json!({
            "prompt": "rm -rf build", "agent": "claude", "project": "shop"
        }))
        .unwrap();
        let record = req.into_interaction(Timestamp::now());
        let json = serde_json::to_string(&InteractionView::from(&record)).unwrap();
        assert!(!json.contains(&record.nonce));
        assert!(!json.contains("nonce"));
        assert!(json.contains(&record.request_digest));
    }

    #[test]
    fn the_view_carries_the_exact_text_and_its_rendering() {
        let req = InteractionRequest::from_json(&serde_json::json!({
            "prompt": "Open p\u{0430}ypal?", "body": "echo \u{202E}hi"
        }))
        .unwrap();
        let record = req.into_interaction(Timestamp::now());
        let json = serde_json::to_value(InteractionView::from(&record)).unwrap();
        assert_eq!(json["body"], "echo \u{202E}hi");
        assert_eq!(json["display"]["body"][1]["kind"], "escaped");
        assert_eq!(json["display"]["body"][1]["code_point"], "U+202E");
        assert_eq!(json["display"]["prompt"][1]["kind"], "mixed_script_word");
        assert_eq!(json["display"]["body_lines"], 1);
    }
}
