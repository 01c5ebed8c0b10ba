//! `agentnotify relay …`: set up providers and routes, run the reference Relay, and play
//! the phone with `relay device …`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::device::{Answer, Device, DeviceError};
use crate::model::render::render_visible;
use crate::relay::config::{self, Provider, RelayConfig, Route};
use agentnotify_relay_proto::client::RelayClient;
use agentnotify_relay_proto::pairing::{self, PairingCode, PairingId};
use agentnotify_relay_proto::wire::QuestionView;

use super::output::print_json;
use crate::paths::Paths;
use crate::secret::Secret;

#[derive(Debug, Subcommand)]
#[command(after_help = "Setup in short (see docs/RELAY.md):\n  \
agentnotify relay serve --bind 0.0.0.0 --port 8443 --tls-cert chain.pem --tls-key key.pem\n  \
agentnotify relay add home --url https://HOST:8443 --include-message\n  \
agentnotify relay pair home                             # a single-use code, link and QR\n  \
agentnotify relay device register --code CODE           # on the phone (or another terminal)\n  \
agentnotify relay device inbox\n  \
agentnotify relay device answer ID --choice allow-once")]
pub enum RelayCommand {
    /// Run the reference Relay server (HTTPS with --tls-cert/--tls-key, else plain HTTP).
    Serve(agentnotify_relay::ServeArgs),
    /// Register this installation with a Relay and add a route to it.
    Add(AddArgs),
    /// Show providers and numbered routes.
    List(JsonArg),
    /// Mint a single-use pairing code (10 minutes, one device): prints it, the app link and,
    /// on a terminal, the link as a QR code.
    Pair(PairArgs),
    /// List the paired devices (name, when paired, last seen), or revoke one.
    Devices(DevicesArgs),
    /// Enable a provider.
    Enable(ProviderArg),
    /// Disable a provider (nothing is sent to or fetched from it).
    Disable(ProviderArg),
    /// Remove a provider, its routes, credentials and cursor.
    Remove(ProviderArg),
    /// Add, enable, disable or remove routes.
    #[command(subcommand)]
    Route(RouteCommand),
    /// What the running broker still has to deliver, per provider.
    Status(JsonArg),
    /// Play the phone: pair, read sealed questions, answer one.
    #[command(subcommand)]
    Device(DeviceCommand),
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProviderArg {
    /// The provider id.
    pub id: String,
}

#[derive(Debug, Args, Clone)]
pub struct RouteFilters {
    /// Consent to send question text to this provider. Without it, no question is sent.
    #[arg(long)]
    pub include_message: bool,
    /// Only questions from this agent.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only questions from this project.
    #[arg(long)]
    pub project: Option<String>,
    /// Only this type: permission_required, input_required, or a kind (permission, single_choice,
    /// multi_choice, text).
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: Option<String>,
    /// Only at least this priority: low, normal, high, critical (questions are high).
    #[arg(long)]
    pub min_priority: Option<String>,
    /// Add the route disabled.
    #[arg(long)]
    pub disabled: bool,
}

impl RouteFilters {
    fn route(&self, provider: &str) -> Route {
        Route {
            provider: provider.to_string(),
            enabled: !self.disabled,
            include_message: self.include_message,
            agent: self.agent.clone(),
            project: self.project.clone(),
            kind: self.kind.clone(),
            min_priority: self.min_priority.clone(),
        }
    }
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// A short id for this provider (letters, digits, - and _).
    pub id: String,
    /// The Relay's base URL: https:// (certificate checked against the system's CA store, or
    /// SSL_CERT_FILE), or http:// for a Relay on loopback.
    #[arg(long)]
    pub url: String,
    /// Accept answers that are not sealed to this installation (not recommended).
    #[arg(long)]
    pub accept_plain_answers: bool,
    #[command(flatten)]
    pub route: RouteFilters,
}

#[derive(Debug, Args)]
pub struct PairArgs {
    pub id: String,
    /// Print JSON (the code and what it contains) instead of the code alone.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    #[command(subcommand)]
    pub cmd: Option<DevicesCommand>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum DevicesCommand {
    /// Remove a device: it gets no more questions, its answers are refused, and the Relay
    /// drops its token.
    Revoke {
        /// The device id (from `agentnotify relay devices`).
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum RouteCommand {
    /// Add a route to a provider.
    Add {
        provider: String,
        #[command(flatten)]
        filters: RouteFilters,
    },
    /// Enable route N (as numbered by `relay list`).
    Enable { n: usize },
    /// Disable route N.
    Disable { n: usize },
    /// Remove route N.
    Remove { n: usize },
}

#[derive(Debug, Args)]
pub struct DeviceDir {
    /// The device's folder (default: `device/` in the config dir).
    #[arg(long, value_name = "DIR", global = true)]
    pub device_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// Pair this device using the code from `agentnotify relay pair`.
    Register {
        /// The pairing code (starts with anp1.).
        #[arg(long)]
        code: String,
        /// A name the desktop shows for this device.
        #[arg(long, default_value = "cli-device")]
        name: String,
        #[command(flatten)]
        dir: DeviceDir,
    },
    /// Fetch and open the questions waiting for this device.
    Inbox {
        /// Print JSON instead of text (without the nonce and digest).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        dir: DeviceDir,
    },
    /// Follow the device's live stream: one line per question, withdrawal and verdict, until
    /// interrupted (reconnects by itself).
    Watch {
        #[command(flatten)]
        dir: DeviceDir,
    },
    /// Answer one question, sealed to the installation, and wait for the broker's verdict.
    Answer {
        /// The interaction id shown by `inbox`.
        id: String,
        /// The chosen choice id; repeat it for a multi_choice question.
        #[arg(long, required_unless_present = "text")]
        choice: Vec<String>,
        /// The text answer (text questions), or the "Other" text of a choice question that
        /// allows one.
        #[arg(long)]
        text: Option<String>,
        /// Idempotency key of this answer (default: a new random one).
        #[arg(long)]
        response_id: Option<String>,
        /// Seconds to wait for the broker's verdict (0 = do not wait).
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Print the verdict as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        dir: DeviceDir,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RelayCliError {
    #[error(transparent)]
    Config(#[from] config::RelayConfigError),
    #[error(transparent)]
    Paths(#[from] crate::paths::PathsError),
    #[error(transparent)]
    Serve(#[from] agentnotify_relay::cli::ServeError),
    #[error(transparent)]
    Relay(#[from] agentnotify_relay_proto::client::RelayClientError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("{0}")]
    Usage(String),
    /// The provider named does not exist (exit 3).
    #[error("no relay provider named {0:?}")]
    NotFound(String),
    #[error("no paired device with id {0:?} (agentnotify relay devices lists them)")]
    NoDevice(String),
}

type Result<T> = std::result::Result<T, RelayCliError>;

/// Runs one `agentnotify relay …` command.
pub async fn run(cmd: RelayCommand) -> Result<()> {
    let paths = Paths::from_env()?;
    let config_file = paths.config_file();
    match cmd {
        RelayCommand::Serve(a) => {
            let data_dir = a
                .data
                .clone()
                .unwrap_or_else(|| paths.data_dir.join("relay"));
            a.run(data_dir).await?;
        }
        RelayCommand::Add(a) => add(&paths, a).await?,
        RelayCommand::List(a) => {
            let cfg = RelayConfig::load(&config_file)?;
            if a.json {
                print_json(&serde_json::to_value(&cfg).expect("config serialises"));
            } else {
                print_config(&cfg);
            }
        }
        RelayCommand::Pair(a) => {
            let code = pairing_code(&paths, &a.id).await?;
            let link = code.app_link();
            if a.json {
                print_json(
                    &json!({"provider": a.id, "code": code.encode(), "link": link, "expires_at": code.expires_at, "relay_url": code.relay_url, "installation_id": code.installation_id}),
                );
            } else {
                println!("{}", code.encode());
                println!("open on the phone: {link}");
                use std::io::IsTerminal;
                if std::io::stdout().is_terminal() {
                    if let Ok(qr) = qrcode::QrCode::new(link.as_bytes()) {
                        println!(
                            "{}",
                            qr.render::<qrcode::render::unicode::Dense1x2>()
                                .quiet_zone(true)
                                .build()
                        );
                    }
                }
                println!(
                    "single use: pairs one device, until {} (10 minutes)",
                    code.expires_at
                );
            }
        }
        RelayCommand::Devices(a) => devices(&paths, a).await?,
        RelayCommand::Enable(p) => set_provider_enabled(&config_file, &p.id, true)?,
        RelayCommand::Disable(p) => set_provider_enabled(&config_file, &p.id, false)?,
        RelayCommand::Remove(p) => {
            let mut cfg = RelayConfig::load(&config_file)?;
            if cfg.provider(&p.id).is_none() {
                return Err(RelayCliError::NotFound(p.id));
            }
            cfg.providers.retain(|x| x.id != p.id);
            cfg.routes.retain(|r| r.provider != p.id);
            cfg.save(&config_file)?;
            let mut secrets = config::load_secrets(&paths)?;
            secrets.remove(&p.id);
            config::save_secrets(&paths, &secrets)?;
            let cursors_file = paths.relay_cursors_file();
            if let Ok(bytes) = std::fs::read(&cursors_file) {
                let mut cursors: crate::relay::poller::Cursors =
                    serde_json::from_slice(&bytes).unwrap_or_default();
                if cursors.remove(&p.id).is_some() {
                    let bytes = serde_json::to_vec_pretty(&cursors).expect("strings serialise");
                    crate::fsutil::write_atomic(&cursors_file, &bytes, 0o600).map_err(|e| {
                        RelayCliError::Usage(format!(
                            "cannot update {}: {e}",
                            cursors_file.display()
                        ))
                    })?;
                }
            }
            println!("removed relay provider {}", p.id);
        }
        RelayCommand::Route(r) => route(&config_file, r)?,
        RelayCommand::Status(a) => {
            let client = crate::client::attach_or_spawn(&paths).await?;
            let (_, v) = client
                .call(
                    crate::client::Method::GET,
                    "/v1/relay/status",
                    None,
                    Duration::from_secs(10),
                )
                .await?;
            if a.json {
                print_json(&v);
            } else {
                for p in v["providers"].as_array().into_iter().flatten() {
                    let reach = match p["unreachable_reason"].as_str() {
                        _ if p["reachable"] == true => "reachable".to_string(),
                        Some(why) => format!("unreachable: {why}"),
                        None => String::new(),
                    };
                    println!(
                        "{}  {}  {}  {reach}",
                        p["id"].as_str().unwrap_or("?"),
                        if p["enabled"] == true {
                            "enabled "
                        } else {
                            "disabled"
                        },
                        p["relay_url"].as_str().unwrap_or("?")
                    );
                }
                let outbox = v["outbox"].as_array().cloned().unwrap_or_default();
                println!("{} question(s) waiting for delivery", outbox.len());
                for e in outbox {
                    println!(
                        "  {}  attempts {}  next {}  {}",
                        e["id"].as_str().unwrap_or("?"),
                        e["attempts"],
                        e["next_attempt_at"].as_str().unwrap_or("?"),
                        e["last_error"].as_str().unwrap_or("")
                    );
                }
            }
        }
        RelayCommand::Device(d) => device(&paths, d).await?,
    }
    Ok(())
}

fn set_provider_enabled(config_file: &std::path::Path, id: &str, enabled: bool) -> Result<()> {
    let mut cfg = RelayConfig::load(config_file)?;
    let p = cfg
        .providers
        .iter_mut()
        .find(|p| p.id == id)
        .ok_or_else(|| RelayCliError::NotFound(id.to_string()))?;
    p.enabled = enabled;
    cfg.save(config_file)?;
    println!(
        "relay provider {id} {}",
        if enabled { "enabled" } else { "disabled" }
    );
    Ok(())
}

/// Registers with the Relay, then records the provider, its secrets and a route.
async fn add(paths: &Paths, a: AddArgs) -> Result<()> {
    paths.ensure_dirs()?;
    let config_file = paths.config_file();
    let mut cfg = RelayConfig::load(&config_file)?;
    if cfg.provider(&a.id).is_some() {
        return Err(RelayCliError::Usage(format!(
            "a relay provider named {:?} exists already; remove it first (agentnotify relay remove {})",
            a.id, a.id
        )));
    }
    let mut provider = Provider {
        id: a.id.clone(),
        kind: "relay".into(),
        enabled: true,
        relay_url: a.url.trim_end_matches('/').to_string(),
        installation_id: "pending".into(),
        accept_plain_answers: a.accept_plain_answers,
    };
    // Check ids, URL and filters before anything is registered anywhere.
    let mut trial = cfg.clone();
    trial.providers.push(provider.clone());
    trial.routes.push(a.route.route(&a.id));
    trial.validate()?;

    let key = config::load_or_create_installation_key(paths)?;
    let pairing_secret = pairing::new_secret();
    let (installation_id, token) = RelayClient::new(&provider.relay_url, None)
        .register_installation(&pairing::pairing_token(&pairing_secret))
        .await?;
    provider.installation_id = installation_id.clone();
    let mut secrets = config::load_secrets(paths)?;
    secrets.insert(
        a.id.clone(),
        config::ProviderSecrets {
            installation_token: token,
            pairing_secret: Secret::new(pairing_secret),
        },
    );
    config::save_secrets(paths, &secrets)?;
    cfg.providers.push(provider);
    cfg.routes.push(a.route.route(&a.id));
    cfg.save(&config_file)?;
    println!(
        "relay provider {} added (installation {installation_id}, key {})",
        a.id,
        key.key_id()
    );
    if !a.route.include_message {
        println!(
            "note: the route was added without --include-message, so no question will be sent; \
             add one with `agentnotify relay route add {} --include-message`",
            a.id
        );
    }
    println!("pair a phone with: agentnotify relay pair {}", a.id);
    Ok(())
}

/// Mints a fresh single-use code: its secret is derived from the provider's master secret
/// and a new pairing id carrying the expiry, and only its token is announced to the Relay.
async fn pairing_code(paths: &Paths, id: &str) -> Result<PairingCode> {
    let cfg = RelayConfig::load(&paths.config_file())?;
    let provider = cfg
        .provider(id)
        .ok_or_else(|| RelayCliError::NotFound(id.to_string()))?;
    let secrets = config::load_secrets(paths)?;
    let s = secrets.get(id).ok_or_else(|| {
        RelayCliError::Usage(format!(
            "relay provider {id:?} has no stored credentials; remove and add it again"
        ))
    })?;
    let key = config::load_installation_key(paths)?.ok_or_else(|| {
        RelayCliError::Usage("no installation key yet; run `agentnotify relay add` first".into())
    })?;
    let signing = config::load_or_create_signing_key(paths)?;
    let expires = crate::model::Timestamp::now()
        .plus(Duration::from_secs(pairing::PAIRING_LIFETIME_SECS as u64));
    let pairing_id = PairingId::new((expires.millis() / 1000) as i64);
    // The expiry the id carries, to the second, is the one everybody checks.
    let expires_at = crate::model::Timestamp((expires.millis() / 1000) * 1000).to_rfc3339();
    let secret = pairing::derive_secret(s.pairing_secret.expose(), &pairing_id.0);
    RelayClient::new(&provider.relay_url, Some(s.installation_token.clone()))
        .register_pairing(&pairing_id.0, &pairing::pairing_token(&secret), &expires_at)
        .await?;
    Ok(PairingCode {
        relay_url: provider.relay_url.clone(),
        installation_id: provider.installation_id.clone(),
        installation_public_key: key.public_b64(),
        installation_signing_key: signing.public_b64(),
        pairing_secret: secret,
        expires_at,
    })
}

/// `relay devices [revoke ID]`, through the broker, which keeps the allow-list.
async fn devices(paths: &Paths, a: DevicesArgs) -> Result<()> {
    let client = crate::client::attach_or_spawn(paths).await?;
    let timeout = Duration::from_secs(20);
    match a.cmd {
        None => {
            let (_, v) = client
                .call(
                    crate::client::Method::GET,
                    "/v1/relay/devices",
                    None,
                    timeout,
                )
                .await?;
            if a.json {
                print_json(&v);
                return Ok(());
            }
            let devices = v["devices"].as_array().cloned().unwrap_or_default();
            if devices.is_empty() {
                println!("no paired devices (pair one with `agentnotify relay pair PROVIDER`)");
            }
            for d in devices {
                let text = |k: &str| d[k].as_str().unwrap_or("-").to_string();
                let state = if d["revoked_at"].is_string() {
                    format!("revoked {}", text("revoked_at"))
                } else {
                    "paired".to_string()
                };
                println!(
                    "{}  {}  {:?}  paired {}  last seen {}  {state}",
                    text("device_id"),
                    text("provider"),
                    text("name"),
                    text("paired_at"),
                    text("last_seen_at"),
                );
            }
        }
        Some(DevicesCommand::Revoke { id }) => {
            let path = format!(
                "/v1/relay/devices/{}",
                form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>()
            );
            let v = match client
                .call(crate::client::Method::DELETE, &path, None, timeout)
                .await
            {
                Ok((_, v)) => v,
                Err(crate::client::ClientError::Api { status: 404, .. }) => {
                    return Err(RelayCliError::NoDevice(id))
                }
                Err(e) => return Err(e.into()),
            };
            if a.json {
                print_json(&v);
            } else if v["relay_removed"] == true {
                println!("device {id} revoked (and removed at the relay)");
            } else {
                println!(
                    "device {id} revoked; the relay could not be told, so it may still list it, \
                     but it gets nothing and its answers are refused"
                );
            }
        }
    }
    Ok(())
}

fn print_config(cfg: &RelayConfig) {
    if cfg.providers.is_empty() {
        println!("no relay providers (add one with `agentnotify relay add`)");
        return;
    }
    println!("poll interval: {} s", cfg.poll_interval().as_secs());
    println!("providers:");
    for p in &cfg.providers {
        println!(
            "  {}  {}  {}  installation {}",
            p.id,
            if p.enabled { "enabled " } else { "disabled" },
            p.relay_url,
            p.installation_id
        );
    }
    println!("routes:");
    for (i, r) in cfg.routes.iter().enumerate() {
        let mut filters = Vec::new();
        if let Some(a) = &r.agent {
            filters.push(format!("agent={a}"));
        }
        if let Some(p) = &r.project {
            filters.push(format!("project={p}"));
        }
        if let Some(t) = &r.kind {
            filters.push(format!("type={t}"));
        }
        if let Some(p) = &r.min_priority {
            filters.push(format!("min_priority={p}"));
        }
        println!(
            "  {}. {}  {}  {}  {}",
            i + 1,
            r.provider,
            if r.enabled { "enabled " } else { "disabled" },
            if r.include_message {
                "include_message"
            } else {
                "no message (questions not sent)"
            },
            if filters.is_empty() {
                "all questions".to_string()
            } else {
                filters.join(" ")
            }
        );
    }
}

fn route(config_file: &std::path::Path, cmd: RouteCommand) -> Result<()> {
    let mut cfg = RelayConfig::load(config_file)?;
    let index = |n: usize, cfg: &RelayConfig| -> Result<usize> {
        if n == 0 || n > cfg.routes.len() {
            Err(RelayCliError::Usage(format!(
                "no route {n}: `agentnotify relay list` numbers them 1 to {}",
                cfg.routes.len()
            )))
        } else {
            Ok(n - 1)
        }
    };
    let message = match cmd {
        RouteCommand::Add { provider, filters } => {
            cfg.routes.push(filters.route(&provider));
            format!("route {} added", cfg.routes.len())
        }
        RouteCommand::Enable { n } => {
            let i = index(n, &cfg)?;
            cfg.routes[i].enabled = true;
            format!("route {n} enabled")
        }
        RouteCommand::Disable { n } => {
            let i = index(n, &cfg)?;
            cfg.routes[i].enabled = false;
            format!("route {n} disabled")
        }
        RouteCommand::Remove { n } => {
            let i = index(n, &cfg)?;
            cfg.routes.remove(i);
            format!("route {n} removed")
        }
    };
    cfg.save(config_file)?;
    println!("{message}");
    Ok(())
}

/// One inbox question, whole, every field rendered under SPEC §13.2.
fn print_question(q: &QuestionView) {
    let shown = |s: &str| render_visible(s).replace('\n', "\n    ");
    println!(
        "{}  {}  {}{}  (expires {})",
        q.id,
        q.question.kind.as_str(),
        shown(&q.question.agent),
        q.question
            .project
            .as_deref()
            .map(|p| format!("/{}", shown(p)))
            .unwrap_or_default(),
        q.expires_at
    );
    println!("    {}", shown(&q.question.prompt));
    if let Some(body) = &q.question.body {
        println!("    ---- {} lines ----", body.lines().count());
        println!("    {}", shown(body));
        println!("    ----");
    }
    for c in &q.question.choices {
        match &c.detail {
            Some(d) => println!("    [{}] {} — {}", c.id, shown(&c.label), shown(d)),
            None => println!("    [{}] {}", c.id, shown(&c.label)),
        }
    }
    if let (Some(min), Some(max)) = (q.question.min_selections, q.question.max_selections) {
        println!("    (choose {min} to {max}: repeat --choice)");
    }
    if q.question.allow_other {
        let n = q.question.other_max_length.unwrap_or(500);
        println!("    (or answer in your own words with --text, up to {n} characters)");
    }
    if let Some(n) = q.question.text_max_length {
        println!("    (text answer, up to {n} characters)");
    }
}

async fn device(paths: &Paths, cmd: DeviceCommand) -> Result<()> {
    let dir_of = |d: DeviceDir| {
        d.device_dir
            .unwrap_or_else(|| paths.config_dir.join("device"))
    };
    match cmd {
        DeviceCommand::Register { code, name, dir } => {
            let dir = dir_of(dir);
            let d = Device::register(&dir, &code, &name).await?;
            println!(
                "device {} registered with installation {} (keys and token in {})",
                d.state.device_id,
                d.state.installation_id,
                dir.display()
            );
        }
        DeviceCommand::Inbox { json, dir } => {
            let d = Device::load(&dir_of(dir))?;
            let inbox = d.inbox().await?;
            let (questions, unreadable, forged) = (inbox.questions, inbox.unreadable, inbox.forged);
            if json {
                // The nonce and digest stay on the device: `answer` reads them itself.
                let shown: Vec<Value> = questions
                    .iter()
                    .map(|q| {
                        let mut v = serde_json::to_value(q).expect("a question serialises");
                        if let Some(o) = v.as_object_mut() {
                            o.remove("nonce");
                            o.remove("request_digest");
                        }
                        v
                    })
                    .collect();
                print_json(
                    &json!({"questions": shown, "unreadable": unreadable, "forged": forged}),
                );
            } else {
                if questions.is_empty() {
                    println!("no questions waiting");
                }
                for q in &questions {
                    print_question(q);
                }
                if forged > 0 {
                    println!(
                        "{forged} question(s) not from your computer (not signed by the installation this device paired with) were ignored"
                    );
                }
                if unreadable > 0 {
                    println!(
                        "{unreadable} sealed question(s) could not be opened and were ignored"
                    );
                }
            }
        }
        DeviceCommand::Watch { dir } => {
            use crate::device::StreamEvent;
            let d = Device::load(&dir_of(dir))?;
            let (tx, mut rx) = tokio::sync::mpsc::channel(64);
            let watching = tokio::spawn(async move { d.watch(tx).await });
            while let Some(e) = rx.recv().await {
                match e {
                    StreamEvent::Question(q) => println!(
                        "question {}  {}  {}",
                        q.id,
                        q.question.kind.as_str(),
                        render_visible(q.question.prompt.lines().next().unwrap_or(""))
                    ),
                    StreamEvent::Rejected { event_id, reason } => {
                        println!("ignored {event_id}: {reason}")
                    }
                    StreamEvent::Ready(n) => println!("connected: {n} question(s) waiting"),
                    StreamEvent::Withdrawn(e) => println!("withdrawn {e}"),
                    StreamEvent::Verdict(r) => println!(
                        "verdict {} {}{}",
                        r.response_id,
                        r.status,
                        r.code.map(|c| format!(" ({c})")).unwrap_or_default()
                    ),
                    StreamEvent::Heartbeat => {}
                    StreamEvent::Disconnected(why) => {
                        println!("disconnected ({why}); reconnecting")
                    }
                }
            }
            watching
                .await
                .map_err(|e| RelayCliError::Usage(e.to_string()))??;
        }
        DeviceCommand::Answer {
            id,
            choice,
            text,
            response_id,
            timeout,
            json,
            dir,
        } => {
            let d = Device::load(&dir_of(dir))?;
            let mut choice = choice;
            let answer = match (choice.len(), text) {
                (1, None) => Answer::Choice(choice.remove(0)),
                (0, Some(t)) => Answer::Text(t),
                (0, None) => return Err(RelayCliError::Usage("give --choice or --text".into())),
                (_, t) => Answer::Choices(choice, t),
            };
            let response_id = d.answer(&id, &answer, response_id).await?;
            let verdict = if timeout == 0 {
                json!({"response_id": response_id, "status": "pending"})
            } else {
                let r = d
                    .verdict(&response_id, &id, Duration::from_secs(timeout))
                    .await?;
                serde_json::to_value(r).expect("a result serialises")
            };
            if json {
                print_json(&verdict);
            } else {
                println!(
                    "answer {response_id}: {}",
                    verdict["status"].as_str().unwrap_or("?")
                );
            }
        }
    }
    Ok(())
}
