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
use crate::model::{Interaction, InteractionRequest, NotificationRequest, Status};
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
    flow(
        started,
        budget,
        |deadline, shared| run(host, &paths, plan, deadline, shared),
        host_moved_on,
    )
}

/// The flow every host shares: `work` (given the deadline and what it opened) races
/// `host_moved_on`; whatever ends it other than an answer withdraws what was opened, and
/// `None` means "print nothing". From its end a signal exits the hook silently at once.
fn flow<T, W>(
    started: std::time::Instant,
    budget: Duration,
    work: impl FnOnce(Instant, Shared) -> W,
    host_moved_on: impl std::future::Future<Output = ()>,
) -> Option<T>
where
    W: std::future::Future<Output = Result<T, Fallback>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let outcome = runtime.block_on(async move {
        let deadline = Instant::from_std(started + budget);
        let shared: Shared = Arc::default();
        let work = work(deadline, Arc::clone(&shared));
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
            Ok(answer) => {
                tracing::info!(
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "answer returned"
                );
                Some(answer)
            }
            Err(why) => {
                tracing::info!(reason = %why, "no answer; the host's own prompt or default stands");
                withdraw(&shared).await;
                None
            }
        }
    });
    super::signals::flow_stops_handling();
    outcome
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
    let client = client::attach_or_spawn_by(paths, deadline.into_std()).await?;
    shared.lock().expect("not poisoned").client = Some(client.clone());
    match plan {
        Plan::Permission {
            question,
            suggestions,
        } => {
            let opened = open(&client, &question, deadline, &shared).await?;
            let record = answered(&client, &opened, deadline).await?;
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
            for (q, opened) in questions.iter().zip(&ids) {
                let record = answered(&client, opened, deadline).await?;
                let text = q.question_text.clone().ok_or(Fallback::BadRecord)?;
                answers.insert(text, Value::String(answer_of(q, &record)?));
            }
            let mut input = tool_input;
            let obj = input.as_object_mut().ok_or(Fallback::BadRecord)?;
            obj.insert("answers".into(), Value::Object(answers));
            Ok(Decision::AllowWithInput(input))
        }
        Plan::TooLarge { notification } => {
            let notification =
                NotificationRequest::from_json(&notification).map_err(|_| Fallback::BadRecord)?;
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
fn answer_of(q: &Question, record: &Interaction) -> Result<String, Fallback> {
    let response = record.response.as_ref().ok_or(Fallback::UnknownChoice)?;
    let label = |id: &str| {
        q.option_labels
            .iter()
            .find(|(cid, _)| cid == id)
            .map(|(_, label)| label.clone())
            .ok_or(Fallback::UnknownChoice)
    };
    let other = response.text.clone();
    if !q.multi {
        return match (response.choice_id.as_deref(), other) {
            (Some(id), None) => label(id),
            (None, Some(text)) => Ok(text),
            _ => Err(Fallback::UnknownChoice),
        };
    }
    let mut items = response
        .choice_ids
        .iter()
        .flatten()
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

/// A question this hook opened: its id, and the digest of exactly what it asked.
struct OpenQuestion {
    id: String,
    digest: String,
}

impl OpenQuestion {
    /// A record from the broker is believed only if it is the question this hook opened:
    /// same id, same digest of what is shown (SPEC §2.1). Anything else falls back.
    fn check<'a>(&self, record: &'a Interaction) -> Result<&'a Interaction, Fallback> {
        let same = record.id == self.id && record.request_digest == self.digest;
        if same {
            Ok(record)
        } else {
            tracing::warn!(id = %self.id, "the broker sent a record that is not the question asked");
            Err(Fallback::BadRecord)
        }
    }
}

/// Opens one question and its notification.
async fn open(
    client: &Client,
    q: &Question,
    deadline: Instant,
    shared: &Shared,
) -> Result<OpenQuestion, Fallback> {
    // Checked by the model's own rules before anything is sent; the digest the broker
    // must report is computed here from what this hook asks.
    let request = InteractionRequest::from_json(&q.request).map_err(|_| Fallback::BadRecord)?;
    let digest = request.digest();
    // While the request is in flight its id is unknown: a signal then gives it a moment.
    shared.lock().expect("not poisoned").opening = true;
    // Retried on a dropped connection too. A first attempt that did reach the broker left a
    // question nobody waits for; its owner lease cancels it within the grace.
    let opened = retry_transient(deadline, || client.request_interaction(&request)).await;
    shared.lock().expect("not poisoned").opening = false;
    let (record, _created) = opened?;
    let id = record.id.clone();
    shared.lock().expect("not poisoned").ids.push(id.clone());
    let opened = OpenQuestion { id, digest };
    opened.check(&record)?;
    let id = opened.id.clone();
    tracing::info!(id = %id, "question open");
    // Posted alongside the first wait, not before it: the owner lease counts from the
    // question's creation, so the wait must start as soon as possible.
    let mut notification = q.notification.clone();
    notification["interaction_id"] = json!(id);
    let notification =
        NotificationRequest::from_json(&notification).map_err(|_| Fallback::BadRecord)?;
    let client = client.clone();
    tokio::spawn(async move {
        if let Err(e) = retry_rate_limited(deadline, || client.notify(&notification)).await {
            // The question stands without it; surfaces still list it.
            tracing::warn!(error = %e, "notification not posted");
        }
    });
    Ok(opened)
}

/// Waits in slices until answered; any other end, or the budget running out, falls back.
async fn answered(
    client: &Client,
    opened: &OpenQuestion,
    deadline: Instant,
) -> Result<Interaction, Fallback> {
    let id = opened.id.as_str();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Fallback::BudgetEnded);
        }
        // Rounded up: the budget already ends well before the host's own timeout.
        let slice = (left.as_secs_f64().ceil() as u64).min(WAIT_SLICE_SECS);
        let record = wait_once(client, id, slice).await?;
        opened.check(&record)?;
        match record.status {
            Status::Answered => return Ok(record),
            Status::Pending => continue,
            other => return Err(Fallback::Ended(other.as_str().to_string())),
        }
    }
}

/// One long-poll. A connection that broke mid-reply is retried at once, up to twice: an
/// answer that landed while the reply was lost must still reach the host. A broker that is
/// gone refuses the connect, which is not retried: the hook falls back at once.
async fn wait_once(client: &Client, id: &str, secs: u64) -> Result<Interaction, ClientError> {
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

fn choice_of(record: &Interaction) -> Result<&str, Fallback> {
    record
        .response
        .as_ref()
        .and_then(|r| r.choice_id.as_deref())
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
        // Tokio's handlers are in place: signals now take the withdrawing path.
        super::signals::flow_handles();
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

/// One question for a host outside the Claude/Codex payloads (the Hermes bridge): the same
/// attach-or-spawn, proof-checked client, owner-leased wait and withdrawal on every other
/// end. Returns the answered record, or `None` on anything but an answer.
pub(super) fn ask_question(question: Question, budget: Duration) -> Option<Interaction> {
    let started = std::time::Instant::now();
    let paths = Paths::from_env().ok()?;
    let _log = crate::logging::init_blocking(&paths, "hook", "info");
    let host_moved_on = async {
        let sig = host_gives_up().await;
        tracing::info!(signal = sig, "host gave up; withdrawing");
    };
    flow(
        started,
        budget,
        |deadline, shared| async move {
            let client = client::attach_or_spawn_by(&paths, deadline.into_std()).await?;
            shared.lock().expect("not poisoned").client = Some(client.clone());
            let opened = open(&client, &question, deadline, &shared).await?;
            answered(&client, &opened, deadline).await
        },
        host_moved_on,
    )
}
