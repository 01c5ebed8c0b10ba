//! `agentnotify completions` and `agentnotify man`: shell completions and man pages for both
//! programs, generated from their clap definitions so they cannot drift. The hook's are made
//! here too, which keeps the completion and roff generators out of the hook binary.

use std::path::PathBuf;

use clap::{Args, CommandFactory, ValueEnum};

use super::CliError;

/// Which program's command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Program {
    Agentnotify,
    AgentnotifyHook,
}

impl Program {
    fn command(self) -> clap::Command {
        match self {
            Program::Agentnotify => super::Cli::command(),
            Program::AgentnotifyHook => crate::setup::cli::Cli::command(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Program::Agentnotify => "agentnotify",
            Program::AgentnotifyHook => "agentnotify-hook",
        }
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  agentnotify completions bash > ~/.local/share/bash-completion/completions/agentnotify\n  \
agentnotify completions zsh --program agentnotify-hook > ~/.zfunc/_agentnotify-hook\n  \
agentnotify completions fish > ~/.config/fish/completions/agentnotify.fish"
)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
    /// The program to complete.
    #[arg(long, value_enum, default_value = "agentnotify")]
    pub program: Program,
}

#[derive(Debug, Args)]
#[command(after_help = "Example:\n  agentnotify man --out ~/.local/share/man/man1")]
pub struct ManArgs {
    /// The folder to write the pages into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Prints the completion script to stdout.
pub fn completions(a: CompletionsArgs) {
    let mut cmd = a.program.command();
    clap_complete::generate(a.shell, &mut cmd, a.program.name(), &mut std::io::stdout());
}

/// Writes one page per command and subcommand of both programs into `--out`.
pub fn man(a: ManArgs) -> Result<(), CliError> {
    let fail = |e: std::io::Error| {
        CliError::Other(format!(
            "cannot write man pages into {}: {e}",
            a.out.display()
        ))
    };
    std::fs::create_dir_all(&a.out).map_err(fail)?;
    for program in [Program::Agentnotify, Program::AgentnotifyHook] {
        clap_mangen::generate_to(program.command(), &a.out).map_err(fail)?;
    }
    let mut pages: Vec<String> = std::fs::read_dir(&a.out)
        .map_err(fail)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("agentnotify") && n.ends_with(".1"))
        .collect();
    pages.sort();
    println!(
        "wrote {} man pages into {}: {}",
        pages.len(),
        a.out.display(),
        pages.join(" ")
    );
    Ok(())
}
