//! `doctor`'s broker probe: `GET /health` through the loopback client, with a short
//! timeout. Unlike attaching, it never starts a broker and never asks one to exit.

use std::time::Duration;

use crate::client::{Client, ClientError};

/// How long the broker gets to connect and answer.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);

/// What answered at the broker URL.
pub enum Health {
    Down,
    Ok { version: String, api: String },
    Foreign(String),
}

/// Asks the broker `client` points at for its health.
pub fn health(client: &Client) -> Health {
    let address = client.address();
    if !address.starts_with("http://") && !address.starts_with("unix:") {
        return Health::Foreign("not an http:// URL".into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(client.health(HEALTH_TIMEOUT)) {
        Ok(v) if v["status"] == "ok" => Health::Ok {
            version: v["version"].as_str().unwrap_or("unknown").to_string(),
            api: v["api"].as_str().unwrap_or("unknown").to_string(),
        },
        Ok(_) => Health::Foreign("its /health reply has no \"status\": \"ok\"".into()),
        Err(ClientError::Unreachable(_) | ClientError::Interrupted(_)) => Health::Down,
        Err(ClientError::BadReply(what)) => Health::Foreign(what),
        Err(e @ ClientError::Api { status, .. }) => Health::Foreign(format!("HTTP {status}: {e}")),
        Err(e) => Health::Foreign(e.to_string()),
    }
}

/// The running broker's `GET /v1/channels/status`, if it answers.
pub fn channels_status(client: &Client) -> Option<serde_json::Value> {
    get(client, "/v1/channels/status", HEALTH_TIMEOUT)
}

/// A `GET` of the running broker's API from doctor's blocking code, if it answers in time.
pub fn get(client: &Client, path: &str, timeout: Duration) -> Option<serde_json::Value> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime
        .block_on(client.call(crate::client::Method::GET, path, None, timeout))
        .ok()
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    fn at(url: &str) -> Client {
        Client::new(url, Secret::new(String::new()))
    }

    #[test]
    fn a_closed_port_is_down() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        assert!(matches!(health(&at(&url)), Health::Down));
        assert!(matches!(health(&at("https://x")), Health::Foreign(_)));
    }
}
