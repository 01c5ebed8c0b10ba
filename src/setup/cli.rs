//! Command-line surface of the setup commands: clap definitions, running them, and
//! printing results. Exit codes follow [`crate::exit`]: 0 done (or all well), 1
//! refused/failed (or a doctor problem), 2 usage error.
//!
//! Every host is a value of one host argument ([`Harness`]); each command dispatches on it.
//! Options that only some hosts take are checked against the host after parsing
//! ([`applies_to`]), so a misplaced one is a usage error naming both.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};

use super::command::{HookCommand, DEFAULT_BUDGET_SECS, HOOK_EXE_NAME};
use super::doctor;
use super::error::SetupError;
use super::host::Harness::{self, Claude, Codex, Hermes, Openclaw, Pi};
use super::host::{Env, Host, Scope};
use super::install::{self, InstallRequest, Planned};
use super::openclaw::InstallOptions;
use super::uninstall;
use crate::adapters::openclaw::DEFAULT_URL;
use crate::exit::{self, Exit};
use crate::fsutil::is_executable_file;

/// Set up agentnotify for Claude Code, Codex, Pi, Hermes Agent and OpenClaw.
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
    /// Set up a host so its permission prompts can be answered through agentnotify (run
    /// again to update it)
    #[command(after_help = format!("{INSTALL_AFTER_HELP}\n\n{}", exit_codes()))]
    InstallHarness(InstallArgs),
    /// Remove exactly what install-harness added, restoring the original file when
    /// nothing else changed since
    #[command(after_help = exit_codes())]
    UninstallHarness(UninstallArgs),
    /// Check that permission requests can reach you: hooks, extensions, plugins, units,
    /// command paths, Codex trust, broker, token file. Exits 0 when all is well, 1 otherwise
    #[command(after_help = exit_codes())]
    Doctor(DoctorArgs),
}

/// The exit-code line of every setup command's help.
fn exit_codes() -> String {
    format!("Exit codes: {}.", exit::TABLE)
}

const INSTALL_AFTER_HELP: &str = "\
Files:
  claude    ~/.claude/settings.json ($CLAUDE_CONFIG_DIR respected), or .claude/settings.json
            at the repository root with --scope project
  codex     ~/.codex/hooks.json ($CODEX_HOME respected), or .codex/hooks.json at the
            repository root with --scope project; trust goes to $CODEX_HOME/config.toml
  pi        ~/.pi/agent/extensions/agentnotify.ts ($PI_CODING_AGENT_DIR respected); Pi loads
            it at start (in a running Pi, type /reload)
  hermes    the approval transport plugin in $HERMES_HOME/plugins/agentnotify/ (~/.hermes);
            prints the two config.yaml settings that enable it (config.yaml is not edited)
  openclaw  ~/.config/systemd/user/agentnotify-openclaw.service ($XDG_CONFIG_HOME
            respected), a user service running `agentnotify openclaw watch`; prints the
            `systemctl --user` step instead of running it

Options by host: claude and codex take --ask, --notify, --scope, --timeout, --command-path,
--force (codex also --trust); pi --ask, --command-path, --force; hermes --ask,
--command-path; openclaw --url, --agentnotify, --force. Every host takes --dry-run; any
other option is refused.

Your other settings and hooks are kept as they are. The first change to a Claude or Codex
file saves the previous content as <file>.bak. Codex runs a new hook only after you trust
it (/hooks in Codex, or --trust).";

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Host to set up
    #[arg(value_enum)]
    pub host: Harness,
    /// Install what asks you, wherever you are, before the agent runs a tool (the default
    /// unless only --notify is given; Pi and Hermes always ask)
    #[arg(long)]
    pub ask: bool,
    /// Also install notify-only hooks: "Claude finished in shop" when the agent stops
    /// (Claude: Stop, SubagentStop, Notification, SessionEnd; Codex: Stop). They print nothing.
    #[arg(long, help_heading = "Claude Code and Codex")]
    pub notify: bool,
    /// Which config file to edit [default: user]
    #[arg(long, value_enum, help_heading = "Claude Code and Codex")]
    pub scope: Option<Scope>,
    /// Seconds the hook waits for your answer before handing back to the host's own
    /// prompt; the host timeout written is 10 seconds longer [default: 590]
    #[arg(long, value_name = "SECONDS", help_heading = "Claude Code and Codex",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: Option<u64>,
    /// Codex only: also record in config.toml that you trust this hook, as Codex's
    /// /hooks screen would (without trust Codex skips the hook)
    #[arg(long, help_heading = "Claude Code and Codex")]
    pub trust: bool,
    /// agentnotify-hook executable the hook, extension (Pi) or plugin (Hermes) runs
    /// [default: this program's absolute path]
    #[arg(long, value_name = "PATH")]
    pub command_path: Option<PathBuf>,
    /// OpenClaw: the Gateway's WebSocket URL [default: ws://127.0.0.1:18789]
    #[arg(long, value_name = "URL", help_heading = "OpenClaw")]
    pub url: Option<String>,
    /// OpenClaw: the agentnotify executable the unit runs [default: the one beside this
    /// program]
    #[arg(long, value_name = "PATH", help_heading = "OpenClaw")]
    pub agentnotify: Option<PathBuf>,
    /// Replace what is in the way instead of refusing: a file that is not valid JSON, or
    /// values of the wrong type (Claude, Codex), an agentnotify.ts that is not ours (Pi),
    /// each kept in a .bak file; a unit file that is not ours (OpenClaw)
    #[arg(long)]
    pub force: bool,
    /// Print the changes and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct UninstallArgs {
    /// Host to remove agentnotify from
    #[arg(value_enum)]
    pub host: Harness,
    /// Claude and Codex: which config file to edit [default: user]
    #[arg(long, value_enum)]
    pub scope: Option<Scope>,
    /// Pi: remove an agentnotify.ts that is not ours too
    #[arg(long)]
    pub force: bool,
    /// Print the changes and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Hosts that must be set up, the only ones checked [default: report every host, fail
    /// only if none is set up]
    #[arg(value_enum)]
    pub hosts: Vec<Harness>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
}

/// Parses `args` (program name first) and runs the command; returns the exit code.
pub fn main(args: &[std::ffi::OsString]) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return exit::clap_error(&e),
    };
    if let Err(e) = options_apply(&cli.command) {
        return exit::clap_error(&e);
    }
    let env = Env::from_process();
    match run(&env, cli.command) {
        Ok(done) => done.code(),
        Err(e) => exit::fail("agentnotify-hook", &e),
    }
}

/// The options only some hosts take: name, whether it was given, the hosts taking it.
type HostOption = (&'static str, bool, &'static [Harness]);

/// A usage error for the first option given that `host` does not take.
fn options_apply(command: &Command) -> Result<(), clap::Error> {
    let (name, host, options): (_, _, Vec<HostOption>) = match command {
        Command::InstallHarness(a) => (
            "install-harness",
            a.host,
            vec![
                ("--ask", a.ask, &[Claude, Codex, Pi, Hermes]),
                ("--notify", a.notify, &[Claude, Codex]),
                ("--scope", a.scope.is_some(), &[Claude, Codex]),
                ("--timeout", a.timeout.is_some(), &[Claude, Codex]),
                ("--trust", a.trust, &[Codex]),
                (
                    "--command-path",
                    a.command_path.is_some(),
                    &[Claude, Codex, Pi, Hermes],
                ),
                ("--url", a.url.is_some(), &[Openclaw]),
                ("--agentnotify", a.agentnotify.is_some(), &[Openclaw]),
                ("--force", a.force, &[Claude, Codex, Pi, Openclaw]),
            ],
        ),
        Command::UninstallHarness(a) => (
            "uninstall-harness",
            a.host,
            vec![
                ("--scope", a.scope.is_some(), &[Claude, Codex]),
                ("--force", a.force, &[Pi]),
            ],
        ),
        Command::Doctor(_) => return Ok(()),
    };
    match options
        .iter()
        .find(|(_, given, hosts)| *given && !hosts.contains(&host))
    {
        None => Ok(()),
        Some((option, _, hosts)) => {
            let mut cli = Cli::command();
            // Built, so the usage line names the program as clap's own errors do.
            cli.build();
            let sub = cli
                .find_subcommand_mut(name)
                .expect("the subcommand exists");
            Err(sub.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "{option} applies to {} only, not {}",
                    applies_to(hosts),
                    host.as_str()
                ),
            ))
        }
    }
}

/// "codex", "claude and codex", "claude, codex, pi and hermes".
fn applies_to(hosts: &[Harness]) -> String {
    let names: Vec<&str> = hosts.iter().map(|h| h.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn run(env: &Env, command: Command) -> Result<Exit, SetupError> {
    match command {
        Command::InstallHarness(args) => {
            match args.host {
                Claude => install_hooks(env, Host::Claude, args)?,
                Codex => install_hooks(env, Host::Codex, args)?,
                Pi => super::pi::install(env, args.command_path, args.force, args.dry_run)?,
                Hermes => super::hermes::install(args.command_path, args.dry_run)?,
                Openclaw => super::openclaw::install(
                    env,
                    InstallOptions {
                        url: args.url.unwrap_or_else(|| DEFAULT_URL.to_string()),
                        agentnotify: args.agentnotify,
                        force: args.force,
                        dry_run: args.dry_run,
                    },
                )?,
            }
            Ok(Exit::Ok)
        }
        Command::UninstallHarness(args) => {
            let scope = args.scope.unwrap_or(Scope::User);
            match args.host {
                Claude => uninstall_hooks(env, Host::Claude, scope, args.dry_run)?,
                Codex => uninstall_hooks(env, Host::Codex, scope, args.dry_run)?,
                Pi => super::pi::uninstall(env, args.force, args.dry_run)?,
                Hermes => super::hermes::uninstall(args.dry_run)?,
                Openclaw => super::openclaw::uninstall(env, args.dry_run)?,
            }
            Ok(Exit::Ok)
        }
        Command::Doctor(args) => {
            let report = doctor::run(env, &args.hosts);
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

/// `install-harness claude|codex`: the ask and notify hooks in the host's JSON file.
fn install_hooks(env: &Env, host: Host, args: InstallArgs) -> Result<(), SetupError> {
    let exe = command_path(args.command_path)?;
    let request = InstallRequest {
        // --notify alone installs only the notify hooks; otherwise the question hook.
        ask: args.ask || !args.notify,
        notify: args.notify,
        scope: args.scope.unwrap_or(Scope::User),
        command: HookCommand {
            host,
            exe,
            budget_secs: args.timeout.unwrap_or(DEFAULT_BUDGET_SECS),
        },
        trust: args.trust,
        force: args.force,
    };
    let planned = install::plan(env, host, &request, args.dry_run)?;
    let changed = !planned.is_noop();
    finish(planned, args.dry_run)?;
    if changed && !args.dry_run {
        println!("Check the whole setup with: agentnotify-hook doctor");
    }
    Ok(())
}

/// `uninstall-harness claude|codex`: our hooks (and Codex trust entries) out of the file.
fn uninstall_hooks(env: &Env, host: Host, scope: Scope, dry_run: bool) -> Result<(), SetupError> {
    finish(uninstall::plan(env, host, scope, dry_run)?, dry_run)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_the_help_states_are_the_ones_used() {
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("install-harness")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            help.contains(&format!("[default: {DEFAULT_BUDGET_SECS}]")),
            "{help}"
        );
        assert!(
            help.contains(&format!("[default: {DEFAULT_URL}]")),
            "{help}"
        );
    }

    #[test]
    fn hosts_an_option_applies_to_read_as_a_list() {
        assert_eq!(applies_to(&[Codex]), "codex");
        assert_eq!(applies_to(&[Claude, Codex]), "claude and codex");
        assert_eq!(
            applies_to(&[Claude, Codex, Pi, Hermes]),
            "claude, codex, pi and hermes"
        );
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
