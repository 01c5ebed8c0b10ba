//! `agentnotify-hook pi gate [--timeout S]`: one gated Pi tool call, asked at the broker.
//!
//! Our Pi extension spawns this for each gated call while Pi's own dialog is open, and
//! kills it (SIGTERM) when that dialog is answered first: the question is then withdrawn.
//! Prints `{"decision":"allow"}` or `{"decision":"deny"}`, or nothing on any failure (the
//! dialog decides); always exits 0. The extension, not this process, talks to Pi: the
//! discovery, the token and the broker's proof stay in one Rust client.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::ask::{self, AskError};
use crate::client;
use crate::model::digest::hex_sha256;
use crate::model::interaction::BODY_MAX;
use crate::paths::Paths;

/// Largest call read from stdin.
const MAX_INPUT: usize = 1024 * 1024;
/// Default wait: Pi's own dialog has no timeout, so the question's TTL bounds it.
const DEFAULT_TIMEOUT_SECS: u64 = 590;
/// How long a signal waits for a question being opened to return its id.
const OPENING_GRACE: Duration = Duration::from_millis(300);

/// Runs the gate; `args` follow `pi gate`. Exits the process with 0.
pub fn main(args: &[std::ffi::OsString]) -> ! {
    crate::fsutil::make_new_files_private();
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(panic = %info, "pi gate panicked; staying silent");
    }));
    let budget = Duration::from_secs(timeout_arg(args).unwrap_or(DEFAULT_TIMEOUT_SECS));
    let decision = std::panic::catch_unwind(|| {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_INPUT as u64 + 1)
            .read_to_end(&mut buf)
            .ok()?;
        let call: Value = serde_json::from_slice(&buf).ok()?;
        run(&call, budget)
    })
    .ok()
    .flatten();
    if let Some(allow) = decision {
        let line = json!({"decision": if allow { "allow" } else { "deny" }});
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    std::process::exit(0)
}

/// `--timeout S`, 1–3600; anything else is the default.
fn timeout_arg(args: &[std::ffi::OsString]) -> Option<u64> {
    let at = args.iter().position(|a| a == "--timeout")?;
    let secs: u64 = args.get(at + 1)?.to_str()?.parse().ok()?;
    Some(secs.clamp(1, 3600))
}

/// What the person is asked for one call: a one-line prompt and, whole, what runs.
pub fn question(call: &Value, ttl_seconds: u64) -> Option<Value> {
    let tool = call["tool_name"].as_str().filter(|t| !t.is_empty())?;
    let input = &call["input"];
    let path = input["path"].as_str().unwrap_or("?");
    let (prompt, body) = match tool {
        "bash" => (
            "Pi wants to run a command".to_string(),
            input["command"].as_str()?.to_string(),
        ),
        "write" => (
            format!("Pi wants to write {path}"),
            input["content"].as_str().unwrap_or("").to_string(),
        ),
        "edit" => (
            format!("Pi wants to edit {path}"),
            serde_json::to_string_pretty(input).ok()?,
        ),
        other => (
            format!("Pi wants to use {other}"),
            serde_json::to_string_pretty(input).ok()?,
        ),
    };
    // Nothing is cut (SPEC §13.1): what does not fit is left to Pi's dialog.
    if body.chars().count() > BODY_MAX || prompt.chars().count() > 2000 {
        return None;
    }
    let project = ask::project_of(call["cwd"].as_str());
    let fingerprint = json!([
        project,
        call["session_id"],
        call["tool_call_id"],
        tool,
        input
    ]);
    Some(json!({
        "key": format!("pi-{}", &hex_sha256(fingerprint.to_string().as_bytes())[..48]),
        "agent": "pi",
        "project": project,
        "session_id": call["session_id"].as_str(),
        "native_request_id": call["tool_call_id"].as_str(),
        "kind": "permission",
        "prompt": prompt,
        "body": if body.is_empty() { Value::Null } else { Value::String(body) },
        "ttl_seconds": ttl_seconds.clamp(30, 3600),
        "owner_lease": true,
    }))
}

/// `Some(true)` allow, `Some(false)` deny, `None` the dialog decides.
fn run(call: &Value, budget: Duration) -> Option<bool> {
    let started = std::time::Instant::now();
    let paths = Paths::from_env().ok()?;
    let _log = crate::logging::init_blocking(&paths, "hook", "info");
    let Some(request) = question(call, budget.as_secs()) else {
        tracing::info!("pi call not asked remotely; Pi's dialog decides");
        return None;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async move {
        let deadline = Instant::from_std(started + budget);
        let opened: Arc<Mutex<Option<(client::Client, String)>>> = Arc::default();
        let work = ask_once(&paths, &request, deadline, Arc::clone(&opened));
        tokio::pin!(work);
        let outcome = tokio::select! {
            r = &mut work => r,
            sig = host_gives_up() => {
                tracing::info!(signal = sig, "Pi's dialog answered first; withdrawing");
                // A question being opened right now must be learnt to be withdrawn.
                if opened.lock().expect("not poisoned").is_none() {
                    let _ = tokio::time::timeout(OPENING_GRACE, &mut work).await;
                }
                Err(AskError::TimedOut)
            }
        };
        match outcome {
            Ok(allow) => {
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "pi decision returned"
                );
                Some(allow)
            }
            Err(why) => {
                tracing::info!(reason = %why, "no pi decision; Pi's dialog decides");
                let taken = opened.lock().expect("not poisoned").take();
                if let Some((client, id)) = taken {
                    ask::withdraw(&client, &id).await;
                }
                None
            }
        }
    })
}

async fn ask_once(
    paths: &Paths,
    request: &Value,
    deadline: Instant,
    opened: Arc<Mutex<Option<(client::Client, String)>>>,
) -> Result<bool, AskError> {
    let client = client::attach_or_spawn_by(paths, deadline.into_std()).await?;
    let question = ask::open(&client, request, "Pi needs permission").await?;
    *opened.lock().expect("not poisoned") = Some((client.clone(), question.id.clone()));
    let record = ask::answered(&client, &question, deadline).await?;
    match record
        .response
        .as_ref()
        .and_then(|r| r.choice_id.as_deref())
    {
        Some("allow-once") => Ok(true),
        Some("deny") => Ok(false),
        _ => Err(AskError::BadRecord),
    }
}

/// Resolves on SIGTERM, SIGINT or SIGHUP: the extension no longer needs an answer.
async fn host_gives_up() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}
