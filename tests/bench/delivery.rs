//! Delivery benchmarks (docs/BENCHMARKS.md, "Delivery"): question → publish received by a
//! loopback ntfy stand-in and webhook receiver; ntfy button pressed → hook exited with the
//! decision; 1,000 questions fanned out to 3 channels with one receiver down (memory, CPU).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::receivers::{Ntfy, WebhookReceiver};
use crate::{rss_kib, start_broker, summary, Api, AGENTNOTIFY, HOOK};

fn cli(home: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(AGENTNOTIFY)
        .args(args)
        .env("AGENTNOTIFY_HOME", home)
        .env("AGENTNOTIFY_PORT", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// CPU time (user + system) the process used so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // After the command: state, then ppid…; utime and stime are fields 14 and 15 overall.
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn payload(i: usize) -> String {
    json!({"session_id": format!("bench-{i}"), "transcript_path": null, "cwd": "/home/dev/shop",
        "permission_mode": "default", "hook_event_name": "PermissionRequest", "tool_name": "Bash",
        "tool_input": {"command": format!("echo {i}"), "description": "bench"}})
    .to_string()
}

pub async fn run(scale: f64) {
    let n = |x: usize| ((x as f64 * scale) as usize).max(5);
    let ntfy = Ntfy::start().await;
    let hook_rx = WebhookReceiver::start().await;
    let home = tempfile::tempdir().unwrap();
    cli(
        home.path(),
        &[
            "channels",
            "add",
            "ntfy",
            "phone",
            "--server",
            &ntfy.url,
            "--topic",
            "bench",
            "--include-message",
            "--answer-buttons",
        ],
    );
    cli(
        home.path(),
        &["channels", "add", "webhook", "ops", "--url", &hook_rx.url],
    );
    let b = start_broker(home);
    let api = Api::new(&b);
    ntfy.wait_for(10, |s| s.open_streams("bench-answers") == 1)
        .await;

    // Question created → the publish received.
    let (mut to_ntfy, mut to_hook) = (Vec::new(), Vec::new());
    for i in 0..n(200) {
        let t0 = Instant::now();
        let (_, q) = api
            .post(
                "/v1/interactions/request",
                &json!({"kind": "permission", "prompt": format!("q{i}")}),
            )
            .await;
        let id = q["id"].as_str().unwrap().to_string();
        let seen_ntfy = async {
            ntfy.wait_for(10, |s| {
                s.publishes()
                    .iter()
                    .any(|p| p["message"] == format!("q{i}"))
            })
            .await;
            t0.elapsed()
        };
        let seen_hook = async {
            hook_rx
                .wait_for(10, |rs| {
                    rs.iter().any(|r| r.json()["data"]["id"] == id.as_str())
                })
                .await;
            t0.elapsed()
        };
        let (a, c) = tokio::join!(seen_ntfy, seen_hook);
        to_ntfy.push(a);
        to_hook.push(c);
        api.post(&format!("/v1/interactions/{id}/cancel"), &json!({}))
            .await;
    }
    summary(
        "question created → publish received by the loopback ntfy",
        to_ntfy,
        None,
    );
    summary(
        "question created → webhook received (signed)",
        to_hook,
        None,
    );

    // ntfy button pressed → hook exited with the decision.
    let mut press = Vec::new();
    for i in 0..n(50) {
        let mut child = Command::new(HOOK)
            .args(["claude", "ask-permission", "--timeout", "60"])
            .env("AGENTNOTIFY_HOME", b._home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload(i).as_bytes())
            .unwrap();
        let needle = format!("echo {i}");
        ntfy.wait_for(20, |s| {
            s.shown("bench").iter().any(|m| {
                m["message"].as_str().is_some_and(|t| t.contains(&needle))
                    && m["actions"].is_array()
            })
        })
        .await;
        let actions: Vec<Value> = ntfy
            .shown("bench")
            .into_iter()
            .find(|m| m["message"].as_str().is_some_and(|t| t.contains(&needle)))
            .and_then(|m| m["actions"].as_array().cloned())
            .unwrap();
        let allow = actions
            .iter()
            .find(|a| a["label"] == "Allow once")
            .unwrap()
            .clone();
        let t0 = Instant::now();
        ntfy.press(&allow).await;
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        press.push(t0.elapsed());
        assert!(String::from_utf8_lossy(&out.stdout).contains("allow"));
    }
    summary(
        "ntfy button pressed → hook exited with the decision",
        press,
        None,
    );
    drop(b);

    // 1,000 questions to 3 channels, one receiver down; first the same questions with no
    // channel at all, for the memory the questions themselves take.
    let total = ((1000.0 * scale) as usize).max(50);
    let bare = start_broker(tempfile::tempdir().unwrap());
    let bare_api = Api::new(&bare);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let bare0 = rss_kib(bare.pid, "VmRSS:");
    for i in 0..total {
        bare_api
            .post(
                "/v1/interactions/request",
                &json!({"kind": "permission", "prompt": format!("f{i}"), "ttl_seconds": 3600}),
            )
            .await;
    }
    let bare1 = rss_kib(bare.pid, "VmRSS:");
    drop(bare);
    println!(
        "- {total} questions, no channel: broker RSS {:.1} MiB before, {:.1} MiB after",
        bare0 as f64 / 1024.0,
        bare1 as f64 / 1024.0
    );
    let down_port = WebhookReceiver::start().await.stop();
    let up = WebhookReceiver::start().await;
    let ntfy2 = Ntfy::start().await;
    let home = tempfile::tempdir().unwrap();
    cli(
        home.path(),
        &[
            "channels", "add", "ntfy", "phone", "--server", &ntfy2.url, "--topic", "fan",
        ],
    );
    cli(
        home.path(),
        &["channels", "add", "webhook", "up", "--url", &up.url],
    );
    cli(
        home.path(),
        &[
            "channels",
            "add",
            "webhook",
            "down",
            "--url",
            &format!("http://127.0.0.1:{down_port}/hook"),
        ],
    );
    let b = start_broker(home);
    let api = Api::new(&b);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = rss_kib(b.pid, "VmRSS:");
    let t0 = Instant::now();
    for i in 0..total {
        api.post(
            "/v1/interactions/request",
            &json!({"kind": "permission", "prompt": format!("f{i}"), "ttl_seconds": 3600}),
        )
        .await;
    }
    up.wait_for(120, |rs| rs.len() >= total).await;
    ntfy2.wait_for(120, |s| s.publishes().len() >= total).await;
    let fanned = t0.elapsed();
    let rss1 = rss_kib(b.pid, "VmRSS:");
    // The down receiver's entries now back off (1 s, 2 s, 4 s, … with jitter): measure the
    // broker's CPU over a quiet window once the first retries are past.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let c0 = cpu(b.pid);
    let window = Duration::from_secs(20);
    tokio::time::sleep(window).await;
    let c1 = cpu(b.pid);
    let rss2 = rss_kib(b.pid, "VmRSS:");
    let st = api.get("/v1/channels/status").await;
    let waiting = st["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "down")
        .map(|c| c["waiting"].clone())
        .unwrap_or(Value::Null);
    println!(
        "- {total} questions fanned out to 3 channels (ntfy, a webhook, a webhook that is down): \
         delivered to the two live ones in {:.1} s; broker RSS {:.1} MiB before, {:.1} MiB after, \
         {:.1} MiB 28 s later with {waiting} entries still retrying; CPU {:.2} s over a {} s window \
         of retries ({:.1} %)",
        fanned.as_secs_f64(),
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        rss2 as f64 / 1024.0,
        (c1 - c0).as_secs_f64(),
        window.as_secs(),
        100.0 * (c1 - c0).as_secs_f64() / window.as_secs_f64()
    );
}
