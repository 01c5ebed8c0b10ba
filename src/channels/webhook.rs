//! Webhooks (SPEC §11.5): Standard Webhooks — `webhook-id` (stable across retries),
//! `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `{id}.{timestamp}.{body}` with the key of a `whsec_<base64>` secret. A 2xx is delivered;
//! a 410 means the endpoint is gone and the event is not retried; anything else (a 3xx
//! included: redirects are not followed) is retried by the outbox, not before the receiver's
//! `Retry-After`.

use std::time::{Duration, SystemTime};

use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};

use super::config::{self, Channel};
use super::{ChannelError, Hub};
use crate::model::Timestamp;
use crate::secret::Secret;

/// A new signing secret: 32 random bytes as `whsec_<base64>`.
pub fn new_secret() -> Secret {
    let key: [u8; 32] = rand::random();
    Secret::new(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    ))
}

/// The key inside a `whsec_` secret; `None` when it is not one.
pub fn key_of(secret: &str) -> Option<Vec<u8>> {
    let b64 = secret.trim().strip_prefix("whsec_")?;
    let key = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    (!key.is_empty()).then_some(key)
}

/// `v1,<base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`.
pub fn signature(key: &[u8], id: &str, timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// POSTs one signed event. `id` is the outbox entry's: the same for every retry.
pub async fn send(
    hub: &Hub,
    c: &Channel,
    id: &str,
    event: &str,
    data: &Value,
) -> Result<Option<Value>, ChannelError> {
    let url = c
        .url
        .as_deref()
        .ok_or_else(|| ChannelError::Unavailable(c.id.clone(), "no url set".into()))?;
    let secret = config::load_secrets(&hub.paths)?
        .remove(&c.id)
        .and_then(|s| s.webhook_secret)
        .ok_or_else(|| {
            ChannelError::Unavailable(
                c.id.clone(),
                "no signing secret stored; add the channel again".into(),
            )
        })?;
    let key = key_of(secret.expose()).ok_or_else(|| {
        ChannelError::Unavailable(
            c.id.clone(),
            "the stored secret is not whsec_<base64>".into(),
        )
    })?;
    let now = Timestamp::now();
    let body = serde_json::to_vec(&json!({
        "type": event, "timestamp": now.to_rfc3339(), "data": data,
    }))
    .expect("an event serialises");
    let ts = now.millis() / 1000;
    let res = hub
        .http(url)
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", signature(&key, id, ts, &body))
        .body(body)
        .send()
        .await
        .map_err(ChannelError::http)?;
    let status = res.status().as_u16();
    match status {
        200..=299 => Ok(None),
        410 => Err(ChannelError::Gone {
            message: "the webhook answered 410 Gone: the receiver removed this endpoint, so \
                      this event is not retried (check the URL, then `agentnotify channels \
                      test` once it is back)"
                .into(),
            status,
        }),
        _ => Err(ChannelError::Failed {
            message: format!("the webhook answered {status}"),
            status: Some(status),
            retry_after: retry_after(res.headers(), SystemTime::now()),
        }),
    }
}

/// A `Retry-After` header (seconds, or an HTTP date) as a wait from `now`, at most an hour:
/// Standard Webhooks asks senders to honour it on 429 and 5xx, and a receiver's "come back
/// tomorrow" must not park an event past the point where it still matters.
fn retry_after(headers: &reqwest::header::HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let wait = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .unwrap_or_default(),
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn signs_like_the_standard_webhooks_example() {
        let key = key_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_is_capped() {
        use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
            retry_after(&h, now)
        };
        assert_eq!(with("120"), Some(Duration::from_secs(120)));
        assert_eq!(
            with("Wed, 21 Oct 2015 07:28:30 GMT"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(with("Wed, 21 Oct 2015 07:27:00 GMT"), Some(Duration::ZERO));
        assert_eq!(with("999999"), Some(MAX_RETRY_AFTER));
        assert_eq!(with("soon"), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn new_secrets_are_whsec_with_a_32_byte_key() {
        let s = new_secret();
        assert_eq!(key_of(s.expose()).unwrap().len(), 32);
        assert!(key_of("not-a-secret").is_none());
    }
}
