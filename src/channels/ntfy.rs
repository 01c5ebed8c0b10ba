//! ntfy (SPEC §11.4): JSON publishing, withdrawal by `DELETE`, and answer buttons.
//!
//! A button is an ntfy `http` action that POSTs an opaque, single-use capability token to
//! the channel's answer topic. The token (192 random bits) is bound here to (interaction,
//! choice, request digest); only its SHA-256 is stored. The nonce and the digest never
//! leave the machine. The broker listens on the answer topic with ntfy's streaming
//! `GET /<topic>/json`, reconnecting with backoff and `since=` the last message seen, so a
//! button pressed while it was away still counts; a used, unknown or stale token does
//! nothing.
//!
//! Delivering twice is harmless on the receiving side: every publish of one question
//! carries the same `sequence_id`, which ntfy (≥ 2.16) treats as an update in place.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::config::{self, Channel};
use super::content::Content;
use super::{ChannelError, Hub};
use crate::broker::outbox::retry_wait;
use crate::model::digest::hex_sha256;
use crate::model::{AnswerSubmission, Interaction, Priority, Status, Timestamp};

/// ntfy refuses a message with more actions than this.
pub const MAX_ACTIONS: usize = 3;

/// What a token may answer, stored under the token's SHA-256.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Capability {
    pub interaction_id: String,
    pub choice_id: String,
    pub request_digest: String,
    pub channel: String,
    pub expires_at: Timestamp,
}

/// The sequence id of everything published about one subject: stable across retries and
/// restarts, and naming nothing (a hash).
pub fn sequence_id(key: &str) -> String {
    format!("an{}", &hex_sha256(key.as_bytes())[..30])
}

fn server(c: &Channel) -> Result<&str, ChannelError> {
    c.server
        .as_deref()
        .map(|s| s.trim_end_matches('/'))
        .ok_or_else(|| ChannelError::Unavailable(c.id.clone(), "no server set".into()))
}

fn topic(c: &Channel) -> Result<&str, ChannelError> {
    c.topic
        .as_deref()
        .ok_or_else(|| ChannelError::Unavailable(c.id.clone(), "no topic set".into()))
}

fn token_of(hub: &Hub, c: &Channel) -> Option<String> {
    config::load_secrets(&hub.paths)
        .ok()?
        .remove(&c.id)?
        .ntfy_token
        .map(|t| t.expose().to_string())
}

fn priority(content: &Content, question: bool) -> u8 {
    if question {
        return if content.urgent { 5 } else { 4 };
    }
    match content.priority {
        Priority::Low => 2,
        Priority::Normal => 3,
        Priority::High => 4,
        Priority::Critical => 5,
    }
}

/// One `http` action per choice, each with a fresh capability (stored, not yet flushed:
/// the caller commits before publishing). None for a question with more choices than
/// ntfy allows, a text question, or without consent (the labels are the question's).
pub fn buttons(
    hub: &Hub,
    c: &Channel,
    q: &Interaction,
    content: &Content,
) -> Result<Vec<Value>, ChannelError> {
    if content.choices.is_empty() || content.choices.len() > MAX_ACTIONS {
        return Ok(Vec::new());
    }
    let Some(answer_topic) = c.answer_topic() else {
        return Ok(Vec::new());
    };
    let url = format!("{}/{answer_topic}", server(c)?);
    let auth = token_of(hub, c);
    let mut actions = Vec::new();
    for choice in &content.choices {
        let token = crate::model::secret::random_b64url(24);
        hub.broker.put_capability(
            &hex_sha256(token.as_bytes()),
            &Capability {
                interaction_id: q.id.clone(),
                choice_id: choice.id.clone(),
                request_digest: q.request_digest.clone(),
                channel: c.id.clone(),
                expires_at: q.expires_at,
            },
        )?;
        let mut action = json!({
            "action": "http", "label": choice.label, "url": url, "method": "POST",
            "body": token, "clear": true,
        });
        if let Some(t) = &auth {
            action["headers"] = json!({"Authorization": format!("Bearer {t}")});
        }
        actions.push(action);
    }
    Ok(actions)
}

/// Publishes (or updates in place) the message for `key`. The receipt holds ntfy's id.
pub async fn publish(
    hub: &Hub,
    c: &Channel,
    content: &Content,
    key: &str,
    actions: &[Value],
) -> Result<Option<Value>, ChannelError> {
    let question = key.starts_with("interaction:");
    let tags = if question { "question" } else { "bell" };
    let sequence = sequence_id(key);
    let body = json!({
        "topic": topic(c)?, "title": content.title, "message": content.body,
        "priority": priority(content, question), "tags": [tags], "click": hub.ui_url,
        "actions": actions, "sequence_id": sequence,
    });
    let base = server(c)?;
    let mut req = hub.http(base).post(format!("{base}/")).json(&body);
    if let Some(t) = token_of(hub, c) {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.map_err(ChannelError::http)?;
    let status = res.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(ChannelError::failed(
            format!("the ntfy server answered {status}"),
            Some(status),
        ));
    }
    let reply: Value = res.json().await.unwrap_or(Value::Null);
    Ok(Some(
        json!({"message_id": reply["id"], "sequence_id": sequence}),
    ))
}

/// Takes the message for `key` off every device (`DELETE /<topic>/<sequence id>`).
pub async fn delete(hub: &Hub, c: &Channel, key: &str) -> Result<(), ChannelError> {
    let base = server(c)?;
    let url = format!("{base}/{}/{}", topic(c)?, sequence_id(key));
    let mut req = hub.http(base).delete(url);
    if let Some(t) = token_of(hub, c) {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.map_err(ChannelError::http)?;
    let status = res.status().as_u16();
    // Already gone (expired from the cache) is as good as deleted.
    if (200..300).contains(&status) || status == 404 {
        Ok(())
    } else {
        Err(ChannelError::failed(
            format!("the ntfy server answered {status} to the withdrawal"),
            Some(status),
        ))
    }
}

/// Drops the capabilities of a settled question (and any that expired).
pub fn forget_capabilities(hub: &Hub, interaction_id: &str) {
    let now = Timestamp::now();
    let _ = hub.broker.drop_capabilities::<Capability>(|cap| {
        cap.interaction_id == interaction_id || cap.expires_at <= now
    });
}

/// Where the answer stream of a channel got to (`ntfy_cursors.json`: channel id → the last
/// message id seen).
fn cursors_file(hub: &Hub) -> std::path::PathBuf {
    hub.paths.config_dir.join("ntfy_cursors.json")
}

fn load_cursor(hub: &Hub, channel: &str) -> Option<String> {
    let bytes = std::fs::read(cursors_file(hub)).ok()?;
    let map: std::collections::BTreeMap<String, String> = serde_json::from_slice(&bytes).ok()?;
    map.get(channel).cloned()
}

fn save_cursor(hub: &Hub, channel: &str, id: &str) {
    let path = cursors_file(hub);
    let mut map: std::collections::BTreeMap<String, String> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    map.insert(channel.to_string(), id.to_string());
    let bytes = serde_json::to_vec(&map).expect("a map of strings serialises");
    if let Err(e) = crate::fsutil::write_atomic(&path, &bytes, 0o600) {
        tracing::warn!(channel, error = %e, "cannot save the ntfy answer cursor");
    }
}

/// Background task: the answer subscription of one channel, for as long as it exists.
pub async fn subscribe(hub: Arc<Hub>, c: Channel) {
    let mut failures = 0u32;
    loop {
        match listen(&hub, &c, &mut failures).await {
            Ok(()) => tracing::info!(channel = %c.id, "ntfy answer stream ended; reconnecting"),
            Err(e) => {
                tracing::warn!(channel = %c.id, attempts = failures + 1, error = %e, "ntfy answer stream failed")
            }
        }
        failures += 1;
        tokio::time::sleep(retry_wait(failures)).await;
    }
}

/// One connection: reads the stream until it ends. A stream that opened resets the backoff.
async fn listen(hub: &Hub, c: &Channel, failures: &mut u32) -> Result<(), ChannelError> {
    let base = server(c)?;
    let answer_topic = c
        .answer_topic()
        .ok_or_else(|| ChannelError::Unavailable(c.id.clone(), "no answer topic".into()))?;
    // Every message still cached the first time: tokens are single-use, so old ones do
    // nothing, and a press made before the first connection still counts.
    let since = load_cursor(hub, &c.id).unwrap_or_else(|| "all".into());
    let since: String = form_urlencoded::byte_serialize(since.as_bytes()).collect();
    let mut req = Hub::stream_http(base).get(format!("{base}/{answer_topic}/json?since={since}"));
    if let Some(t) = token_of(hub, c) {
        req = req.bearer_auth(t);
    }
    let mut res = req.send().await.map_err(ChannelError::http)?;
    let status = res.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(ChannelError::failed(
            format!("the ntfy server answered {status} to the subscription"),
            Some(status),
        ));
    }
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(ChannelError::http)? {
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            match event["event"].as_str() {
                Some("open") => *failures = 0,
                Some("message") => {
                    let token = event["message"].as_str().unwrap_or("").trim();
                    on_token(hub, &c.id, token).await;
                    if let Some(id) = event["id"].as_str() {
                        save_cursor(hub, &c.id, id);
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// A button was pressed: a valid, unused, current token answers its question.
async fn on_token(hub: &Hub, channel: &str, token: &str) {
    if token.is_empty() || token.len() > 128 {
        return;
    }
    let key = hex_sha256(token.as_bytes());
    let cap: Capability = match hub.broker.take_capability::<Capability>(&key) {
        Ok(Some(cap)) if cap.channel == channel => cap,
        Ok(_) => {
            tracing::info!(channel, "ntfy answer with an unknown or used token ignored");
            return;
        }
        Err(e) => {
            tracing::error!(channel, error = %e, "cannot read answer capabilities");
            return;
        }
    };
    let _ = hub.broker.commit_outbox().await;
    let id = cap.interaction_id.as_str();
    let record = match hub.broker.get(id).await {
        Ok(r) if r.status == Status::Pending && r.request_digest == cap.request_digest => r,
        _ => {
            tracing::info!(
                id,
                channel,
                "ntfy answer for a question no longer pending ignored"
            );
            return;
        }
    };
    let body = json!({
        "response_id": format!("ntfy-{}", &key[..32]),
        "request_digest": record.request_digest,
        "nonce": record.nonce,
        "choice_id": cap.choice_id,
        "source": "ntfy",
    });
    let sub = match AnswerSubmission::from_json(&body) {
        Ok(s) => s,
        Err(_) => return,
    };
    match hub.broker.respond(id, sub).await {
        Ok(_) => tracing::info!(id, channel, "answered from ntfy"),
        Err(e) => tracing::info!(id, channel, error = %e, "ntfy answer refused"),
    }
}
