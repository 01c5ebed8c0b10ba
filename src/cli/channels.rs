//! `agentnotify channels …`: where questions and notifications are delivered (SPEC §11.1).
//! Settings are written to `config.toml` (secrets beside it, 0600); a running broker is told
//! to look again, and otherwise picks them up when it starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::output::print_json;
use crate::channels::config::{
    self as cfg, Channel, ChannelConfigError, ChannelKind, ChannelsConfig, Route,
};
use crate::paths::Paths;
use crate::relay::config::RelayConfig;
use crate::secret::Secret;

#[derive(Debug, Subcommand)]
#[command(after_help = "In short (see docs/DELIVERY.md):\n  \
agentnotify channels add desktop laptop --answer-buttons\n  \
agentnotify channels add ntfy phone --server https://ntfy.sh --topic <long random topic> \\\n      \
--answer-buttons --include-message --delay 30\n  \
agentnotify channels add webhook ops --url https://example.test/agentnotify\n  \
agentnotify channels route add ops --project shop\n  \
agentnotify channels test phone\n  \
agentnotify channels status")]
pub enum ChannelsCommand {
    /// Add a channel (with a catch-all route).
    #[command(subcommand)]
    Add(AddCommand),
    /// Show channels (relay providers too) and numbered routes.
    List(JsonArg),
    /// What each channel has waiting, delivered and dead-lettered, and why the last try failed.
    Status(JsonArg),
    /// Send a test notification to a channel now.
    Test(IdArg),
    /// Enable a channel.
    Enable(IdArg),
    /// Disable a channel (nothing is delivered to it).
    Disable(IdArg),
    /// Remove a channel, its routes and its secrets.
    Remove(IdArg),
    /// Add, list or remove routes (which questions and notifications go where).
    #[command(subcommand)]
    Route(RouteCommand),
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// The channel id.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct Common {
    /// A short id for this channel (letters, digits, - and _).
    pub id: String,
    /// Deliver a question only if it is still pending after S seconds (0-3600), so the
    /// person at the desk answers first and this channel stays quiet.
    #[arg(long, value_name = "S")]
    pub delay: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum AddCommand {
    /// Desktop notifications on this machine (the session D-Bus); shows the prompt.
    Desktop {
        #[command(flatten)]
        common: Common,
        /// One button per choice; pressing one answers the question (source desktop).
        #[arg(long)]
        answer_buttons: bool,
        /// Show only a generic title, not the prompt.
        #[arg(long)]
        no_message: bool,
    },
    /// An ntfy server (ntfy.sh or your own): the ntfy app on your phone shows it.
    Ntfy {
        #[command(flatten)]
        common: Common,
        /// The server's base URL, e.g. https://ntfy.sh.
        #[arg(long)]
        server: String,
        /// The topic to publish to: anyone who knows it can read it, so make it long and random.
        #[arg(long)]
        topic: String,
        /// Where answer buttons post (default: TOPIC-answers).
        #[arg(long)]
        answer_topic: Option<String>,
        /// A file holding an ntfy access token (tk_…), for a server with access control.
        #[arg(long, value_name = "F")]
        token_file: Option<PathBuf>,
        /// Consent to send the prompt, choices and project through the server (which sees them).
        #[arg(long)]
        include_message: bool,
        /// Allow/Deny buttons that answer the question (needs --include-message: they show the choices).
        #[arg(long)]
        answer_buttons: bool,
    },
    /// Signed HTTP POSTs of every event (Standard Webhooks).
    Webhook {
        #[command(flatten)]
        common: Common,
        /// Where events are POSTed.
        #[arg(long)]
        url: String,
        /// A file holding the signing secret (whsec_<base64>); default: a new one, printed once.
        #[arg(long, value_name = "F")]
        secret_file: Option<PathBuf>,
        /// Consent to send the prompt, choices and project.
        #[arg(long)]
        include_message: bool,
    },
}

#[derive(Debug, Args)]
pub struct RouteFilters {
    /// Only from this agent.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only about this project.
    #[arg(long)]
    pub project: Option<String>,
    /// Only this type: permission_required, input_required, completed, error, …, or a
    /// question kind (permission, single_choice, multi_choice, text).
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: Option<String>,
    /// Only at least this priority: low, normal, high, critical (questions are high).
    #[arg(long)]
    pub min_priority: Option<String>,
    /// Deliver questions only if still pending after S seconds (0-3600).
    #[arg(long, value_name = "S")]
    pub delay: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum RouteCommand {
    /// Add a route to a channel. A filtered route replaces the channel's catch-all one.
    Add {
        /// The channel id.
        channel: String,
        #[command(flatten)]
        filters: RouteFilters,
    },
    /// Show the numbered routes.
    List(JsonArg),
    /// Remove route N (as numbered by `channels route list`).
    Remove { n: usize },
}

#[derive(Debug, thiserror::Error)]
pub enum ChannelsCliError {
    #[error(transparent)]
    Config(#[from] ChannelConfigError),
    #[error(transparent)]
    Relay(#[from] crate::relay::config::RelayConfigError),
    #[error(transparent)]
    Paths(#[from] crate::paths::PathsError),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("{0}")]
    Usage(String),
    /// The channel named does not exist (exit 3).
    #[error("no channel named {0:?}")]
    NotFound(String),
}

type Result<T> = std::result::Result<T, ChannelsCliError>;

fn usage(m: impl Into<String>) -> ChannelsCliError {
    ChannelsCliError::Usage(m.into())
}

pub async fn run(cmd: ChannelsCommand) -> Result<()> {
    let paths = Paths::from_env()?;
    paths.ensure_dirs()?;
    let file = paths.config_file();
    match cmd {
        ChannelsCommand::Add(a) => add(&paths, a)?,
        ChannelsCommand::List(a) => {
            let channels = ChannelsConfig::load(&file)?;
            let relay = RelayConfig::load(&file)?;
            if a.json {
                print_json(&list_json(&channels, &relay));
            } else {
                print_list(&channels, &relay);
            }
            return Ok(());
        }
        ChannelsCommand::Status(a) => {
            let v = call(&paths, crate::client::Method::GET, "/v1/channels/status").await?;
            if a.json {
                print_json(&v);
            } else {
                print_status(&v);
            }
            return Ok(());
        }
        ChannelsCommand::Test(a) => {
            let path = format!("/v1/channels/{}/test", a.id);
            call(&paths, crate::client::Method::POST, &path).await?;
            println!("test notification sent to {}", a.id);
            return Ok(());
        }
        ChannelsCommand::Enable(a) => set_enabled(&file, &a.id, true)?,
        ChannelsCommand::Disable(a) => set_enabled(&file, &a.id, false)?,
        ChannelsCommand::Remove(a) => {
            let mut c = ChannelsConfig::load(&file)?;
            if c.channel(&a.id).is_none() {
                return Err(ChannelsCliError::NotFound(a.id));
            }
            c.channels.retain(|x| x.id != a.id);
            c.routes.retain(|r| r.channel != a.id);
            c.save(&file)?;
            let mut secrets = cfg::load_secrets(&paths)?;
            if secrets.remove(&a.id).is_some() {
                cfg::save_secrets(&paths, &secrets)?;
            }
            println!("removed channel {}", a.id);
        }
        ChannelsCommand::Route(r) => route(&file, r)?,
    }
    tell_broker(&paths).await;
    Ok(())
}

fn add(paths: &Paths, a: AddCommand) -> Result<()> {
    let file = paths.config_file();
    let mut c = ChannelsConfig::load(&file)?;
    let base = |id: &str, kind| Channel {
        id: id.to_string(),
        kind,
        enabled: true,
        include_message: false,
        answer_buttons: false,
        server: None,
        topic: None,
        answer_topic: None,
        url: None,
    };
    let mut secret = cfg::ChannelSecrets::default();
    let mut printed_secret = None;
    let (channel, delay) = match a {
        AddCommand::Desktop {
            common,
            answer_buttons,
            no_message,
        } => (
            Channel {
                include_message: !no_message,
                answer_buttons,
                ..base(&common.id, ChannelKind::Desktop)
            },
            common.delay,
        ),
        AddCommand::Ntfy {
            common,
            server,
            topic,
            answer_topic,
            token_file,
            include_message,
            answer_buttons,
        } => {
            if answer_buttons && !include_message {
                return Err(usage(
                    "--answer-buttons needs --include-message: the buttons show the question's choices",
                ));
            }
            if let Some(f) = token_file {
                secret.ntfy_token = Some(read_secret(&f)?);
            }
            (
                Channel {
                    include_message,
                    answer_buttons,
                    server: Some(server.trim_end_matches('/').to_string()),
                    topic: Some(topic),
                    answer_topic,
                    ..base(&common.id, ChannelKind::Ntfy)
                },
                common.delay,
            )
        }
        AddCommand::Webhook {
            common,
            url,
            secret_file,
            include_message,
        } => {
            let s = match secret_file {
                Some(f) => {
                    let s = read_secret(&f)?;
                    if crate::channels::webhook::key_of(s.expose()).is_none() {
                        return Err(usage(format!(
                            "{} must hold a secret of the form whsec_<base64>",
                            f.display()
                        )));
                    }
                    s
                }
                None => {
                    let s = crate::channels::webhook::new_secret();
                    printed_secret = Some(s.clone());
                    s
                }
            };
            secret.webhook_secret = Some(s);
            (
                Channel {
                    include_message,
                    url: Some(url),
                    ..base(&common.id, ChannelKind::Webhook)
                },
                common.delay,
            )
        }
    };
    if c.channel(&channel.id).is_some() {
        return Err(usage(format!(
            "a channel named {:?} exists; remove it first",
            channel.id
        )));
    }
    if RelayConfig::load(&file)?.provider(&channel.id).is_some() {
        return Err(usage(format!(
            "{:?} names a relay provider; pick another id",
            channel.id
        )));
    }
    check_delay(delay)?;
    let id = channel.id.clone();
    let kind = channel.kind;
    c.channels.push(channel);
    c.routes.push(Route {
        channel: id.clone(),
        enabled: true,
        agent: None,
        project: None,
        kind: None,
        min_priority: None,
        delay,
    });
    c.save(&file)?;
    if secret != cfg::ChannelSecrets::default() {
        let mut all = cfg::load_secrets(paths)?;
        all.insert(id.clone(), secret);
        cfg::save_secrets(paths, &all)?;
    }
    println!("added {} channel {id} (route: everything)", kind.as_str());
    if let Some(s) = printed_secret {
        println!(
            "signing secret (shown once; give it to the receiver): {}",
            s.expose()
        );
    }
    Ok(())
}

fn check_delay(delay: Option<u64>) -> Result<()> {
    match delay {
        Some(d) if d > cfg::MAX_DELAY_SECONDS => Err(usage(format!(
            "--delay must be 0-{} seconds",
            cfg::MAX_DELAY_SECONDS
        ))),
        _ => Ok(()),
    }
}

fn read_secret(f: &Path) -> Result<Secret> {
    let text = std::fs::read_to_string(f)
        .map_err(|e| usage(format!("cannot read {}: {e}", f.display())))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(usage(format!("{} is empty", f.display())));
    }
    Ok(Secret::new(text))
}

fn set_enabled(file: &Path, id: &str, enabled: bool) -> Result<()> {
    let mut c = ChannelsConfig::load(file)?;
    let Some(ch) = c.channels.iter_mut().find(|x| x.id == id) else {
        return Err(ChannelsCliError::NotFound(id.to_string()));
    };
    ch.enabled = enabled;
    c.save(file)?;
    println!(
        "channel {id} {}",
        if enabled { "enabled" } else { "disabled" }
    );
    Ok(())
}

fn route(file: &Path, cmd: RouteCommand) -> Result<()> {
    let mut c = ChannelsConfig::load(file)?;
    match cmd {
        RouteCommand::Add { channel, filters } => {
            if c.channel(&channel).is_none() {
                return Err(ChannelsCliError::NotFound(channel));
            }
            check_delay(filters.delay)?;
            let r = Route {
                channel: channel.clone(),
                enabled: true,
                agent: filters.agent,
                project: filters.project,
                kind: filters.kind,
                min_priority: filters.min_priority,
                delay: filters.delay,
            };
            let filtered = r.agent.is_some()
                || r.project.is_some()
                || r.kind.is_some()
                || r.min_priority.is_some();
            let only_catch_alls = c
                .routes
                .iter()
                .filter(|x| x.channel == channel)
                .all(is_catch_all);
            if filtered && only_catch_alls {
                c.routes.retain(|x| x.channel != channel);
                println!("(replaces the catch-all route of {channel})");
            }
            c.routes.push(r);
            c.save(file)?;
            println!("added route {} to {channel}", c.routes.len());
        }
        RouteCommand::List(a) => {
            if a.json {
                print_json(&json!({"routes": c.routes}));
            } else {
                print_routes(&c.routes);
            }
        }
        RouteCommand::Remove { n } => {
            if n == 0 || n > c.routes.len() {
                return Err(usage(format!(
                    "no route {n}; `agentnotify channels route list` numbers them 1-{}",
                    c.routes.len()
                )));
            }
            c.routes.remove(n - 1);
            c.save(file)?;
            println!("removed route {n}");
        }
    }
    Ok(())
}

fn is_catch_all(r: &Route) -> bool {
    r.agent.is_none() && r.project.is_none() && r.kind.is_none() && r.min_priority.is_none()
}

/// Asks the running broker, if any, to look at the settings again (never starts one).
async fn tell_broker(paths: &Paths) {
    if let Some((client, _)) = crate::client::from_files(paths) {
        let _ = client
            .call(
                crate::client::Method::POST,
                "/v1/channels/reload",
                Some(&json!({})),
                Duration::from_secs(2),
            )
            .await;
    }
}

async fn call(paths: &Paths, method: crate::client::Method, path: &str) -> Result<Value> {
    let client = crate::client::attach_or_spawn(paths).await?;
    let body = (method == crate::client::Method::POST).then(|| json!({}));
    let (_, v) = client
        .call(method, path, body.as_ref(), Duration::from_secs(30))
        .await?;
    Ok(v)
}

/// What `list --json` prints: settings, never secrets.
fn list_json(c: &ChannelsConfig, relay: &RelayConfig) -> Value {
    let mut channels: Vec<Value> = c
        .channels
        .iter()
        .map(|ch| serde_json::to_value(ch).expect("a channel serialises"))
        .collect();
    for p in &relay.providers {
        channels
            .push(json!({"id": p.id, "kind": "relay", "enabled": p.enabled, "url": p.relay_url}));
    }
    json!({"channels": channels, "routes": c.routes})
}

fn print_list(c: &ChannelsConfig, relay: &RelayConfig) {
    if c.channels.is_empty() && relay.providers.is_empty() {
        println!("no channels; add one with `agentnotify channels add desktop|ntfy|webhook ID`");
        return;
    }
    for ch in &c.channels {
        let place = match ch.kind {
            ChannelKind::Ntfy => ch.server.clone().unwrap_or_default(),
            ChannelKind::Webhook => ch.url.clone().unwrap_or_default(),
            ChannelKind::Desktop => "this machine".into(),
        };
        let mut flags = Vec::new();
        if ch.include_message {
            flags.push("message");
        }
        if ch.answer_buttons {
            flags.push("answer-buttons");
        }
        println!(
            "{}  {:<7}  {}  {}  {}",
            ch.id,
            ch.kind.as_str(),
            if ch.enabled { "enabled " } else { "disabled" },
            place,
            flags.join(",")
        );
    }
    for p in &relay.providers {
        println!(
            "{}  relay    {}  {}",
            p.id,
            if p.enabled { "enabled " } else { "disabled" },
            p.relay_url
        );
    }
    print_routes(&c.routes);
}

fn print_routes(routes: &[Route]) {
    println!("routes:");
    for (i, r) in routes.iter().enumerate() {
        let mut f = Vec::new();
        if let Some(a) = &r.agent {
            f.push(format!("agent={a}"));
        }
        if let Some(p) = &r.project {
            f.push(format!("project={p}"));
        }
        if let Some(t) = &r.kind {
            f.push(format!("type={t}"));
        }
        if let Some(p) = &r.min_priority {
            f.push(format!("min-priority={p}"));
        }
        if let Some(d) = r.delay {
            f.push(format!("delay={d}s"));
        }
        let what = if f.is_empty() {
            "everything".to_string()
        } else {
            f.join(" ")
        };
        println!(
            "  {}. {}  {}{}",
            i + 1,
            r.channel,
            what,
            if r.enabled { "" } else { "  (disabled)" }
        );
    }
}

fn print_status(v: &Value) {
    for c in v["channels"].as_array().into_iter().flatten() {
        let avail = if c["available"] == true {
            "available".to_string()
        } else {
            format!(
                "UNAVAILABLE ({})",
                c["unavailable_reason"].as_str().unwrap_or("?")
            )
        };
        println!(
            "{}  {}  {}  waiting {}  delivered {}  dead {}{}",
            c["id"].as_str().unwrap_or("?"),
            c["kind"].as_str().unwrap_or("?"),
            avail,
            c["waiting"],
            c["delivered"],
            c["dead"],
            c["last_error"]
                .as_str()
                .map(|e| format!("  last error: {e}"))
                .unwrap_or_default()
        );
    }
    let dead = v["dead_letters"].as_u64().unwrap_or(0);
    if dead > 0 {
        println!("{dead} dead letter(s): deliveries that failed for 24 h and are no longer tried");
        for e in v["outbox"].as_array().into_iter().flatten() {
            if e["state"] == "dead" {
                println!(
                    "  {}  attempts {}  {}",
                    e["id"].as_str().unwrap_or("?"),
                    e["attempts"],
                    e["last_error"].as_str().unwrap_or("")
                );
            }
        }
    }
}
