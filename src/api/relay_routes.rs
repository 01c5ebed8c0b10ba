//! The broker's relay routes: `POST /v1/interactions/{id}/publish`, `POST /v1/relay/poll`,
//! `GET /v1/relay/status`. Thin: they call the relay link's outbox and poller.

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use crate::broker::outbox::{EntryState, OutboxEntry};
use crate::relay::{poller, RelayError, RelayLink};
use agentnotify_http::{json_response, ApiError, ResBody};

impl From<RelayError> for ApiError {
    fn from(e: RelayError) -> ApiError {
        match e {
            RelayError::Broker(b) => b.into(),
            RelayError::Unavailable => {
                ApiError::new(StatusCode::BAD_REQUEST, "relay_unavailable", e.to_string())
            }
            RelayError::UnknownProvider(_) | RelayError::NoCredentials(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "relay_unavailable", e.to_string())
            }
            RelayError::NotPending(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "not_pending", e.to_string())
            }
            RelayError::Client(_) => {
                ApiError::new(StatusCode::BAD_GATEWAY, "relay_failed", e.to_string())
            }
            RelayError::Config(_) | RelayError::NoInstallationKey | RelayError::Seal(_) => {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "relay_misconfigured",
                    e.to_string(),
                )
            }
            RelayError::Store(_) | RelayError::Io { .. } => {
                tracing::error!(error = %e, "relay storage failure");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the broker could not store the change",
                )
            }
        }
    }
}

pub async fn publish(relay: &RelayLink, id: &str) -> Result<Response<ResBody>, ApiError> {
    let n = crate::relay::outbox::enqueue(relay, id).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"id": id, "published": n}),
    ))
}

/// One poll by hand: `{"provider": "…"}` or every enabled provider.
pub async fn poll(relay: &RelayLink, body: &Value) -> Result<Response<ResBody>, ApiError> {
    let provider = match body.get("provider") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(_) => return Err(ApiError::bad_request("provider must be a non-empty string")),
    };
    let results = poller::poll(relay, provider.as_deref()).await?;
    let mut polls = Vec::new();
    for (id, result) in results {
        match result {
            Ok(report) => {
                let mut v = serde_json::to_value(&report).expect("a report serialises");
                v["ok"] = json!(true);
                polls.push(v);
            }
            // Asked for one provider: its failure is the reply.
            Err(e) if provider.is_some() => return Err(e.into()),
            Err(e) => {
                let err: ApiError = e.into();
                polls.push(
                    json!({"provider": id, "ok": false, "code": err.code, "error": err.message}),
                );
            }
        }
    }
    Ok(json_response(StatusCode::OK, &json!({ "polls": polls })))
}

/// Outbox entries and cursors: what is still to be delivered, and how far polling got.
pub async fn status(relay: &RelayLink) -> Result<Response<ResBody>, ApiError> {
    let cfg = relay.config()?;
    // What is still to go to a Relay (delivered entries are kept for the other channels'
    // withdrawals; a relay's are removed once delivered).
    let outbox: Vec<OutboxEntry> = relay
        .broker()
        .outbox_entries()
        .map_err(RelayError::from)?
        .into_iter()
        .filter(|e| e.state != EntryState::Delivered && cfg.provider(&e.channel).is_some())
        .collect();
    let cursors = poller::load_cursors(relay);
    let providers: Vec<Value> = cfg
        .providers
        .iter()
        .map(|p| {
            json!({
                "id": p.id, "enabled": p.enabled, "relay_url": p.relay_url,
                "installation_id": p.installation_id,
                "has_cursor": cursors.contains_key(&p.id),
            })
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"providers": providers, "outbox": outbox}),
    ))
}
