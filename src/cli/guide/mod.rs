//! `agentnotify setup`: one guided, re-runnable command from "installed" to "answered a test
//! question where I want to". Each step reuses the command that does it on its own
//! (install-harness's planner, `channels add`, `relay add` / `pair`, `demo`, `doctor`), says
//! which file it writes before writing, and finds what an earlier run already did.
//!
//! Interactive by default (dialoguer); `--yes` takes every decision from the flags instead.

mod hosts;
mod surfaces;

use std::io::IsTerminal;

use clap::{Args, Parser};

use super::CliError;
use crate::paths::Paths;
use crate::setup::command::{HookCommand, DEFAULT_BUDGET_SECS};
use crate::setup::host::{Env, Host, Scope};
use crate::setup::install::{self, InstallRequest};
use hosts::{HostRow, HOSTS, OTHER_HOSTS};

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  agentnotify setup\n  \
agentnotify setup --yes --host claude --desktop --ntfy https://ntfy.sh --include-message\n  \
agentnotify setup --yes --host codex --relay https://relay.example --no-test\n\n\
Run it again any time: what is set up already is kept and shown.")]
pub struct SetupArgs {
    /// Ask nothing: set up the hosts given with --host (default: every host found), the
    /// channels named by the flags below, and send the test question unless --no-test.
    #[arg(long)]
    pub yes: bool,
    /// Set up this host (repeat for more) [default: the hosts found on this machine].
    #[arg(long = "host", value_enum, value_name = "HOST")]
    pub hosts: Vec<Host>,
    /// Show questions as desktop notifications with answer buttons (needs a session D-Bus).
    #[arg(long)]
    pub desktop: bool,
    /// Send questions to the ntfy app through this server (e.g. https://ntfy.sh), on a new
    /// unguessable topic.
    #[arg(long, value_name = "URL")]
    pub ntfy: Option<String>,
    /// Answer from the phone app through this Relay: adds it and pairs a phone.
    #[arg(long, value_name = "URL")]
    pub relay: Option<String>,
    /// With --yes: consent to send the question's text through the ntfy server (which can
    /// read it). Without it ntfy only says that a question waits.
    #[arg(long)]
    pub include_message: bool,
    /// Do not send the test question.
    #[arg(long)]
    pub no_test: bool,
    /// Seconds the test question waits for your answer.
    #[arg(long, value_name = "S", default_value_t = 300)]
    pub test_timeout: u64,
}

/// Asks the person, or with `--yes` takes the scripted answer.
pub(super) struct Ask {
    pub(super) yes: bool,
}

impl Ask {
    /// `scripted` is the answer under `--yes`.
    fn confirm(&self, prompt: &str, default: bool, scripted: bool) -> Result<bool, CliError> {
        if self.yes {
            return Ok(scripted);
        }
        dialoguer::Confirm::new()
            .with_prompt(prompt)
            .default(default)
            .interact()
            .map_err(stopped)
    }

    /// A line of text; `scripted` under `--yes`.
    fn input(&self, prompt: &str, default: &str, scripted: &str) -> Result<String, CliError> {
        if self.yes {
            return Ok(scripted.to_string());
        }
        dialoguer::Input::<String>::new()
            .with_prompt(prompt)
            .default(default.to_string())
            .allow_empty(true)
            .interact_text()
            .map(|s| s.trim().to_string())
            .map_err(stopped)
    }
}

fn stopped(e: dialoguer::Error) -> CliError {
    CliError::Other(format!("setup stopped: {e}"))
}

pub async fn run(a: SetupArgs) -> Result<(), CliError> {
    if !a.yes && !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(
            "setup asks questions, so it needs a terminal; for scripts pass --yes with \
             --host, --desktop, --ntfy URL, --relay URL"
                .into(),
        ));
    }
    let ask = Ask { yes: a.yes };
    let paths = Paths::from_env()?;
    paths.ensure_dirs()?;
    let env = Env::from_process();

    step("1/4", "hooks for your coding agents");
    let hook = super::demo::hook_executable()?;
    let mut any_host = false;
    for row in chosen_hosts(&env, &a.hosts) {
        any_host |= host(&ask, &env, row, &hook)?;
    }
    if a.hosts.is_empty() {
        for other in OTHER_HOSTS {
            any_host |= other_host(&ask, &env, other, &hook)?;
        }
    }
    if !any_host {
        println!(
            "  No host set up. Set one up later with: agentnotify setup --host claude (or codex)"
        );
    }

    step("2/4", "where questions reach you");
    println!("  Always: this terminal (`agentnotify answer`) and the web page (`agentnotify ui`).");
    surfaces::desktop(&ask, &paths, a.desktop).await?;
    surfaces::ntfy(&ask, &paths, a.ntfy.as_deref(), a.include_message).await?;
    surfaces::relay(&ask, &paths, a.relay.as_deref()).await?;

    step("3/4", "a test question");
    if !a.no_test && {
        println!("  A sample permission request goes through the real hook, as your agent's will.");
        ask.confirm("Send a test question now?", true, true)?
    } {
        println!("  It goes to every place set up above: answer it wherever suits you.");
        super::demo::run(super::args::DemoArgs {
            timeout: a.test_timeout,
        })
        .await?;
    } else {
        println!("  Skipped. Send one any time with: agentnotify demo");
    }

    step("4/4", "the whole setup, checked (agentnotify-hook doctor)");
    // doctor blocks on runtimes of its own, so it runs off this one.
    let summary =
        tokio::task::spawn_blocking(move || crate::setup::doctor::run(&env, &[]).render())
            .await
            .map_err(|e| CliError::Other(format!("doctor failed: {e}")))?;
    print!("{summary}");
    println!("\nRun `agentnotify setup` again to change any of this.");
    Ok(())
}

fn step(n: &str, what: &str) {
    println!("\n== {n} {what}");
}

/// `--host` as given, else every host found on this machine (said why).
fn chosen_hosts(env: &Env, given: &[Host]) -> Vec<&'static HostRow> {
    if !given.is_empty() {
        return given.iter().map(|&h| HostRow::of(h)).collect();
    }
    let mut found = Vec::new();
    for row in HOSTS {
        match row.detect(env) {
            Some(why) => {
                println!("  {}: {why}", row.name);
                found.push(row);
            }
            None => println!("  {}: not found ({} is not on PATH)", row.name, row.program),
        }
    }
    found
}

/// Installs the ask and notify hooks (and Codex trust) into one host's user config, with
/// consent; returns whether the host is set up afterwards.
fn host(ask: &Ask, env: &Env, row: &HostRow, hook: &std::path::Path) -> Result<bool, CliError> {
    let exe = hook
        .to_str()
        .ok_or_else(|| CliError::Other(format!("{} is not valid UTF-8", hook.display())))?;
    let request = InstallRequest {
        ask: true,
        notify: true,
        scope: Scope::User,
        command: HookCommand {
            host: row.host,
            exe: exe.to_string(),
            budget_secs: DEFAULT_BUDGET_SECS,
        },
        trust: row.needs_trust,
        force: false,
    };
    let failed = |e: crate::setup::SetupError| CliError::Other(format!("{}: {e}", row.name));
    let planned = install::plan(env, row.host, &request, false).map_err(failed)?;
    let files: Vec<String> = planned
        .changes
        .iter()
        .filter(|c| !c.is_noop())
        .map(|c| c.before.path.display().to_string())
        .collect();
    if files.is_empty() {
        println!(
            "  {}: already set up (ask and notify hooks{}).",
            row.name,
            trust_note(row)
        );
        return Ok(true);
    }
    println!(
        "  {}: the hooks ask you before tools run and notify you when it stops{}; this writes {}",
        row.name,
        trust_note(row),
        files.join(", ")
    );
    if !ask.confirm(&format!("Install them into {}?", row.name), true, true)? {
        println!("  {}: left as it is.", row.name);
        return Ok(false);
    }
    for change in &planned.changes {
        change.apply().map_err(failed)?;
    }
    for line in &planned.lines {
        println!("  {line}");
    }
    Ok(true)
}

/// Offers a host of its own kind (Pi, Hermes, OpenClaw) when its program is on PATH, and
/// installs its integration through `agentnotify-hook install-harness`, which prints where
/// it writes and what is left to do; returns whether it is set up afterwards.
fn other_host(
    ask: &Ask,
    env: &Env,
    host: &hosts::OtherHost,
    hook: &std::path::Path,
) -> Result<bool, CliError> {
    let Some(found) = env.which(host.program) else {
        println!(
            "  {}: not found ({} is not on PATH)",
            host.name, host.program
        );
        return Ok(false);
    };
    println!("  {}: {} found", host.name, found.display());
    let command = format!("agentnotify-hook install-harness {}", host.harness.as_str());
    println!("  {}: {}; this runs `{command}`", host.name, host.what);
    if !ask.confirm(&format!("Install it for {}?", host.name), true, true)? {
        println!("  {}: left as it is.", host.name);
        return Ok(false);
    }
    let out = std::process::Command::new(hook)
        .args(["install-harness", host.harness.as_str()])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            CliError::Other(format!("{}: cannot run {}: {e}", host.name, hook.display()))
        })?;
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&out.stderr).lines())
    {
        println!("  {line}");
    }
    if !out.status.success() {
        println!("  {}: not set up; run `{command}` to see why.", host.name);
        return Ok(false);
    }
    Ok(true)
}

fn trust_note(row: &HostRow) -> &'static str {
    if row.needs_trust {
        " (trusted in Codex's config.toml)"
    } else {
        ""
    }
}

/// Runs one `agentnotify channels …` or `agentnotify relay …` command line.
pub(super) async fn agentnotify(args: &[&str]) -> Result<(), CliError> {
    let cli =
        super::Cli::try_parse_from(std::iter::once("agentnotify").chain(args.iter().copied()))
            .map_err(|e| CliError::Other(format!("setup built a bad command line: {e}")))?;
    match cli.command {
        super::args::Command::Channels(c) => Ok(super::channels::run(c).await?),
        super::args::Command::Relay(c) => Ok(super::relay::run(c).await?),
        _ => unreachable!("setup runs channels and relay commands only"),
    }
}
