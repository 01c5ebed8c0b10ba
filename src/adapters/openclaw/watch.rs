//! `agentnotify openclaw watch`: the supervisor. It keeps one operator connection to the
//! Gateway (reconnecting with backoff), back-fills with `exec.approval.list` on every
//! connect, runs one [`track`] task per pending approval, and withdraws a question at the
//! broker as soon as its approval is resolved anywhere else.
//!
//! Fail-safe: the Gateway is only ever told a decision a person chose for that approval.
//! On any failure the task gives up and OpenClaw's own prompt, timeout or denial decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::approval::{self, Approval};
use super::device::Device;
use super::gateway::{self, Gateway, GatewayError, Target};
use crate::client::{self, Client, ClientError};
use crate::model::{Status, Timestamp};
use crate::paths::Paths;
use crate::secret::Secret;

/// Reconnect pauses: doubling from the first to the last, reset after a good connect.
const BACKOFF_FIRST: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(15);
/// How long a connection must have lasted for the next reconnect to start quick again.
const STABLE: Duration = Duration::from_secs(10);
/// One broker long-poll (no owner lease: the watcher is not a hook).
const WAIT_SECS: u64 = 60;

pub struct Options {
    pub url: String,
    pub token: Secret,
    pub paths: Paths,
}

/// The interaction a task opened, once the broker has answered.
type Opened = Arc<Mutex<Option<String>>>;

/// The approvals being asked about, by approval id.
#[derive(Default)]
struct Tracked {
    tasks: HashMap<String, (AbortHandle, Opened)>,
}

type Shared = Arc<Mutex<Tracked>>;

/// What each approval task needs: the current connection (None while reconnecting) and
/// how to reach the broker.
#[derive(Clone)]
struct Ctx {
    gateway: watch::Receiver<Option<Gateway>>,
    paths: Paths,
    tracked: Shared,
    /// This watcher's Gateway in its keys ([`approval::gateway_scope`]).
    scope: String,
    /// The broker client, kept between approvals (attaching costs tens of ms); dropped
    /// after a failure so the next call attaches again (or starts a broker).
    broker: Arc<Mutex<Option<Client>>>,
}

impl Ctx {
    async fn broker(&self) -> Result<Client, ClientError> {
        if let Some(c) = self.broker.lock().expect("not poisoned").clone() {
            return Ok(c);
        }
        let c = client::attach_or_spawn(&self.paths).await?;
        *self.broker.lock().expect("not poisoned") = Some(c.clone());
        Ok(c)
    }

    fn broker_failed(&self) {
        self.broker.lock().expect("not poisoned").take();
    }
}

/// Runs until the process is stopped; returns only if the device key cannot be used.
pub async fn run(opts: Options) -> std::io::Result<()> {
    opts.paths.ensure_dirs().map_err(std::io::Error::other)?;
    let device = Device::load_or_create(&opts.paths.config_dir.join(super::device::KEY_FILE))?;
    let (current, gateway_rx) = watch::channel(None);
    let ctx = Ctx {
        gateway: gateway_rx,
        paths: opts.paths.clone(),
        tracked: Shared::default(),
        scope: approval::gateway_scope(&opts.url),
        broker: Arc::default(),
    };
    let target = Target {
        url: &opts.url,
        token: opts.token.expose(),
        device: &device,
    };
    let mut pause = BACKOFF_FIRST;
    loop {
        match gateway::connect(&target).await {
            Ok((gw, mut events)) => {
                let connected_at = std::time::Instant::now();
                eprintln!(
                    "agentnotify: connected to the OpenClaw Gateway at {}",
                    opts.url
                );
                tracing::info!("connected to the Gateway");
                current.send_replace(Some(gw.clone()));
                match backfill(&ctx, &gw).await {
                    Ok(()) => {
                        while let Some(event) = events.recv().await {
                            on_event(&ctx, &event);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "back-fill failed; reconnecting"),
                }
                gw_drop(&current);
                // A connection that held resets the backoff; one dropped at once does not.
                if connected_at.elapsed() > STABLE {
                    pause = BACKOFF_FIRST;
                }
                eprintln!("agentnotify: the Gateway connection ended; reconnecting");
                tracing::info!("the Gateway connection ended");
            }
            Err(e) => {
                tracing::info!(error = %e, "cannot connect to the Gateway");
                if let GatewayError::Refused { .. } = e {
                    eprintln!("agentnotify: {e}");
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(BACKOFF_MAX);
    }
}

fn gw_drop(current: &watch::Sender<Option<Gateway>>) {
    current.send_replace(None);
}

/// Asks about every pending approval not yet tracked, and withdraws what was resolved
/// while no connection was up (including questions a previous watcher left open).
async fn backfill(ctx: &Ctx, gw: &Gateway) -> Result<(), GatewayError> {
    let listed = gw.request("exec.approval.list", json!({})).await?;
    let listed: Vec<Value> = match listed {
        Value::Array(items) => items,
        other => other["approvals"].as_array().cloned().unwrap_or_default(),
    };
    let pending: Vec<String> = listed
        .iter()
        .filter_map(|p| p["id"].as_str().map(str::to_string))
        .collect();
    for payload in &listed {
        start(ctx, payload);
    }
    let gone: Vec<String> = {
        let tracked = ctx.tracked.lock().expect("not poisoned");
        tracked
            .tasks
            .keys()
            .filter(|id| !pending.contains(id))
            .cloned()
            .collect()
    };
    for id in gone {
        withdraw(ctx, &id);
    }
    let ctx = ctx.clone();
    tokio::spawn(async move { withdraw_leftovers(&ctx, &pending).await });
    Ok(())
}

fn on_event(ctx: &Ctx, event: &gateway::Event) {
    match event.name.as_str() {
        "exec.approval.requested" => start(ctx, &event.payload),
        "exec.approval.resolved" => {
            if let Some(id) = event.payload["id"].as_str() {
                withdraw(ctx, id);
            }
        }
        _ => {}
    }
}

/// Starts the task for one approval unless it runs already.
fn start(ctx: &Ctx, payload: &Value) {
    let approval = match Approval::parse(payload) {
        Ok(a) => a,
        Err(why) => {
            tracing::info!(reason = %why, "approval not asked; OpenClaw decides");
            return;
        }
    };
    let mut tracked = ctx.tracked.lock().expect("not poisoned");
    if tracked.tasks.contains_key(&approval.id) {
        return;
    }
    let opened = Arc::new(Mutex::new(None));
    let id = approval.id.clone();
    let task = tokio::spawn(track(ctx.clone(), approval, Arc::clone(&opened)));
    tracked.tasks.insert(id, (task.abort_handle(), opened));
}

/// The approval was resolved (by us, by OpenClaw's own prompt, or by its timeout): stop
/// asking and cancel the question, so no surface keeps offering it.
fn withdraw(ctx: &Ctx, approval_id: &str) {
    let Some((task, opened)) = ctx
        .tracked
        .lock()
        .expect("not poisoned")
        .tasks
        .remove(approval_id)
    else {
        return;
    };
    task.abort();
    let known = opened.lock().expect("not poisoned").clone();
    let key = format!("{}{approval_id}", approval::key_prefix(&ctx.scope));
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let Ok(client) = ctx.broker().await else {
            return;
        };
        // Opened while the task was being stopped: find it by its key.
        let id = match known {
            Some(id) => Some(id),
            None => pending_by_key(&client, &ctx.scope)
                .await
                .into_iter()
                .find(|(k, _)| *k == key)
                .map(|(_, id)| id),
        };
        if let Some(id) = id {
            match client.cancel(&id).await {
                Ok(r) if r.status == Status::Cancelled => {
                    tracing::info!(interaction = %id, "withdrawn: resolved in OpenClaw")
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(interaction = %id, error = %e, "not withdrawn"),
            }
        }
    });
}

/// Pending OpenClaw questions at the broker whose approval is no longer pending.
async fn withdraw_leftovers(ctx: &Ctx, pending: &[String]) {
    let Ok(client) = ctx.broker().await else {
        return;
    };
    let prefix = approval::key_prefix(&ctx.scope);
    for (key, id) in pending_by_key(&client, &ctx.scope).await {
        let approval_id = &key[prefix.len()..];
        // An approval that arrived after the list was taken has a task: it stays.
        let tracked = ctx
            .tracked
            .lock()
            .expect("not poisoned")
            .tasks
            .contains_key(approval_id);
        if !tracked && !pending.iter().any(|p| p == approval_id) {
            let _ = client.cancel(&id).await;
            tracing::info!(interaction = %id, "withdrawn: no longer pending in OpenClaw");
        }
    }
}

/// `(key, interaction id)` of every pending interaction this watcher's Gateway opened.
async fn pending_by_key(client: &Client, scope: &str) -> Vec<(String, String)> {
    let prefix = approval::key_prefix(scope);
    let query = [
        ("status", "pending".to_string()),
        ("limit", "500".to_string()),
    ];
    let Ok(records) = client.list_interactions(&query).await else {
        return Vec::new();
    };
    records
        .into_iter()
        .filter_map(|r| Some((r.key.filter(|k| k.starts_with(&prefix))?, r.id)))
        .collect()
}

/// Why a task stopped without resolving anything. Logged, never sent to OpenClaw.
#[derive(Debug, thiserror::Error)]
enum GaveUp {
    #[error("the broker refused the question: {0}")]
    Refused(ClientError),
    #[error("the question ended without an answer ({0})")]
    Ended(&'static str),
    #[error("the answer is not a decision OpenClaw allows here")]
    NotADecision,
    #[error("the approval's deadline passed")]
    Deadline,
    #[error("{0}")]
    NotAsked(#[from] approval::NotAsked),
}

/// One approval: open the question, wait for the person, tell the Gateway.
async fn track(ctx: Ctx, approval: Approval, opened: Opened) {
    let started = std::time::Instant::now();
    match ask_and_resolve(&ctx, &approval, &opened, started).await {
        Ok(decision) => tracing::info!(approval = %approval.id, decision, "resolved in OpenClaw"),
        Err(why) => {
            tracing::info!(approval = %approval.id, reason = %why, "not resolved; OpenClaw decides")
        }
    }
    ctx.tracked
        .lock()
        .expect("not poisoned")
        .tasks
        .remove(&approval.id);
}

async fn ask_and_resolve(
    ctx: &Ctx,
    approval: &Approval,
    opened: &Mutex<Option<String>>,
    started: std::time::Instant,
) -> Result<&'static str, GaveUp> {
    let request = approval.interaction(&ctx.scope, now_ms())?;
    let mut pause = BACKOFF_FIRST;
    let record = loop {
        before_deadline(approval)?;
        let known = opened.lock().expect("not poisoned").clone();
        match answer(ctx, &request, known.as_deref(), opened, started).await {
            Ok(record) => break record,
            Err(
                e @ ClientError::Api {
                    status: 400..=499, ..
                },
            ) => return Err(GaveUp::Refused(e)),
            Err(e) => {
                ctx.broker_failed();
                tracing::info!(error = %e, "broker unreachable; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(BACKOFF_MAX);
            }
        }
    };
    let decision = match record.status {
        Status::Answered => approval::decision(approval, &record).ok_or(GaveUp::NotADecision)?,
        other => return Err(GaveUp::Ended(other.as_str())),
    };
    resolve(ctx, approval, decision).await?;
    Ok(decision)
}

/// Opens the question (or finds it again by id after a broker restart) and waits until it
/// is no longer pending.
async fn answer(
    ctx: &Ctx,
    request: &crate::model::InteractionRequest,
    known: Option<&str>,
    opened: &Mutex<Option<String>>,
    started: std::time::Instant,
) -> Result<crate::model::Interaction, ClientError> {
    let client = ctx.broker().await?;
    let mut record = match known {
        Some(id) => client.get_interaction(id).await?,
        None => {
            let (record, _) = client.request_interaction(request).await?;
            *opened.lock().expect("not poisoned") = Some(record.id.clone());
            tracing::info!(
                interaction = %record.id,
                elapsed_us = started.elapsed().as_micros() as u64,
                "question open"
            );
            record
        }
    };
    while record.status == Status::Pending {
        record = client.wait(&record.id, WAIT_SECS, false).await?;
    }
    Ok(record)
}

/// Sends the decision on the current connection, waiting out reconnects until the
/// approval's deadline. A refusal (already resolved, unknown id) is final.
async fn resolve(ctx: &Ctx, approval: &Approval, decision: &str) -> Result<(), GaveUp> {
    let mut gateway = ctx.gateway.clone();
    loop {
        before_deadline(approval)?;
        let current = gateway.borrow_and_update().clone();
        let Some(gw) = current.filter(|g| !g.is_closed()) else {
            let _ = tokio::time::timeout(Duration::from_secs(5), gateway.changed()).await;
            continue;
        };
        let params = json!({"id": approval.id, "decision": decision});
        match gw.request("exec.approval.resolve", params).await {
            Ok(_) => return Ok(()),
            Err(e @ GatewayError::Refused { .. }) => {
                tracing::info!(error = %e, "the Gateway refused the decision");
                return Err(GaveUp::Ended("refused by the Gateway"));
            }
            Err(e) => {
                tracing::info!(error = %e, "decision not delivered; waiting for a connection");
                let _ = tokio::time::timeout(Duration::from_secs(5), gateway.changed()).await;
            }
        }
    }
}

fn before_deadline(approval: &Approval) -> Result<(), GaveUp> {
    match approval.expires_at_ms {
        Some(at) if now_ms() >= at => Err(GaveUp::Deadline),
        _ => Ok(()),
    }
}

fn now_ms() -> i64 {
    Timestamp::now().millis() as i64
}
