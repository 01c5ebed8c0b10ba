//! The `agentnotify` program: parses the command line and calls the library.

mod answer;
mod args;
pub mod channels;
mod demo;
mod guide;
mod manual;
pub mod openclaw;
mod output;
pub mod relay;
mod tui;

use std::ffi::OsString;

use clap::Parser;
use serde_json::{json, Value};

pub use args::Cli;
use args::{Command, InteractionsCommand, NotifyCommand};

use crate::cli::relay::RelayCliError;
use crate::client::{self, Client, ClientError};
use crate::daemon::{self, DaemonExit, DaemonOptions};
use crate::exit::{self, Exit, ExitStatus};
use crate::model::{AnswerSubmission, InteractionRequest, NotificationRequest};
use crate::paths::Paths;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Daemon(#[from] daemon::DaemonError),
    #[error(transparent)]
    Paths(#[from] crate::paths::PathsError),
    #[error(transparent)]
    Relay(#[from] RelayCliError),
    #[error(transparent)]
    Channels(#[from] channels::ChannelsCliError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Other(String),
}

impl ExitStatus for CliError {
    fn exit(&self) -> Exit {
        match self {
            CliError::Client(ClientError::Api { status: 404, .. })
            | CliError::Relay(RelayCliError::NotFound(_) | RelayCliError::NoDevice(_))
            | CliError::Channels(channels::ChannelsCliError::NotFound(_))
            | CliError::Channels(channels::ChannelsCliError::Client(ClientError::Api {
                status: 404,
                ..
            })) => Exit::NotFound,
            CliError::Usage(_) | CliError::Channels(channels::ChannelsCliError::Usage(_)) => {
                Exit::Usage
            }
            _ => Exit::Error,
        }
    }
}

/// Runs the program; returns the exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    // Everything `agentnotify` creates (the store, logs, broker.json, secrets) is private.
    crate::fsutil::make_new_files_private();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return exit::clap_error(&e),
    };
    let result = match cli.command {
        Command::Daemon(a) => run_daemon(a),
        Command::Relay(crate::cli::relay::RelayCommand::Serve(a)) => run_relay_server(a),
        // Pi's exit code is the wrapper's.
        Command::Pi(a) => return crate::pi::rpc::main(a.command, a.ttl),
        other => {
            // Like any Unix filter: `agentnotify … | head` ends quietly on a closed pipe
            // (never the daemon, which must survive clients that hang up).
            #[cfg(unix)]
            // SAFETY: restoring the default disposition of one signal before any thread starts.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            rt.block_on(run(other))
        }
    };
    match result {
        Ok(()) => Exit::Ok.code(),
        Err(e) => exit::fail("agentnotify", &e),
    }
}

fn run_daemon(a: args::DaemonArgs) -> Result<(), CliError> {
    let paths = Paths::from_env()?;
    let _log = crate::logging::init(&paths, "broker", "info");
    let opts = DaemonOptions {
        port: a.port,
        on_demand: a.on_demand,
        idle_exit: a.idle_exit_seconds.map(std::time::Duration::from_secs),
        rate_per_second: a.rate_limit,
        rate_burst: a.rate_burst,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Other(format!("cannot start the runtime: {e}")))?;
    let exit = rt.block_on(daemon::run(&paths, opts, |info| {
        println!(
            "agentnotify broker {} listening on {} (pid {})",
            info.version, info.url, info.pid
        );
    }))?;
    if let DaemonExit::AlreadyRunning(info) = exit {
        match info {
            Some(i) => println!(
                "agentnotify broker already running at {} (pid {})",
                i.url, i.pid
            ),
            None => println!("agentnotify broker already running (it holds broker.lock)"),
        }
    }
    Ok(())
}

fn run_relay_server(a: agentnotify_relay::ServeArgs) -> Result<(), CliError> {
    let paths = Paths::from_env()?;
    let _log = crate::logging::init(&paths, "relay", "info");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Other(format!("cannot start the runtime: {e}")))?;
    rt.block_on(crate::cli::relay::run(
        crate::cli::relay::RelayCommand::Serve(a),
    ))?;
    Ok(())
}

async fn connect() -> Result<Client, CliError> {
    let paths = Paths::from_env()?;
    Ok(client::attach_or_spawn(&paths).await?)
}

async fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Daemon(_) | Command::Pi(_) => {
            unreachable!("handled before the runtime starts")
        }
        Command::Interactions(c) => interactions(c).await,
        Command::Notify(c) => notify(c).await,
        Command::Answer(a) => answer::run(a).await,
        Command::Demo(a) => demo::run(a).await,
        Command::Ui(a) => ui(a.print).await,
        Command::Status(a) => status(a.json).await,
        Command::Relay(c) => Ok(crate::cli::relay::run(c).await?),
        Command::Channels(c) => Ok(channels::run(c).await?),
        Command::Setup(a) => guide::run(a).await,
        Command::Completions(a) => {
            manual::completions(a);
            Ok(())
        }
        Command::Man(a) => manual::man(a),
        Command::Openclaw(c) => crate::cli::openclaw::run(c).await,
        Command::Stop => {
            // Straight from broker.json: this must also reach a broker of another version.
            let paths = Paths::from_env()?;
            match client::from_files(&paths) {
                Some((c, info)) if c.health(std::time::Duration::from_secs(1)).await.is_ok() => {
                    c.shutdown_when_idle().await?;
                    println!(
                        "the broker (pid {}) will exit as soon as nothing is pending",
                        info.pid
                    );
                }
                _ => println!("no broker is running"),
            }
            Ok(())
        }
        Command::Token(a) => {
            let paths = Paths::from_env()?;
            if a.path {
                println!("{}", paths.token_file().display());
            } else {
                paths.ensure_dirs()?;
                let token = crate::secret::load_or_create_token(&paths.token_file())
                    .map_err(|e| CliError::Other(format!("cannot read the token: {e}")))?;
                println!("{}", token.expose());
            }
            Ok(())
        }
    }
}

/// A request the broker would refuse, told as the broker tells it (`… (invalid_request)`).
fn invalid(e: crate::model::Invalid) -> CliError {
    CliError::Other(format!("{} (invalid_request)", e.0))
}

async fn interactions(c: InteractionsCommand) -> Result<(), CliError> {
    use InteractionsCommand::*;
    match c {
        Request(a) => {
            let body = request_body(&a)?;
            // Checked here with the broker's own rules, so the message is the broker's.
            let request = InteractionRequest::from_json(&body).map_err(invalid)?;
            let (record, _) = connect().await?.request_interaction(&request).await?;
            output::print_json(&record);
        }
        List(a) => {
            let mut q: Vec<(&str, String)> = Vec::new();
            if a.pending {
                q.push(("pending", "true".into()));
            }
            push_opt(&mut q, "status", a.status);
            push_opt(&mut q, "agent", a.agent);
            push_opt(&mut q, "project", a.project);
            push_opt(&mut q, "session", a.session);
            push_opt(&mut q, "limit", a.limit.map(|n| n.to_string()));
            let list = json!({ "interactions": connect().await?.list_interactions(&q).await? });
            if a.json {
                output::print_json(&list);
            } else {
                output::print_interaction_lines(&list["interactions"]);
            }
        }
        Get(a) => output::print_json(&connect().await?.get_interaction(&a.id).await?),
        Wait(a) => {
            if !(1..=300).contains(&a.timeout) {
                return Err(CliError::Usage("--timeout must be 1-300 seconds".into()));
            }
            output::print_json(&connect().await?.wait(&a.id, a.timeout, false).await?)
        }
        Respond(a) => {
            let mut body = json!({
                "response_id": a.response_id.unwrap_or_else(|| format!("cli-{}", crate::model::new_id())),
                "request_digest": a.digest,
                "nonce": a.nonce,
                "source": a.source,
            });
            if let Some(c) = a.choice {
                body["choice_id"] = json!(c);
            }
            if let Some(ids) = a.choice_ids {
                body["choice_ids"] = json!(ids);
            }
            if let Some(t) = a.text {
                body["text"] = json!(t);
            }
            if let Some(d) = a.device {
                body["device_id"] = json!(d);
            }
            let answer = AnswerSubmission::from_json(&body).map_err(invalid)?;
            output::print_json(&connect().await?.respond(&a.id, &answer).await?);
        }
        Cancel(a) => output::print_json(&connect().await?.cancel(&a.id).await?),
        Publish(a) => output::print_json(&connect().await?.publish(&a.id).await?),
        PollResponses(a) => {
            let body = json!({ "provider": a.provider });
            let (_, v) = connect()
                .await?
                .call(
                    crate::client::Method::POST,
                    "/v1/relay/poll",
                    Some(&body),
                    std::time::Duration::from_secs(60),
                )
                .await?;
            let polls = v["polls"].as_array().cloned().unwrap_or_default();
            if a.json {
                output::print_json(&v);
            } else {
                for p in &polls {
                    if p["ok"] == true {
                        println!(
                            "{}: fetched {}, accepted {}, refused {}, dropped {}{}",
                            p["provider"].as_str().unwrap_or("?"),
                            p["fetched"],
                            p["accepted"],
                            p["refused"],
                            p["dropped"],
                            if p["cursor_advanced"] == true {
                                ""
                            } else {
                                " (cursor unchanged)"
                            }
                        );
                    } else {
                        println!(
                            "{}: failed: {} ({})",
                            p["provider"].as_str().unwrap_or("?"),
                            p["error"].as_str().unwrap_or("?"),
                            p["code"].as_str().unwrap_or("?")
                        );
                    }
                }
            }
            if polls.iter().any(|p| p["ok"] != true) {
                return Err(CliError::Other("a relay poll failed (relay_failed)".into()));
            }
        }
    }
    Ok(())
}

async fn notify(c: NotifyCommand) -> Result<(), CliError> {
    use NotifyCommand::*;
    match c {
        Send(a) => {
            let body = json!({
                "title": a.title, "message": a.message, "type": a.kind, "priority": a.priority,
                "agent": a.agent, "project": a.project, "key": a.key,
            });
            let request = NotificationRequest::from_json(&body).map_err(invalid)?;
            output::print_json(&connect().await?.notify(&request).await?);
        }
        List(a) => {
            let mut q: Vec<(&str, String)> = Vec::new();
            push_opt(&mut q, "status", a.status);
            push_opt(&mut q, "agent", a.agent);
            push_opt(&mut q, "project", a.project);
            push_opt(&mut q, "limit", a.limit.map(|n| n.to_string()));
            let list = json!({ "notifications": connect().await?.list_notifications(&q).await? });
            if a.json {
                output::print_json(&list);
            } else {
                output::print_notification_lines(&list["notifications"]);
            }
        }
        Get(a) => output::print_json(&connect().await?.get_notification(&a.id).await?),
        Resolve(a) => output::print_json(
            &connect()
                .await?
                .close_notification(&a.id, "resolve")
                .await?,
        ),
        Dismiss(a) => output::print_json(
            &connect()
                .await?
                .close_notification(&a.id, "dismiss")
                .await?,
        ),
    }
    Ok(())
}

async fn status(as_json: bool) -> Result<(), CliError> {
    let paths = Paths::from_env()?;
    let status = match client::attach(&paths).await? {
        Some(c) => c.status().await?,
        None => json!({"status": "stopped"}),
    };
    if as_json {
        output::print_json(&status);
    } else if status["status"] == "ok" {
        println!(
            "broker {} running at {} (pid {}), {} pending",
            status["version"].as_str().unwrap_or("?"),
            status["url"].as_str().unwrap_or("?"),
            status["pid"],
            status["pending"]
        );
    } else {
        println!("no broker is running (hooks and commands start one on demand)");
    }
    Ok(())
}

/// Gets a one-time link to the web UI; prints it, and unless `print_only`, opens it.
async fn ui(print_only: bool) -> Result<(), CliError> {
    let paths = Paths::from_env()?;
    let link = client::attach_or_spawn(&paths).await?.ui_link().await?;
    let url = link["url"]
        .as_str()
        .ok_or_else(|| CliError::Other("the broker sent no login link".into()))?;
    if print_only {
        println!("{url}");
        return Ok(());
    }
    let opened = crate::browser::open(&paths, url);
    let secs = link["expires_in"].as_u64().unwrap_or(120);
    if opened {
        println!("Opening the web UI in your browser. If nothing opens, visit this link (it works once, within {secs} s):");
    } else {
        println!("Open this link in your browser (it works once, within {secs} s):");
    }
    println!("{url}");
    Ok(())
}

fn push_opt(q: &mut Vec<(&'static str, String)>, name: &'static str, value: Option<String>) {
    if let Some(v) = value {
        q.push((name, v));
    }
}

/// Builds the request body from `--choice ID:LABEL` and friends.
fn request_body(a: &args::RequestArgs) -> Result<Value, CliError> {
    let mut choices: Vec<Value> = Vec::new();
    for c in &a.choices {
        let (id, label) = c
            .split_once(':')
            .ok_or_else(|| CliError::Usage(format!("--choice must be ID:LABEL, got {c:?}")))?;
        choices.push(json!({"id": id, "label": label}));
    }
    for d in &a.choice_details {
        let (id, detail) = d.split_once(':').ok_or_else(|| {
            CliError::Usage(format!("--choice-detail must be ID:DETAIL, got {d:?}"))
        })?;
        let choice = choices.iter_mut().find(|c| c["id"] == id).ok_or_else(|| {
            CliError::Usage(format!("--choice-detail names unknown choice {id:?}"))
        })?;
        choice["detail"] = json!(detail);
    }
    let mut body = json!({
        "kind": a.kind, "prompt": a.prompt, "agent": a.agent, "project": a.project,
        "session_id": a.session, "key": a.key,
    });
    if !choices.is_empty() {
        body["choices"] = Value::Array(choices);
    }
    if let Some(n) = a.text_max {
        body["text_max_length"] = json!(n);
    }
    for (name, value) in [
        ("body", json!(a.body)),
        ("min_selections", json!(a.min_selections)),
        ("max_selections", json!(a.max_selections)),
        ("other_max_length", json!(a.other_max)),
    ] {
        if !value.is_null() {
            body[name] = value;
        }
    }
    if a.allow_other {
        body["allow_other"] = json!(true);
    }
    if let Some(t) = a.ttl {
        body["ttl_seconds"] = json!(t);
    }
    Ok(body)
}
