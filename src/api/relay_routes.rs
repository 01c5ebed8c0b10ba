//! The broker's relay routes: `POST /v1/interactions/{id}/publish`, `POST /v1/relay/poll`,
//! `GET /v1/relay/status`, `GET /v1/relay/devices`, `DELETE /v1/relay/devices/{id}`. Thin:
//! they call the relay link's outbox, poller and allow-list.

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
    let reach = futures_util::future::join_all(
        cfg.providers
            .iter()
            .map(|p| reachable(relay, &cfg, &p.id, p.enabled)),
    )
    .await;
    let providers: Vec<Value> = cfg
        .providers
        .iter()
        .zip(reach)
        .map(|(p, reach)| {
            json!({
                "id": p.id, "enabled": p.enabled, "relay_url": p.relay_url,
                "installation_id": p.installation_id,
                "has_cursor": cursors.contains_key(&p.id),
                "reachable": reach.is_ok(),
                "unreachable_reason": reach.err(),
            })
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"providers": providers, "outbox": outbox}),
    ))
}

/// Whether the provider's Relay answers an authenticated request (its device list) within
/// a few seconds: what `doctor` reports as the Relay link.
async fn reachable(
    relay: &RelayLink,
    cfg: &crate::relay::config::RelayConfig,
    id: &str,
    enabled: bool,
) -> Result<(), String> {
    if !enabled {
        return Err("disabled".into());
    }
    let endpoint = relay.endpoint(cfg, id).map_err(|e| e.to_string())?;
    match tokio::time::timeout(std::time::Duration::from_secs(3), endpoint.client.devices()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 3 s".into()),
    }
}

/// The paired devices of every provider, with when the Relay last saw each (best effort:
/// `null` when the Relay cannot be reached).
pub async fn devices(relay: &RelayLink) -> Result<Response<ResBody>, ApiError> {
    let cfg = relay.config()?;
    let list = crate::relay::devices::load(relay)?;
    let mut out = Vec::new();
    for (provider, devices) in &list {
        let seen: std::collections::HashMap<String, Option<String>> =
            match relay.endpoint(&cfg, provider) {
                Ok(e) => match crate::relay::devices::sync(relay, &e).await {
                    Ok(_) => e
                        .client
                        .devices()
                        .await
                        .unwrap_or_default()
                        .into_iter()
                        .map(|d| (d.device_id, d.last_seen_at))
                        .collect(),
                    Err(_) => Default::default(),
                },
                Err(_) => Default::default(),
            };
        for d in devices {
            out.push(json!({
                "provider": provider, "device_id": d.device_id, "name": d.name,
                "paired_at": d.paired_at,
                "last_seen_at": seen.get(&d.device_id).cloned().flatten(),
                "revoked_at": d.revoked_at,
            }));
        }
    }
    Ok(json_response(StatusCode::OK, &json!({ "devices": out })))
}

/// Revokes one device: the broker stops sealing to it and refuses its answers, and asks
/// the Relay to drop it.
pub async fn revoke(relay: &RelayLink, id: &str) -> Result<Response<ResBody>, ApiError> {
    match crate::relay::devices::revoke(relay, id).await? {
        Some((provider, relay_removed)) => Ok(json_response(
            StatusCode::OK,
            &json!({"device_id": id, "provider": provider, "revoked": true, "relay_removed": relay_removed}),
        )),
        None => Err(ApiError::not_found("no paired device with that id")),
    }
}
