//! Command-line surface of the setup commands: clap definitions, running them, and
//! printing results. Exit codes follow [`crate::exit`]: 0 done (or all well), 1
//! refused/failed (or a doctor problem), 2 usage error.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

use super::command::{HookCommand, DEFAULT_BUDGET_SECS, HOOK_EXE_NAME};
use super::doctor;
use super::error::SetupError;
use super::host::{Env, Host, Scope};
use super::install::{self, InstallRequest, Planned};
use super::uninstall;
use crate::exit::{self, Exit};
use crate::fsutil::is_executable_file;

/// Set up agentnotify's remote-approval hook for Claude Code and Codex.
#[derive(Debug, Parser)]
#[command(
    name = "agentnotify-hook",
    bin_name = "agentnotify-hook",
    version,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add the PermissionRequest hook to a host's config, so its permission
    /// prompts can be answered through agentnotify (run again to update it)
    #[command(after_help = format!("{INSTALL_AFTER_HELP}\n\n{}", exit_codes()))]
    InstallHarness(InstallArgs),
    /// Remove exactly what install-harness added, restoring the original file when
    /// nothing else changed since
    #[command(after_help = exit_codes())]
    UninstallHarness(UninstallArgs),
    /// Check that permission requests can reach you: hooks, command paths, Codex
    /// trust, broker, token file. Exits 0 when all is well, 1 otherwise
    #[command(after_help = exit_codes())]
    Doctor(DoctorArgs),
}

/// The exit-code line of every setup command's help.
fn exit_codes() -> String {
    format!("Exit codes: {}.", exit::TABLE)
}

const INSTALL_AFTER_HELP: &str = "\
Files:
  claude  ~/.claude/settings.json ($CLAUDE_CONFIG_DIR respected), or .claude/settings.json
          at the repository root with --scope project
  codex   ~/.codex/hooks.json ($CODEX_HOME respected), or .codex/hooks.json at the
          repository root with --scope project; trust goes to $CODEX_HOME/config.toml
  openclaw  ~/.config/systemd/user/agentnotify-openclaw.service, a user service running
          `agentnotify openclaw watch` (options: install-harness openclaw --help)
  hermes  install-harness hermes [--command-path P] [--dry-run]: the approval transport
          plugin into $HERMES_HOME/plugins/agentnotify/ (~/.hermes); prints the two
          config.yaml settings that enable it

Your other settings and hooks are kept as they are. The first change to a file saves the
previous content as <file>.bak. Codex runs a new hook only after you trust it (/hooks in
Codex, or --trust).";

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Host to set up
    #[arg(value_enum)]
    pub host: Host,
    /// Install the hook that asks you, wherever you are, before the agent runs a tool
    /// (the default unless only --notify is given)
    #[arg(long)]
    pub ask: bool,
    /// Also install notify-only hooks: "Claude finished in shop" when the agent stops
    /// (Claude: Stop, SubagentStop, Notification, SessionEnd; Codex: Stop). They print nothing.
    #[arg(long)]
    pub notify: bool,
    /// Which config file to edit
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// Seconds the hook waits for your answer before handing back to the host's own
    /// prompt; the host timeout written is 10 seconds longer
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BUDGET_SECS,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// agentnotify-hook executable the hook runs [default: this program's absolute path]
    #[arg(long, value_name = "PATH")]
    pub command_path: Option<PathBuf>,
    /// Codex only: also record in config.toml that you trust this hook, as Codex's
    /// /hooks screen would (without trust Codex skips the hook)
    #[arg(long)]
    pub trust: bool,
    /// Replace a file that is not valid JSON, or values of the wrong type, instead of
    /// refusing (the old content is kept in a .bak file)
    #[arg(long)]
    pub force: bool,
    /// Print the changes as a diff and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// Host to remove the hook from
    #[arg(value_enum)]
    pub host: Host,
    /// Which config file to edit
    #[arg(long, value_enum, default_value = "user")]
    pub scope: Scope,
    /// Print the changes as a diff and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Hosts that must be set up [default: report every host, fail only if none is]
    #[arg(value_enum)]
    pub hosts: Vec<Host>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// Parses `args` (program name first) and runs the command; returns the exit code.
pub fn main(args: &[std::ffi::OsString]) -> i32 {
    if super::openclaw::is_for_openclaw(args) {
        return super::openclaw::main(args);
    }
    if super::hermes::is_ours(args) {
        return super::hermes::main(args);
    }
    if let Some(code) = super::pi::main(args) {
        return code;
    }
    let mut args = args.to_vec();
    let hermes = super::hermes::take_doctor_host(&mut args);
    // `doctor pi`: the Pi checks are added after the others (`super::pi::doctor`).
    let is_doctor = args.get(1).is_some_and(|a| a == "doctor");
    let pi_named = is_doctor && args.iter().skip(2).any(|a| a == "pi");
    let args: Vec<_> = match pi_named {
        true => args.iter().filter(|a| *a != "pi").cloned().collect(),
        false => args,
    };
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return exit::clap_error(&e),
    };
    let env = Env::from_process();
    match run(&env, cli.command, pi_named, hermes) {
        Ok(done) => done.code(),
        Err(e) => exit::fail("agentnotify-hook", &e),
    }
}

/// `pi_named` / `hermes`: `doctor pi` / `doctor hermes` was asked for (SPEC §10.2).
fn run(env: &Env, command: Command, pi_named: bool, hermes: bool) -> Result<Exit, SetupError> {
    match command {
        Command::InstallHarness(args) => {
            if args.trust && args.host != Host::Codex {
                let e = Cli::command().error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "--trust applies to codex only (Claude Code runs hooks without a trust step)",
                );
                exit::clap_error(&e);
                return Ok(Exit::Usage);
            }
            let exe = command_path(args.command_path)?;
            let request = InstallRequest {
                // --notify alone installs only the notify hooks; otherwise the question hook.
                ask: args.ask || !args.notify,
                notify: args.notify,
                scope: args.scope,
                command: HookCommand {
                    host: args.host,
                    exe,
                    budget_secs: args.timeout,
                },
                trust: args.trust,
                force: args.force,
            };
            let planned = install::plan(env, args.host, &request, args.dry_run)?;
            let changed = !planned.is_noop();
            finish(planned, args.dry_run)?;
            if changed && !args.dry_run {
                println!("Check the whole setup with: agentnotify-hook doctor");
            }
            Ok(Exit::Ok)
        }
        Command::UninstallHarness(args) => {
            let planned = uninstall::plan(env, args.host, args.scope, args.dry_run)?;
            finish(planned, args.dry_run)?;
            Ok(Exit::Ok)
        }
        Command::Doctor(args) => {
            let mut report = doctor::run(env, &args.hosts);
            super::pi::doctor(env, &mut report, pi_named, !args.hosts.is_empty());
            super::hermes::doctor_checks(&mut report, hermes, !args.hosts.is_empty());
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).expect("report serialises")
                );
            } else {
                print!("{}", report.render());
            }
            Ok(if report.ok { Exit::Ok } else { Exit::Error })
        }
    }
}

/// Applies the plan, or for `--dry-run` prints it as diffs; then the summary lines.
pub(super) fn finish(planned: Planned, dry_run: bool) -> Result<(), SetupError> {
    if dry_run {
        if planned.is_noop() {
            println!("Dry run: nothing would change.");
        } else {
            println!("Dry run: nothing was written. These changes would be made:");
            for change in planned.changes.iter().filter(|c| !c.is_noop()) {
                print!("{}", change.diff());
            }
        }
    } else {
        for change in &planned.changes {
            change.apply()?;
        }
    }
    for line in &planned.lines {
        println!("{line}");
    }
    Ok(())
}

/// The executable to write into the hook: `--command-path` or this program, absolute,
/// named `agentnotify-hook` (the name is how later runs recognise their own entry).
pub(super) fn command_path(given: Option<PathBuf>) -> Result<String, SetupError> {
    let path = match given {
        Some(path) => path,
        None => install::default_command_path()?,
    };
    let bad = |reason: &str| SetupError::BadCommandPath {
        path: path.clone(),
        reason: reason.to_string(),
    };
    if !path.is_absolute() {
        return Err(bad(
            "must be an absolute path (hosts run hooks without your PATH)",
        ));
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name != HOOK_EXE_NAME && name != format!("{HOOK_EXE_NAME}.exe") {
        return Err(bad(
            "must name the agentnotify-hook executable (install and uninstall find their own entry by that name)",
        ));
    }
    let text = path
        .to_str()
        .ok_or_else(|| bad("must be valid UTF-8 (it is written into a JSON file)"))?
        .to_string();
    if !is_executable_file(&path) {
        eprintln!(
            "agentnotify-hook: warning: {text} is missing or not executable yet; `doctor` will report it"
        );
    }
    Ok(text)
}
