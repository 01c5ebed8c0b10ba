//! `POST /v1/events`: ARC 0.2 envelopes (SPEC §10.1) turned into the broker's own calls.
//!
//! A condition is the notification under the event's key, linked to its question (if it is
//! answerable). Answers go through `Broker::respond` like every other surface's; withdrawal
//! through `Broker::cancel`. Events are handled one at a time, so a replay racing its
//! original can never open the condition twice.

use hyper::StatusCode;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::broker::{Broker, BrokerError};
use crate::model::arc::{ArcAction, ArcEvent};
use crate::model::{Notification, NotificationStatus, Timestamp};
use agentnotify_http::{json_response, ApiError, ResBody};

static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// Handles one parsed body; the reply is `{"notification", "interaction"}`.
pub async fn handle(broker: &Broker, body: &Value) -> Result<hyper::Response<ResBody>, ApiError> {
    let event =
        ArcEvent::from_json(body, Timestamp::now()).map_err(|e| ApiError::bad_request(e.0))?;
    let _one = ONE_AT_A_TIME.lock().await;
    let existing = condition(broker, &event.key).await?;
    let (status, notification) = match event.action {
        ArcAction::Open {
            notification,
            interaction,
        } => {
            // The same event again: the same records, nothing re-sent.
            if let Some(n) = existing.filter(|n| same_event(n, &event.event_id)) {
                (StatusCode::OK, n)
            } else {
                let mut notification = notification;
                let mut created = false;
                if let Some(request) = interaction {
                    let (record, new) = broker.request(*request).await?;
                    notification.interaction_id = Some(record.id);
                    created |= new;
                }
                let (n, new) = broker.notify(notification).await?;
                created |= new;
                let code = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                (code, n)
            }
        }
        ArcAction::Update { mut notification } => {
            let n = existing.ok_or_else(not_found)?;
            if n.status == NotificationStatus::Active {
                // Only the text changes: the link to the question and the origin stay.
                notification.interaction_id = n.interaction_id.clone();
                notification.metadata = n.metadata.clone();
                (StatusCode::OK, broker.notify(notification).await?.0)
            } else {
                // An update that arrives after the condition ended changes nothing.
                (StatusCode::OK, n)
            }
        }
        ArcAction::Answer(submission) => {
            let n = existing.ok_or_else(not_found)?;
            let id = n.interaction_id.clone().ok_or_else(|| {
                ApiError::not_found("request.key names a condition with no question")
            })?;
            broker.respond(&id, submission).await?;
            (StatusCode::OK, broker.get_notification(&n.id).await?)
        }
        ArcAction::Resolve { outcome } => {
            let n = existing.ok_or_else(not_found)?;
            if let (Some(_), Some(id)) = (outcome, &n.interaction_id) {
                broker.cancel(id).await?;
            }
            let n = broker
                .close_notification(&n.id, NotificationStatus::Resolved)
                .await?;
            (StatusCode::OK, n)
        }
    };
    let interaction = match &notification.interaction_id {
        Some(id) => Some(broker.get(id).await?),
        None => None,
    };
    Ok(json_response(
        status,
        &json!({"notification": notification, "interaction": interaction}),
    ))
}

/// The newest notification under `key`, in any state.
async fn condition(broker: &Broker, key: &str) -> Result<Option<Notification>, BrokerError> {
    broker.notification_by_key(key).await
}

fn same_event(n: &Notification, event_id: &str) -> bool {
    n.metadata
        .as_ref()
        .and_then(|m| m.get("arc_event_id"))
        .and_then(Value::as_str)
        == Some(event_id)
}

fn not_found() -> ApiError {
    ApiError::not_found("request.key names no condition")
}
