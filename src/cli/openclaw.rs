//! `agentnotify openclaw …`: the OpenClaw adapter's command line.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliError;
use crate::adapters::openclaw;
use crate::paths::Paths;
use crate::secret::Secret;

#[derive(Debug, Subcommand)]
pub enum OpenclawCommand {
    /// Stay connected to the OpenClaw Gateway as an operator and ask you about each exec
    /// approval; OpenClaw gets only the decision you chose.
    #[command(
        long_about = "Stay connected to the OpenClaw Gateway as an operator and ask you \
about each exec approval, offering only the decisions OpenClaw allows for it (Allow once, \
Always allow, Deny). Your answer is sent back with exec.approval.resolve; an approval \
resolved elsewhere is withdrawn here. Without an answer nothing is sent, and OpenClaw's own \
prompt, timeout or denial decides.\n\nThe Gateway token comes from $OPENCLAW_GATEWAY_TOKEN or \
--token-file. Run it as a service: `agentnotify-hook install-harness openclaw`."
    )]
    Watch(WatchArgs),
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The Gateway's WebSocket URL (ws:// on this machine)
    #[arg(long, env = "OPENCLAW_GATEWAY_URL", default_value = openclaw::DEFAULT_URL)]
    pub url: String,
    /// A file holding the Gateway token [default: $OPENCLAW_GATEWAY_TOKEN]
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
}

pub async fn run(command: OpenclawCommand) -> Result<(), CliError> {
    match command {
        OpenclawCommand::Watch(a) => watch(a).await,
    }
}

async fn watch(a: WatchArgs) -> Result<(), CliError> {
    if !a.url.starts_with("ws://") {
        return Err(CliError::Usage(format!(
            "--url must be a ws:// URL of the Gateway on this machine, not {:?}",
            a.url
        )));
    }
    let token = match &a.token_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("--token-file {}: {e}", path.display())))?,
        None => std::env::var("OPENCLAW_GATEWAY_TOKEN").unwrap_or_default(),
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(CliError::Usage(
            "no Gateway token: set OPENCLAW_GATEWAY_TOKEN or pass --token-file".into(),
        ));
    }
    let paths = Paths::from_env()?;
    let _log = crate::logging::init(&paths, "openclaw", "info");
    openclaw::run(openclaw::Options {
        url: a.url,
        token: Secret::new(token),
        paths,
    })
    .await
    .map_err(|e| CliError::Other(format!("openclaw watch: {e}")))
}
