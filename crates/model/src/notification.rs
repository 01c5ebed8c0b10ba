//! Notifications (SPEC §4.3): what the bridge "sends" so a person notices.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fields::{invalid, Fields, Invalid};
use super::time::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    Normal,
    High,
    Critical,
}

impl Priority {
    pub fn parse(s: &str) -> Option<Priority> {
        match s {
            "low" => Some(Priority::Low),
            "normal" => Some(Priority::Normal),
            "high" => Some(Priority::High),
            "critical" => Some(Priority::Critical),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationStatus {
    Active,
    Resolved,
    Dismissed,
}

impl NotificationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationStatus::Active => "active",
            NotificationStatus::Resolved => "resolved",
            NotificationStatus::Dismissed => "dismissed",
        }
    }
    pub fn parse(s: &str) -> Option<NotificationStatus> {
        match s {
            "active" => Some(NotificationStatus::Active),
            "resolved" => Some(NotificationStatus::Resolved),
            "dismissed" => Some(NotificationStatus::Dismissed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub id: String,
    pub key: Option<String>,
    pub title: String,
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub priority: Priority,
    pub agent: Option<String>,
    pub project: Option<String>,
    /// The interaction this notification announces; it is resolved when that ends.
    pub interaction_id: Option<String>,
    pub metadata: Option<Value>,
    pub status: NotificationStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
}

/// A validated `POST /v1/notifications` body; serialises as that body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotificationRequest {
    pub title: String,
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub priority: Priority,
    pub agent: Option<String>,
    pub project: Option<String>,
    pub key: Option<String>,
    pub interaction_id: Option<String>,
    pub metadata: Option<Value>,
}

pub const METADATA_MAX_BYTES: usize = 8 * 1024;

impl NotificationRequest {
    pub fn from_json(body: &Value) -> Result<NotificationRequest, Invalid> {
        let f = Fields::of(body)?;
        let title = f
            .opt_str("title", 200)?
            .ok_or_else(|| invalid("title must be 1-200 characters"))?;
        let message = f
            .opt_str("message", 4000)?
            .ok_or_else(|| invalid("message must be 1-4000 characters"))?;
        let kind = match f.opt_str("type", 64)? {
            None => "info".to_string(),
            Some(t) if super::fields::is_token_id(&t) => t,
            Some(_) => return Err(invalid("type must match ^[A-Za-z0-9_-]{1,64}$")),
        };
        let priority = match f.opt_str("priority", 16)? {
            None => Priority::Normal,
            Some(p) => Priority::parse(&p)
                .ok_or_else(|| invalid("priority must be one of low, normal, high, critical"))?,
        };
        let metadata = match f.raw("metadata") {
            None => None,
            Some(v @ Value::Object(_)) => {
                if v.to_string().len() > METADATA_MAX_BYTES {
                    return Err(invalid("metadata must be at most 8 KiB"));
                }
                Some(v.clone())
            }
            Some(_) => return Err(invalid("metadata must be an object")),
        };
        let interaction_id = f.opt_str("interaction_id", 32)?;
        if let Some(id) = &interaction_id {
            if !super::is_id(id) {
                return Err(invalid("interaction_id must be an interaction id"));
            }
        }
        Ok(NotificationRequest {
            title,
            message,
            kind,
            priority,
            agent: f.opt_str("agent", 100)?,
            project: f.opt_str("project", 200)?,
            key: f.opt_str("key", 200)?,
            interaction_id,
            metadata,
        })
    }

    pub fn into_notification(self, now: Timestamp) -> Notification {
        Notification {
            id: super::new_id(),
            key: self.key,
            title: self.title,
            message: self.message,
            kind: self.kind,
            priority: self.priority,
            agent: self.agent,
            project: self.project,
            interaction_id: self.interaction_id,
            metadata: self.metadata,
            status: NotificationStatus::Active,
            created_at: now,
            updated_at: now,
            resolved_at: None,
        }
    }

    /// Applies this request to an active notification with the same key (update in place).
    pub fn update(self, n: &mut Notification, now: Timestamp) {
        n.title = self.title;
        n.message = self.message;
        n.kind = self.kind;
        n.priority = self.priority;
        n.agent = self.agent;
        n.project = self.project;
        n.interaction_id = self.interaction_id;
        n.metadata = self.metadata;
        n.updated_at = now;
    }
}
