//! The surfaces `setup` offers beyond this terminal and the web page: desktop notifications
//! when a session bus exists, the ntfy app on a fresh unguessable topic, and the phone app
//! through a Relay. Each finds what an earlier run set up and keeps it.

use rand::distr::{Alphanumeric, SampleString};

use super::{agentnotify, Ask};
use crate::channels::config::{ChannelKind, ChannelsConfig};
use crate::cli::CliError;
use crate::paths::Paths;
use crate::relay::config::RelayConfig;

/// The id `setup` gives each channel and provider it adds.
const DESKTOP_ID: &str = "desktop";
const NTFY_ID: &str = "ntfy";
const RELAY_ID: &str = "phone";

pub async fn desktop(ask: &Ask, paths: &Paths, scripted: bool) -> Result<(), CliError> {
    let file = paths.config_file();
    let config = ChannelsConfig::load(&file).map_err(other)?;
    if let Some(c) = config
        .channels
        .iter()
        .find(|c| c.kind == ChannelKind::Desktop)
    {
        println!(
            "  Desktop notifications: already set up (channel {}).",
            c.id
        );
        return Ok(());
    }
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() {
        println!("  Desktop notifications: not offered (no session D-Bus here).");
        return Ok(());
    }
    if !ask.confirm(
        "Show questions as desktop notifications (a button per answer)?",
        true,
        scripted,
    )? {
        return Ok(());
    }
    println!("  writing {}", file.display());
    agentnotify(&["channels", "add", "desktop", DESKTOP_ID, "--answer-buttons"]).await
}

pub async fn ntfy(
    ask: &Ask,
    paths: &Paths,
    scripted: Option<&str>,
    scripted_message: bool,
) -> Result<(), CliError> {
    let file = paths.config_file();
    let config = ChannelsConfig::load(&file).map_err(other)?;
    if let Some(c) = config.channels.iter().find(|c| c.kind == ChannelKind::Ntfy) {
        println!("  ntfy: already set up (channel {}).", c.id);
        if let (Some(server), Some(topic)) = (&c.server, &c.topic) {
            show_subscribe_link(server, topic);
        }
        return Ok(());
    }
    if !ask.confirm(
        "Get questions on your phone through the ntfy app?",
        false,
        scripted.is_some(),
    )? {
        return Ok(());
    }
    let server = ask.input(
        "ntfy server",
        "https://ntfy.sh",
        scripted.unwrap_or_default(),
    )?;
    let server = server.trim_end_matches('/').to_string();
    if !ask.yes {
        println!(
            "  With the question's text and Allow/Deny buttons you can answer from the phone, \
             but {server} can read them; without, the phone only hears that a question waits."
        );
    }
    let message = ask.confirm(
        &format!("Send the question's text through {server}?"),
        true,
        scripted_message,
    )?;
    let topic = new_topic();
    println!("  writing {}", file.display());
    let mut args = vec![
        "channels", "add", "ntfy", NTFY_ID, "--server", &server, "--topic", &topic,
    ];
    if message {
        args.extend(["--include-message", "--answer-buttons"]);
    }
    agentnotify(&args).await?;
    show_subscribe_link(&server, &topic);
    Ok(())
}

pub async fn relay(ask: &Ask, paths: &Paths, scripted: Option<&str>) -> Result<(), CliError> {
    let file = paths.config_file();
    let config = RelayConfig::load(&file).map_err(other)?;
    let existing = config.providers.first().map(|p| p.id.clone());
    let id = match existing {
        Some(id) => {
            println!("  Phone app: already set up (relay provider {id}).");
            if !ask.confirm("Pair another phone now?", false, false)? {
                return Ok(());
            }
            id
        }
        None => {
            let url = ask.input(
                "Relay URL for the phone app (empty: skip)",
                "",
                scripted.unwrap_or_default(),
            )?;
            if url.is_empty() {
                println!("  Phone app: skipped (run `agentnotify setup --relay URL` later).");
                return Ok(());
            }
            println!(
                "  writing {} and the relay credentials beside it",
                file.display()
            );
            // Questions are sealed to the paired phones: the Relay cannot read them.
            agentnotify(&["relay", "add", RELAY_ID, "--url", &url, "--include-message"]).await?;
            RELAY_ID.to_string()
        }
    };
    println!("  Scan this with your phone to pair it:");
    agentnotify(&["relay", "pair", &id]).await
}

/// 24 letters and digits (about 143 bits): the topic is the only secret of an ntfy channel.
fn new_topic() -> String {
    format!(
        "agentnotify-{}",
        Alphanumeric.sample_string(&mut rand::rng(), 24)
    )
}

fn show_subscribe_link(server: &str, topic: &str) {
    let link = format!("{server}/{topic}");
    println!("  Subscribe to it in the ntfy app (+, then this topic) or open: {link}");
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return;
    }
    if let Ok(qr) = qrcode::QrCode::new(link.as_bytes()) {
        println!(
            "{}",
            qr.render::<qrcode::render::unicode::Dense1x2>()
                .quiet_zone(true)
                .build()
        );
    }
}

fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}
