//! What a channel shows for a question or a notification, with consent applied: without
//! `include_message` no prompt, choice, message or project leaves the machine, only a
//! generic title, the agent and the kind. Never the nonce or the digest.

use serde_json::{json, Value};

use crate::model::{Choice, Interaction, Kind, Notification, Priority, Status};

/// The agent's name as a person reads it ("claude" → "Claude").
fn display_agent(agent: &str) -> String {
    let mut c = agent.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => "The agent".into(),
    }
}

/// What to show, whatever the channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    pub title: String,
    pub body: String,
    /// Permission questions are the most urgent thing there is: someone is blocked.
    pub urgent: bool,
    pub priority: Priority,
    /// The choices a button may answer with (empty when consent or the kind forbids it).
    pub choices: Vec<Choice>,
    /// `interaction.created`, `notification.created`, …
    pub created_type: &'static str,
    pub resolved_type: &'static str,
    /// The webhook's `data`.
    pub data: Value,
}

pub fn of_interaction(i: &Interaction, include_message: bool) -> Content {
    let agent = display_agent(&i.question.agent);
    let (title, body) = if include_message {
        let title = match &i.question.project {
            Some(p) => format!("{agent} needs your answer in {p}"),
            None => format!("{agent} needs your answer"),
        };
        // What the person reads is rendered visibly (SPEC §13.2); the webhook's `data`
        // keeps the exact text, as the API does.
        let mut text = crate::model::render::render_visible(&i.question.prompt);
        if let Some(body) = &i.question.body {
            text.push_str("\n\n");
            text.push_str(&crate::model::render::render_visible(body));
        }
        (title, text)
    } else {
        let what = match i.question.kind {
            Kind::Permission => "a permission request",
            Kind::SingleChoice => "a question",
            Kind::MultiChoice => "a question (several answers)",
            Kind::Text => "a question (text answer)",
        };
        (
            format!("{agent} needs your answer"),
            format!("{agent} is waiting on {what}."),
        )
    };
    let mut data = json!({
        "id": i.id, "agent": i.question.agent, "kind": i.question.kind.as_str(), "status": i.status.as_str(),
        "title": title, "created_at": i.created_at.to_rfc3339(),
        "expires_at": i.expires_at.to_rfc3339(),
    });
    if include_message {
        data["project"] = json!(i.question.project);
        data["prompt"] = json!(i.question.prompt);
        data["body"] = json!(i.question.body);
        data["choices"] = json!(i.question.choices);
    }
    if i.status != Status::Pending {
        data["source"] = json!(i.response.as_ref().map(|r| r.source.clone()));
    }
    Content {
        title,
        body,
        urgent: i.question.kind == Kind::Permission,
        priority: crate::relay::config::QUESTION_PRIORITY,
        // One tap answers one choice: a multi-choice question is answered on a surface that
        // shows the whole question.
        choices: if include_message
            && matches!(i.question.kind, Kind::Permission | Kind::SingleChoice)
        {
            i.question.choices.clone()
        } else {
            Vec::new()
        },
        created_type: "interaction.created",
        resolved_type: "interaction.resolved",
        data,
    }
}

pub fn of_notification(n: &Notification, include_message: bool) -> Content {
    let agent = display_agent(n.agent.as_deref().unwrap_or("agent"));
    let (title, body) = if include_message {
        (n.title.clone(), n.message.clone())
    } else {
        let title = match n.kind.as_str() {
            "completed" => format!("{agent} finished"),
            "error" => format!("{agent} hit an error"),
            "input_required" | "permission_required" => format!("{agent} needs your answer"),
            _ => format!("{agent} has news"),
        };
        (title, format!("A {} notification from {agent}.", n.kind))
    };
    let mut data = json!({
        "id": n.id, "agent": n.agent, "type": n.kind, "priority": n.priority,
        "status": n.status.as_str(), "title": title,
        "created_at": n.created_at.to_rfc3339(),
    });
    if include_message {
        data["project"] = json!(n.project);
        data["message"] = json!(n.message);
    }
    Content {
        title,
        body,
        urgent: n.priority == Priority::Critical,
        priority: n.priority,
        choices: Vec::new(),
        created_type: "notification.created",
        resolved_type: "notification.resolved",
        data,
    }
}

/// A test notification (`agentnotify channels test`).
pub fn test_content() -> Content {
    Content {
        title: "agentnotify test".into(),
        body: "This channel works: questions will reach you here.".into(),
        urgent: false,
        priority: Priority::Normal,
        choices: Vec::new(),
        created_type: "notification.created",
        resolved_type: "notification.resolved",
        data: json!({"id": "test", "type": "test", "title": "agentnotify test"}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::InteractionRequest;

    fn question() -> Interaction {
        let req = InteractionRequest::from_json(&json!({
            "kind": "permission", "prompt": "rm -rf build?", "agent": "claude",
            "project": "shop",
        }))
        .unwrap();
        req.into_interaction(crate::model::Timestamp::now())
    }

    #[test]
    fn without_consent_no_prompt_choice_or_project_is_shown() {
        let q = question();
        let c = of_interaction(&q, false);
        let all = format!("{} {} {}", c.title, c.body, c.data);
        for secret in [
            "rm -rf build",
            "shop",
            "allow-once",
            &q.nonce,
            &q.request_digest,
        ] {
            assert!(!all.contains(secret), "{secret:?} leaked: {all}");
        }
        assert!(c.choices.is_empty());
        assert_eq!(c.title, "Claude needs your answer");
    }

    #[test]
    fn with_consent_the_question_is_shown_but_never_nonce_or_digest() {
        let q = question();
        let c = of_interaction(&q, true);
        let all = format!("{} {} {}", c.title, c.body, c.data);
        assert!(
            all.contains("rm -rf build?") && all.contains("shop"),
            "{all}"
        );
        assert!(!all.contains(&q.nonce) && !all.contains(&q.request_digest));
        assert_eq!(c.choices.len(), 2);
    }
}
