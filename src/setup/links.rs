//! `doctor`'s checks of where questions go: the channels configured and their last delivery
//! error, and each Relay link (configured, reachable, paired phones). Config and the
//! allow-list are read as plain TOML/JSON, and reachability is asked of a running broker,
//! so the hook binary (which runs `doctor`) links neither the delivery code nor TLS.

use serde_json::Value;

use super::doctor::{Check, Status};
use crate::client::Client;
use crate::paths::Paths;

/// The channel and Relay checks. `broker` and its `status` (`GET /v1/channels/status`) are
/// asked once by the caller; `None` when no broker runs.
pub fn checks(paths: &Paths, broker: Option<&Client>, status: Option<&Value>) -> Vec<Check> {
    let config = read_config(paths);
    let mut checks = channels(&config, status);
    checks.extend(relays(paths, &config, broker));
    checks
}

fn read_config(paths: &Paths) -> toml::Table {
    let text = crate::fsutil::read_text_or_empty(&paths.config_file()).unwrap_or_default();
    text.parse().unwrap_or_default()
}

/// Entries of `[section] key` (`[[channels.channel]]`, `[[relay.providers]]`).
fn entries<'a>(config: &'a toml::Table, section: &str, key: &str) -> Vec<&'a toml::Table> {
    config
        .get(section)
        .and_then(|s| s.get(key))
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_table()).collect())
        .unwrap_or_default()
}

fn text<'a>(t: &'a toml::Table, key: &str) -> &'a str {
    t.get(key).and_then(|v| v.as_str()).unwrap_or("?")
}

fn channels(config: &toml::Table, status: Option<&Value>) -> Vec<Check> {
    let configured = entries(config, "channels", "channel");
    let has_relay = !entries(config, "relay", "providers").is_empty();
    if configured.is_empty() {
        let check = Check::new(
            None,
            "channels_configured",
            Status::Info,
            "none: questions reach you in this terminal (`agentnotify answer`) and the web page (`agentnotify ui`) only",
        );
        return vec![if has_relay {
            check
        } else {
            check.fix("run `agentnotify setup` to add desktop notifications, ntfy or the phone app")
        }];
    }
    let list: Vec<String> = configured
        .iter()
        .map(|c| format!("{} ({})", text(c, "id"), text(c, "kind")))
        .collect();
    let mut checks = vec![Check::new(
        None,
        "channels_configured",
        Status::Ok,
        list.join(", "),
    )];
    for c in status
        .and_then(|s| s["channels"].as_array())
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] != "relay")
    {
        checks.extend(last_error(c));
    }
    checks
}

/// A channel whose latest attempt failed and that still has something undelivered.
fn last_error(c: &Value) -> Option<Check> {
    let error = c["last_error"].as_str()?;
    let id = c["id"].as_str().unwrap_or("?");
    let waiting = c["waiting"].as_u64().unwrap_or(0) + c["dead"].as_u64().unwrap_or(0);
    let check = Check::new(
        None,
        "channel_delivery",
        if waiting > 0 {
            Status::Fail
        } else {
            Status::Info
        },
        if waiting > 0 {
            format!("{id}: the last delivery failed: {error} ({waiting} not delivered)")
        } else {
            format!("{id}: delivered since; an earlier attempt failed: {error}")
        },
    );
    Some(if waiting > 0 {
        check.fix(format!(
            "see `agentnotify channels status`; try it with `agentnotify channels test {id}`"
        ))
    } else {
        check
    })
}

fn relays(paths: &Paths, config: &toml::Table, broker: Option<&Client>) -> Vec<Check> {
    let providers = entries(config, "relay", "providers");
    if providers.is_empty() {
        return Vec::new();
    }
    let devices = paired_devices(paths);
    let status = broker.and_then(relay_status);
    let mut checks = Vec::new();
    for p in providers {
        let id = text(p, "id");
        let url = text(p, "relay_url");
        checks.push(Check::new(
            None,
            "relay_configured",
            Status::Ok,
            format!("{id} at {url}"),
        ));
        let reach = status.as_ref().and_then(|s| {
            s["providers"]
                .as_array()?
                .iter()
                .find(|r| r["id"] == id)
                .cloned()
        });
        checks.push(match reach {
            None => Check::new(
                None,
                "relay_reachable",
                Status::Info,
                format!("{id}: not checked (the broker is not running; it starts on demand)"),
            )
            .fix("check now with `agentnotify relay status`, then run doctor again"),
            Some(r) if r["reachable"] == true => {
                Check::new(None, "relay_reachable", Status::Ok, format!("{id}: {url} answers"))
            }
            Some(r) => Check::new(
                None,
                "relay_reachable",
                Status::Fail,
                format!(
                    "{id}: {url} does not answer: {}",
                    r["unreachable_reason"].as_str().unwrap_or("unknown")
                ),
            )
            .fix(format!(
                "check the URL and your network; `agentnotify relay remove {id}` then `agentnotify setup --relay URL` to replace it"
            )),
        });
        let n = devices.get(id).copied().unwrap_or(0);
        checks.push(if n == 0 {
            Check::new(
                None,
                "relay_devices",
                Status::Fail,
                format!("{id}: no phone paired, so no question reaches a phone"),
            )
            .fix(format!(
                "run `agentnotify relay pair {id}` and scan the code"
            ))
        } else {
            Check::new(
                None,
                "relay_devices",
                Status::Ok,
                format!("{id}: {n} phone(s) paired"),
            )
        });
    }
    checks
}

/// Paired, unrevoked devices per provider, from the broker's allow-list file.
fn paired_devices(paths: &Paths) -> std::collections::HashMap<String, usize> {
    let path = paths.config_dir.join("relay_devices.json");
    let list: Value = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    list.as_object()
        .into_iter()
        .flatten()
        .map(|(provider, devices)| {
            let n = devices
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d.get("revoked_at").is_none_or(Value::is_null))
                .count();
            (provider.clone(), n)
        })
        .collect()
}

/// The running broker's `GET /v1/relay/status` (which asks each Relay).
fn relay_status(client: &Client) -> Option<Value> {
    super::health::get(
        client,
        "/v1/relay/status",
        std::time::Duration::from_secs(10),
    )
}
