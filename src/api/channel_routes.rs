//! The broker's channel routes: `GET /v1/channels/status`, `POST /v1/channels/{id}/test`,
//! `POST /v1/channels/reload`. Thin: they call the channel hub.

use hyper::{Response, StatusCode};
use serde_json::json;

use crate::channels::{ChannelError, Hub};
use agentnotify_http::{json_response, ApiError, ResBody};

impl From<ChannelError> for ApiError {
    fn from(e: ChannelError) -> ApiError {
        match e {
            ChannelError::Broker(b) => b.into(),
            ChannelError::Unknown(_) => ApiError::not_found(e.to_string()),
            ChannelError::Config(_) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "channel_misconfigured",
                e.to_string(),
            ),
            ChannelError::Unavailable(..) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "channel_unavailable",
                e.to_string(),
            ),
            ChannelError::Failed { .. } | ChannelError::Gone { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "delivery_failed", e.to_string())
            }
        }
    }
}

pub fn status(hub: &Hub) -> Result<Response<ResBody>, ApiError> {
    Ok(json_response(StatusCode::OK, &hub.status()?))
}

pub async fn test(hub: &Hub, id: &str) -> Result<Response<ResBody>, ApiError> {
    Ok(json_response(StatusCode::OK, &hub.test(id).await?))
}

/// The settings changed (`agentnotify channels …` says so): look again now.
pub fn reload(hub: &Hub) -> Result<Response<ResBody>, ApiError> {
    hub.poke();
    Ok(json_response(StatusCode::OK, &json!({"reloaded": true})))
}
