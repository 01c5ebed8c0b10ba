//! The host bridge: `agentnotify-hook <claude|codex> ask-permission` (SPEC §6), and the
//! notify-only `agentnotify-hook <claude|codex> notify` (SPEC §11.7), and the same flow for
//! Hermes' approval transport (`hermes.rs`) and our Pi extension's gate (`pi.rs`).
//!
//! Its whole life is one function whose every failure ends in "print nothing, exit 0", so
//! the host falls back to its own prompt. It never auto-allows, never auto-denies, never
//! exits non-zero, and exits the moment it has printed a decision.

pub mod decision;
pub mod hermes;
pub mod notify;
pub mod payload;
pub mod pi;
mod run;
mod signals;
mod transcript;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::time::Duration;

use clap::Parser;

pub use decision::{Decision, Event};
pub use payload::{Host, Plan};

/// The bridge's arguments.
#[derive(Debug, Parser)]
#[command(
    name = "agentnotify-hook",
    version,
    about = "Claude Code / Codex PermissionRequest hook: ask the question remotely and print the host's decision",
    after_help = format!("Setup commands: agentnotify-hook install-harness <claude|codex|pi|hermes|openclaw> | uninstall-harness <host> | doctor [host…]\n\
                  Their exit codes: {}.\n\
                  On any failure the hook prints nothing and exits 0, so the host shows its own prompt.", crate::exit::TABLE)
)]
pub struct HookArgs {
    /// The host running the hook: claude, codex, hermes (`hermes ask-approval`: our
    /// Hermes approval transport, SPEC §10.2) or pi (`pi gate`: what our Pi extension runs
    /// per gated tool call).
    pub host: String,
    /// The hook event: `ask-permission` (PermissionRequest), `pre-tool-use` (Claude's
    /// AskUserQuestion outside the default permission mode, SPEC §13.3), or `notify` (Stop,
    /// SubagentStop, Notification, SessionEnd hooks: posts "Claude finished in shop"; prints
    /// nothing).
    pub action: String,
    /// Seconds to wait for an answer; must end before the host's hook timeout.
    #[arg(long, default_value_t = 590)]
    pub timeout: u64,
    /// Internal: the detached half of `notify` that posts the notification.
    #[arg(long, hide = true)]
    pub post: bool,
}

/// Runs the bridge and exits the process with status 0, whatever happens.
pub fn main(args: Vec<OsString>) -> ! {
    signals::exit_quietly_on_host_signals();
    crate::fsutil::make_new_files_private();
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(panic = %info, "hook panicked; staying silent");
    }));
    let parsed = match HookArgs::try_parse_from(&args) {
        Ok(a) => a,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(e.kind(), DisplayHelp | DisplayVersion) {
                let _ = write!(std::io::stdout(), "{e}");
            } else {
                let _ = write!(std::io::stderr(), "{e}");
            }
            std::process::exit(0)
        }
    };
    if (parsed.host.as_str(), parsed.action.as_str()) == ("hermes", "ask-approval") {
        // Our Hermes approval transport: prints one choice id, or nothing.
        let budget = Duration::from_secs(parsed.timeout.clamp(1, 3600));
        let choice = std::panic::catch_unwind(|| hermes::ask(&read_stdin()?, budget))
            .ok()
            .flatten();
        if let Some(choice) = choice {
            signals::hold_while_printing();
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{choice}");
            let _ = out.flush();
        }
        std::process::exit(0)
    }
    if (parsed.host.as_str(), parsed.action.as_str()) == ("pi", "gate") {
        // What our Pi extension spawns per gated call: prints its decision, or nothing.
        let budget = Duration::from_secs(parsed.timeout.clamp(1, 3600));
        let allow = std::panic::catch_unwind(|| pi::ask(&read_stdin()?, budget))
            .ok()
            .flatten();
        if let Some(allow) = allow {
            signals::hold_while_printing();
            let line = serde_json::json!({"decision": if allow { "allow" } else { "deny" }});
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        std::process::exit(0)
    }
    let (host, event) = match (Host::parse(&parsed.host), parsed.action.as_str()) {
        (Some(h), "ask-permission") => (h, Event::PermissionRequest),
        (Some(Host::Claude), "pre-tool-use") => (Host::Claude, Event::PreToolUse),
        (Some(h), "notify") => {
            let _ = std::panic::catch_unwind(|| {
                if let Some(stdin) = read_stdin() {
                    if parsed.post {
                        notify::post(&stdin);
                    } else {
                        notify::notify(h, &stdin);
                    }
                }
            });
            std::process::exit(0)
        }
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "agentnotify-hook: usage: agentnotify-hook <claude|codex> ask-permission [--timeout S] | claude pre-tool-use [--timeout S] | <claude|codex> notify | hermes ask-approval [--timeout S] | pi gate [--timeout S]"
            );
            std::process::exit(0)
        }
    };
    let decision = std::panic::catch_unwind(|| {
        let stdin = read_stdin()?;
        run::ask(
            host,
            event,
            Duration::from_secs(parsed.timeout.clamp(1, 3600)),
            &stdin,
        )
    })
    .ok()
    .flatten();
    if let Some(d) = decision {
        let line = d.render_for(host, event);
        signals::hold_while_printing();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
    std::process::exit(0)
}

/// At most 1 MiB of stdin; anything larger is not a host payload.
fn read_stdin() -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(payload::MAX_PAYLOAD as u64 + 1)
        .read_to_end(&mut buf)
        .ok()?;
    (buf.len() <= payload::MAX_PAYLOAD).then_some(buf)
}
