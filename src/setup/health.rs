//! A dependency-free probe of the broker's `GET /health` (doctor must not need a runtime
//! or the HTTP client to say whether the broker is up).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;

/// How long the broker gets to connect and answer.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);

/// What answered at the broker URL.
pub enum Health {
    Down,
    Ok { version: String, api: String },
    Foreign(String),
}

/// `GET {url}/health` over plain HTTP/1.1 with a short timeout.
pub fn health(url: &str) -> Health {
    let Some(authority) = url
        .strip_prefix("http://")
        .map(|rest| rest.split('/').next().unwrap_or_default())
    else {
        return Health::Foreign("not an http:// URL".into());
    };
    let Some(addr) = authority.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return Health::Foreign(format!("cannot resolve {authority}"));
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, HEALTH_TIMEOUT) else {
        return Health::Down;
    };
    let _ = stream.set_read_timeout(Some(HEALTH_TIMEOUT));
    let _ = stream.set_write_timeout(Some(HEALTH_TIMEOUT));
    let request = format!("GET /health HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nAccept: application/json\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return Health::Down;
    }
    let mut response = Vec::new();
    if stream.take(64 * 1024).read_to_end(&mut response).is_err() && response.is_empty() {
        return Health::Down;
    }
    let response = String::from_utf8_lossy(&response);
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        return Health::Foreign("no HTTP response".into());
    };
    let status_ok = head
        .lines()
        .next()
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("200"));
    let body: Option<Value> = serde_json::from_str(body.trim())
        .ok()
        .or_else(|| dechunk(body));
    match body {
        Some(v) if status_ok && v["status"] == "ok" => Health::Ok {
            version: v["version"].as_str().unwrap_or("unknown").to_string(),
            api: v["api"].as_str().unwrap_or("unknown").to_string(),
        },
        _ => Health::Foreign(head.lines().next().unwrap_or_default().to_string()),
    }
}

/// Decodes a chunked body (a server may chunk even a tiny reply).
fn dechunk(body: &str) -> Option<Value> {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size, tail) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            break;
        }
        out.push_str(tail.get(..size)?);
        rest = tail.get(size..)?.strip_prefix("\r\n")?;
    }
    serde_json::from_str(&out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_read() {
        let body = "1a\r\n{\"status\":\"ok\",\"api\":\"v1\"}\r\n0\r\n\r\n";
        assert_eq!(dechunk(body).unwrap()["api"], "v1");
    }

    #[test]
    fn a_closed_port_is_down() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        assert!(matches!(health(&url), Health::Down));
        assert!(matches!(health("https://x"), Health::Foreign(_)));
    }
}
