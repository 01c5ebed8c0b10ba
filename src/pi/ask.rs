//! One question at the broker: open it (with its notification), wait for its end in
//! owner slices, withdraw it. A record is believed only if it is the question opened.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::client::{Client, ClientError};
use crate::model::{Interaction, InteractionRequest, NotificationRequest, Status};

/// Longest single long-poll: the owner lease needs a wait to start at least this often.
const WAIT_SLICE_SECS: u64 = 10;
/// How long withdrawing may take on the way out.
pub const WITHDRAW_BUDGET: Duration = Duration::from_millis(300);

/// Why a question gave no answer. Logged, never printed.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("no broker: {0}")]
    Broker(#[from] ClientError),
    #[error("the request is not a valid question: {0}")]
    Invalid(String),
    #[error("the broker sent a record that is not the question asked")]
    BadRecord,
    #[error("the wait ended without an answer")]
    TimedOut,
    #[error("the question ended without an answer ({0})")]
    Ended(&'static str),
}

/// A question opened at the broker: its id, and the digest of exactly what it asks.
#[derive(Debug, Clone)]
pub struct Opened {
    pub id: String,
    digest: String,
}

impl Opened {
    fn check(&self, record: &Interaction) -> Result<(), AskError> {
        match record.id == self.id && record.request_digest == self.digest {
            true => Ok(()),
            false => Err(AskError::BadRecord),
        }
    }
}

/// Opens `request` (a `POST /v1/interactions/request` body) and posts its notification,
/// titled `title`, alongside the first wait.
pub async fn open(client: &Client, request: &Value, title: &str) -> Result<Opened, AskError> {
    let parsed =
        InteractionRequest::from_json(request).map_err(|e| AskError::Invalid(e.0.clone()))?;
    let digest = parsed.digest();
    let (record, _created) = client.request_interaction(&parsed).await?;
    let opened = Opened {
        id: record.id.clone(),
        digest,
    };
    opened.check(&record)?;
    let kind = request["kind"].as_str().unwrap_or("permission");
    let notification = json!({
        "title": title,
        "message": record.question.prompt.lines().next().unwrap_or(""),
        "type": if kind == "permission" { "permission_required" } else { "input_required" },
        "priority": "high",
        "agent": "pi",
        "project": request["project"],
        "key": request["key"].as_str().map(|k| format!("{k}-notify")),
        "interaction_id": record.id,
    });
    if let Ok(n) = NotificationRequest::from_json(&notification) {
        let client = client.clone();
        tokio::spawn(async move {
            if let Err(e) = client.notify(&n).await {
                tracing::warn!(error = %e, "notification not posted");
            }
        });
    }
    tracing::info!(id = %opened.id, kind, "pi question open");
    Ok(opened)
}

/// Waits until the question is answered (the record), or ends otherwise, or `deadline`.
pub async fn answered(
    client: &Client,
    opened: &Opened,
    deadline: Instant,
) -> Result<Interaction, AskError> {
    let mut interrupted = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(AskError::TimedOut);
        }
        let slice = (left.as_secs_f64().ceil() as u64).clamp(1, WAIT_SLICE_SECS);
        let record = match client.wait(&opened.id, slice, true).await {
            Ok(r) => r,
            // An answer that landed while a reply was lost must still be seen.
            Err(ClientError::Interrupted(_)) if interrupted < 2 => {
                interrupted += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        opened.check(&record)?;
        match record.status {
            Status::Answered => return Ok(record),
            Status::Pending => continue,
            other => return Err(AskError::Ended(other.as_str())),
        }
    }
}

/// Cancels the question (best effort, bounded).
pub async fn withdraw(client: &Client, id: &str) {
    let _ = tokio::time::timeout(WITHDRAW_BUDGET, client.cancel(id)).await;
}
