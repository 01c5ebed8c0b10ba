//! The Relay's HTTP contract spoken directly, as a broker and phones would, for tests that
//! need many installations and devices without a broker behind each.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

/// One `relay serve` seen through raw HTTP.
pub(crate) struct RawRelay {
    pub(crate) url: String,
    pub(crate) http: reqwest::Client,
}

/// An installation registered through [`RawRelay::installation`].
pub(crate) struct Inst {
    pub(crate) id: String,
    pub(crate) token: String,
}

/// A device paired through [`RawRelay::pair`].
pub(crate) struct Dev {
    pub(crate) id: String,
    pub(crate) token: String,
}

impl RawRelay {
    pub(crate) fn new(url: &str) -> RawRelay {
        RawRelay {
            url: url.to_string(),
            http: agentnotify_relay_proto::tls::plain_http_client()
                .build()
                .unwrap(),
        }
    }

    /// POSTs JSON; returns the status and the reply's JSON (Null when it has none).
    pub(crate) async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        let mut r = self
            .http
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        reply(r).await
    }

    pub(crate) async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        reply(
            self.http
                .get(format!("{}{path}", self.url))
                .bearer_auth(token),
        )
        .await
    }

    pub(crate) async fn delete(&self, path: &str, token: &str) -> (u16, Value) {
        reply(
            self.http
                .delete(format!("{}{path}", self.url))
                .bearer_auth(token),
        )
        .await
    }

    pub(crate) async fn installation(&self) -> Inst {
        let (code, v) = self
            .post(
                "/v1/installations",
                None,
                json!({"pairing_token": "0123456789abcdef0123"}),
            )
            .await;
        assert_eq!(code, 201, "{v}");
        Inst {
            id: v["installation_id"].as_str().unwrap().into(),
            token: v["installation_token"].as_str().unwrap().into(),
        }
    }

    /// Announces a fresh pairing code for `inst` and pairs a device with it.
    pub(crate) async fn pair(&self, inst: &Inst) -> Dev {
        let code = agentnotify_model::secret::random_b64url(24);
        let expires = agentnotify_model::Timestamp::now()
            .plus(Duration::from_secs(300))
            .to_rfc3339();
        let (status, v) = self
            .post(
                "/v1/pairings",
                Some(&inst.token),
                json!({"pairing_id": code[..8], "pairing_token": code, "expires_at": expires}),
            )
            .await;
        assert_eq!(status, 201, "{v}");
        let (status, v) = self
            .post(
                "/v1/devices",
                None,
                json!({"installation_id": inst.id, "pairing_token": code,
                       "public_key": URL_SAFE_NO_PAD.encode([7u8; 32]), "proof": "x"}),
            )
            .await;
        assert_eq!(status, 201, "{v}");
        Dev {
            id: v["device_id"].as_str().unwrap().into(),
            token: v["device_token"].as_str().unwrap().into(),
        }
    }

    /// Stores a (pretend-sealed) question envelope for `dev`.
    pub(crate) async fn envelope(&self, inst: &Inst, dev: &Dev, interaction: &str) {
        let expires = agentnotify_model::Timestamp::now()
            .plus(Duration::from_secs(600))
            .to_rfc3339();
        let (status, v) = self
            .post(
                "/v1/envelopes",
                Some(&inst.token),
                json!({"device_id": dev.id, "event_id": format!("interaction:{interaction}"),
                       "key_id": "0011223344556677", "expires_at": expires,
                       "sealed": "c2VhbGVk", "signature": "s"}),
            )
            .await;
        assert!(matches!(status, 200 | 201), "{status} {v}");
    }

    /// The installation settles a question: it leaves every device (SPEC §12.4).
    pub(crate) async fn withdraw(&self, inst: &Inst, interaction: &str) -> (u16, Value) {
        self.delete(
            &format!("/v1/envelopes/interaction:{interaction}?reason=cancelled"),
            &inst.token,
        )
        .await
    }

    /// The interaction ids of the envelopes `dev` holds.
    pub(crate) async fn held(&self, dev: &Dev) -> Vec<String> {
        let (status, v) = self.get("/v1/envelopes", &dev.token).await;
        assert_eq!(status, 200, "{v}");
        let mut ids: Vec<String> = v["envelopes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e["event_id"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("interaction:")
                    .into()
            })
            .collect();
        ids.sort();
        ids
    }

    /// The device ids `GET /v1/devices` lists for `inst`.
    pub(crate) async fn devices(&self, inst: &Inst) -> Vec<String> {
        let (status, v) = self.get("/v1/devices", &inst.token).await;
        assert_eq!(status, 200, "{v}");
        let mut ids: Vec<String> = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["device_id"].as_str().unwrap().into())
            .collect();
        ids.sort();
        ids
    }
}

async fn reply(r: reqwest::RequestBuilder) -> (u16, Value) {
    let res = r.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}
