//! The bridge's flow: plan → attach or spawn → open → wait in slices → decide.
//! Any failure, and any signal from the host, withdraws what was opened and stays silent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use super::decision::{Decision, Event};
use super::payload::{self, Host, Plan, Question};
use super::transcript;
use crate::client::{self, Client, ClientError};
use crate::paths::Paths;

/// Longest single long-poll: the broker's owner lease needs a wait to start at least this
/// often, and a server cannot see a client vanish mid-poll (SPEC §3.1).
const WAIT_SLICE_SECS: u64 = 10;
/// How long withdrawing may take on the way out (the host SIGKILLs ~1.45 s after SIGTERM).
const WITHDRAW_BUDGET: Duration = Duration::from_millis(300);
/// How long a signal waits for an open in flight to return its id.
const OPENING_GRACE: Duration = Duration::from_millis(150);

/// Why the hook falls back to the host's own prompt. Logged, never printed.
#[derive(Debug, thiserror::Error)]
enum Fallback {
    #[error("no broker: {0}")]
    Broker(#[from] ClientError),
    #[error("the wait budget ended")]
    BudgetEnded,
    #[error("the question ended without an answer ({0})")]
    Ended(String),
    #[error("the answer does not map to a decision")]
    UnknownChoice,
    #[error("the broker sent an unexpected record")]
    BadRecord,
    #[error(
        "what runs is too large to show remotely; the person was told to answer at the terminal"
    )]
    TooLarge,
}

/// What was opened so far, so every exit path can withdraw it.
#[derive(Default)]
struct Opened {
    client: Option<Client>,
    ids: Vec<String>,
    /// A request to open a question is in flight: its id is not known yet.
    opening: bool,
}

type Shared = Arc<Mutex<Opened>>;

/// Asks the question(s) for one host payload; `None` means "print nothing".
pub fn ask(host: Host, event: Event, budget: Duration, stdin: &[u8]) -> Option<Decision> {
    let started = std::time::Instant::now();
    let payload: Value = serde_json::from_slice(stdin).ok()?;
    let ttl = (budget.as_secs() + 30).clamp(30, 3600);
    let paths = Paths::from_env().ok()?;
    let _log = crate::logging::init_blocking(&paths, "hook", "info");
    if event == Event::PreToolUse && !pre_tool_use_asks(&payload) {
        tracing::info!(
            "PreToolUse outside its case; the PermissionRequest path or the host decides"
        );
        return None;
    }
    let plan = match payload::plan(host, &payload, ttl) {
        Ok(p) => p,
        Err(e) => {
            tracing::info!(reason = %e, host = host.as_str(), "payload not asked; host prompt used");
            return None;
        }
    };
    // Claude's terminal dialog races the hook and does not tell it when it wins.
    let watch = match host {
        Host::Claude => transcript::Watch::new(&payload),
        Host::Codex => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async move {
        let deadline = Instant::from_std(started + budget);
        let shared: Shared = Arc::default();
        let decided_elsewhere = async {
            match watch {
                Some(w) => w.decided_elsewhere().await,
                None => std::future::pending().await,
            }
        };
        // Either way the host no longer needs an answer from us.
        let host_moved_on = async {
            tokio::select! {
                sig = host_gives_up() => tracing::info!(signal = sig, "host gave up; withdrawing"),
                () = decided_elsewhere => {
                    tracing::info!("the host decided the call itself; withdrawing");
                }
            }
        };
        let work = run(host, &paths, plan, deadline, Arc::clone(&shared));
        tokio::pin!(work);
        let outcome = tokio::select! {
            r = &mut work => r,
            () = host_moved_on => {
                // A question being opened right now must be learnt to be withdrawn.
                if shared.lock().expect("not poisoned").opening {
                    let _ = tokio::time::timeout(OPENING_GRACE, &mut work).await;
                }
                withdraw(&shared).await;
                return None;
            }
        };
        match outcome {
            Ok(decision) => {
                tracing::info!(
                    host = host.as_str(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "decision returned"
                );
                Some(decision)
            }
            Err(why) => {
                tracing::info!(reason = %why, "no decision; host prompt used");
                withdraw(&shared).await;
                None
            }
        }
    })
}

/// The PreToolUse path asks only for AskUserQuestion in a permission mode other than
/// `default`: there Claude offers the question to no PermissionRequest hook, while in
/// `default` mode that path asks (never both). A payload without a mode stays silent.
fn pre_tool_use_asks(payload: &Value) -> bool {
    payload["tool_name"] == "AskUserQuestion"
        && payload["permission_mode"]
            .as_str()
            .is_some_and(|m| m != "default")
}

async fn run(
    host: Host,
    paths: &Paths,
    plan: Plan,
    deadline: Instant,
    shared: Shared,
) -> Result<Decision, Fallback> {
    let client = client::attach_or_spawn(paths).await?;
    shared.lock().expect("not poisoned").client = Some(client.clone());
    match plan {
        Plan::Permission {
            question,
            suggestions,
        } => {
            let id = open(&client, &question, deadline, &shared).await?;
            let record = answered(&client, &id, deadline).await?;
            match choice_of(&record)? {
                "allow-once" | "allow" => Ok(Decision::Allow),
                "deny" => Ok(Decision::Deny),
                "allow-always" if host == Host::Claude => match suggestions {
                    Some(s) => Ok(Decision::AllowAlways(s)),
                    None => Err(Fallback::UnknownChoice),
                },
                _ => Err(Fallback::UnknownChoice),
            }
        }
        Plan::Questions {
            questions,
            tool_input,
        } => {
            let mut ids = Vec::with_capacity(questions.len());
            for q in &questions {
                ids.push(open(&client, q, deadline, &shared).await?);
            }
            let mut answers = Map::new();
            for (q, id) in questions.iter().zip(&ids) {
                let record = answered(&client, id, deadline).await?;
                let text = q.question_text.clone().ok_or(Fallback::BadRecord)?;
                answers.insert(text, Value::String(answer_of(q, &record)?));
            }
            let mut input = tool_input;
            let obj = input.as_object_mut().ok_or(Fallback::BadRecord)?;
            obj.insert("answers".into(), Value::Object(answers));
            Ok(Decision::AllowWithInput(input))
        }
        Plan::TooLarge { notification } => {
            if let Err(e) = retry_rate_limited(deadline, || client.notify(&notification)).await {
                tracing::warn!(error = %e, "notification not posted");
            }
            Err(Fallback::TooLarge)
        }
    }
}

/// An AskUserQuestion answer as Claude's own dialog writes it: the chosen label, or the
/// "Other" text; for multiSelect the labels in the order they were chosen (`choice_ids`
/// keeps it), then the Other text, joined by `, ` (an item holding `, ` or `"` is written
/// as a JSON string). Checked against the real Claude Code in tests/hosts.
fn answer_of(q: &Question, record: &Value) -> Result<String, Fallback> {
    let response = &record["response"];
    let label = |id: &str| {
        q.option_labels
            .iter()
            .find(|(cid, _)| cid == id)
            .map(|(_, label)| label.clone())
            .ok_or(Fallback::UnknownChoice)
    };
    let other = response["text"].as_str().map(str::to_string);
    if !q.multi {
        return match (response["choice_id"].as_str(), other) {
            (Some(id), None) => label(id),
            (None, Some(text)) => Ok(text),
            _ => Err(Fallback::UnknownChoice),
        };
    }
    let chosen: Vec<&str> = response["choice_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut items = chosen
        .iter()
        .map(|id| label(id))
        .collect::<Result<Vec<String>, Fallback>>()?;
    items.extend(other);
    if items.is_empty() {
        return Err(Fallback::UnknownChoice);
    }
    Ok(items
        .iter()
        .map(|i| match i.contains(", ") || i.contains('"') {
            true => Value::String(i.clone()).to_string(),
            false => i.clone(),
        })
        .collect::<Vec<_>>()
        .join(", "))
}

/// Opens one question and its notification; returns the interaction id.
async fn open(
    client: &Client,
    q: &Question,
    deadline: Instant,
    shared: &Shared,
) -> Result<String, Fallback> {
    // While the request is in flight its id is unknown: a signal then gives it a moment.
    shared.lock().expect("not poisoned").opening = true;
    // Retried on a dropped connection too: the request is keyed, so a repeat that reaches
    // the broker twice reuses the same question.
    let opened = retry_transient(deadline, || client.request_interaction(&q.request)).await;
    shared.lock().expect("not poisoned").opening = false;
    let (record, _created) = opened?;
    let id = record["id"]
        .as_str()
        .ok_or(Fallback::BadRecord)?
        .to_string();
    shared.lock().expect("not poisoned").ids.push(id.clone());
    tracing::info!(id = %id, "question open");
    // Posted alongside the first wait, not before it: the owner lease counts from the
    // question's creation, so the wait must start as soon as possible.
    let mut notification = q.notification.clone();
    notification["interaction_id"] = json!(id);
    let client = client.clone();
    tokio::spawn(async move {
        if let Err(e) = retry_rate_limited(deadline, || client.notify(&notification)).await {
            // The question stands without it; surfaces still list it.
            tracing::warn!(error = %e, "notification not posted");
        }
    });
    Ok(id)
}

/// Waits in slices until answered; any other end, or the budget running out, falls back.
async fn answered(client: &Client, id: &str, deadline: Instant) -> Result<Value, Fallback> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Fallback::BudgetEnded);
        }
        // Rounded up: the budget already ends well before the host's own timeout.
        let slice = (left.as_secs_f64().ceil() as u64).min(WAIT_SLICE_SECS);
        let record = wait_once(client, id, slice).await?;
        match record["status"].as_str() {
            Some("answered") => return Ok(record),
            Some("pending") => continue,
            Some(other) => return Err(Fallback::Ended(other.to_string())),
            None => return Err(Fallback::BadRecord),
        }
    }
}

/// One long-poll. A connection that broke mid-reply is retried at once, up to twice: an
/// answer that landed while the reply was lost must still reach the host. A broker that is
/// gone refuses the connect, which is not retried: the hook falls back at once.
async fn wait_once(client: &Client, id: &str, secs: u64) -> Result<Value, ClientError> {
    let mut attempts = 0;
    loop {
        match client.wait(id, secs, true).await {
            Err(ClientError::Interrupted(why)) if attempts < 2 => {
                attempts += 1;
                tracing::warn!(attempt = attempts, error = %why, "wait interrupted; retrying");
            }
            other => return other,
        }
    }
}

fn choice_of(record: &Value) -> Result<&str, Fallback> {
    record["response"]["choice_id"]
        .as_str()
        .ok_or(Fallback::UnknownChoice)
}

/// Retries a call refused by the shared rate limit after `Retry-After`, while time remains.
async fn retry_rate_limited<T, F, Fut>(deadline: Instant, mut call: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    loop {
        match call().await {
            Err(ClientError::Api {
                status: 429,
                retry_after,
                ..
            }) if Instant::now() + Duration::from_secs(retry_after.unwrap_or(1)) < deadline => {
                tokio::time::sleep(Duration::from_secs(retry_after.unwrap_or(1))).await;
            }
            other => return other,
        }
    }
}

/// Like [`retry_rate_limited`], and also retries (twice, after a short pause) a call whose
/// connection broke after it was made; a refused connect (no broker) is final.
async fn retry_transient<T, F, Fut>(deadline: Instant, mut call: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut attempts = 0u64;
    loop {
        match retry_rate_limited(deadline, &mut call).await {
            Err(ClientError::Interrupted(why))
                if attempts < 2 && Instant::now() + Duration::from_millis(100) < deadline =>
            {
                attempts += 1;
                tracing::warn!(attempt = attempts, error = %why, "request interrupted; retrying");
                tokio::time::sleep(Duration::from_millis(50 * attempts)).await;
            }
            other => return other,
        }
    }
}

/// Cancels every question this hook opened (best effort, bounded); the broker resolves
/// their notifications with them.
async fn withdraw(shared: &Shared) {
    let (client, ids) = {
        let opened = shared.lock().expect("not poisoned");
        (opened.client.clone(), opened.ids.clone())
    };
    let Some(client) = client else { return };
    let cancel_all = async {
        for id in &ids {
            let _ = client.cancel(id).await;
        }
    };
    let _ = tokio::time::timeout(WITHDRAW_BUDGET, cancel_all).await;
}

/// Resolves when the host signals that it gave up (SIGTERM, SIGINT or SIGHUP).
async fn host_gives_up() -> &'static str {
    #[cfg(unix)]
    {
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
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupt"
    }
}
