//! `agentnotify-relay`: the reference Relay on a host of its own. Exit codes: 0 stopped by a
//! signal, 1 could not run, 2 usage.

use clap::Parser;

/// The agentnotify reference Relay: routes sealed questions to paired phones and their
/// sealed answers back (it can read neither). Stops on SIGTERM, SIGINT or SIGHUP.
#[derive(Debug, Parser)]
#[command(
    name = "agentnotify-relay",
    version,
    after_help = "Example:\n  agentnotify-relay --data /var/lib/agentnotify-relay --bind 0.0.0.0 --port 8443 \\\n      --tls-cert chain.pem --tls-key key.pem\n\nExit codes: 0 stopped by a signal, 1 error, 2 usage."
)]
struct Cli {
    #[command(flatten)]
    serve: agentnotify_relay::ServeArgs,
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // With --database the state lives in PostgreSQL and no folder is needed.
    let data = match (cli.serve.data.clone(), &cli.serve.database) {
        (Some(data), _) => data,
        (None, Some(_)) => std::path::PathBuf::new(),
        (None, None) => {
            eprintln!("error: --data DIR (or --database URL) is required: where the Relay keeps its state");
            std::process::exit(2);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENTNOTIFY_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(cli.serve.run(data)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
