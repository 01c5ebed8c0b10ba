//! `docs/openapi.yaml` documents exactly the routes the daemon serves.

use std::collections::BTreeSet;

use serde_json::json;

use crate::support::{Daemon, Home};

/// (METHOD, path) pairs documented in the OpenAPI file.
fn documented() -> BTreeSet<(String, String)> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.yaml")).unwrap();
    let mut out = BTreeSet::new();
    let mut in_paths = false;
    let mut path = String::new();
    for line in text.lines() {
        if line == "paths:" {
            in_paths = true;
            continue;
        }
        if in_paths && !line.starts_with(' ') && !line.is_empty() {
            break;
        }
        if let Some(p) = line.strip_prefix("  /").and_then(|l| l.strip_suffix(':')) {
            path = format!("/{p}");
        } else if let Some(m) = line.strip_prefix("    ").and_then(|l| l.strip_suffix(':')) {
            if ["get", "post", "put", "delete", "patch"].contains(&m) {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_openapi_file_matches_the_routes_served() {
    let docs = documented();
    let code: BTreeSet<(String, String)> = agentnotify::api::ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(docs, code, "docs/openapi.yaml and api::ROUTES differ");

    // Every listed route is really served: never "no such route" or 405.
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("openapi").await;
    let (_, n) = api
        .post("/v1/notifications", json!({"title": "t", "message": "m"}))
        .await;
    for (method, path) in &code {
        if path.ends_with("/shutdown") {
            continue; // served, but it would stop the broker under test
        }
        let id = if path.contains("notifications") {
            n["id"].as_str().unwrap()
        } else {
            q["id"].as_str().unwrap()
        };
        let path = path.replace("{id}", id).replace("/wait", "/wait?timeout=1");
        let (s, v) = match method.as_str() {
            "GET" => api.get(&path).await,
            "DELETE" => api.call("DELETE", &path, None).await,
            _ => api.post(&path, json!({})).await,
        };
        assert!(
            s != 405 && !(s == 404 && v["error"].as_str().unwrap_or("").contains("no such route")),
            "{method} {path}: {s} {v}"
        );
    }
}
