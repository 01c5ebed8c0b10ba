//! The arguments of `agentnotify-relay` and of `agentnotify relay serve` (one definition, so
//! the two cannot drift).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Args;

use crate::routes::ServeOptions;

/// Default port of the Relay (0 = ephemeral).
pub const DEFAULT_RELAY_PORT: u16 = 47822;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Port to listen on (0 = ephemeral; the URL is printed on the first line).
    #[arg(long, default_value_t = DEFAULT_RELAY_PORT)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Folder for the Relay's own database (`agentnotify relay serve`: default `relay/` in
    /// the data dir).
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Keep the Relay's state in PostgreSQL instead (postgres://user:pass@host/db), so many
    /// `serve` processes can share it behind a load balancer. Add ?sslmode=require for TLS
    /// with the server's certificate verified (SSL_CERT_FILE for a private CA). Also read
    /// from AGENTNOTIFY_RELAY_DATABASE, which keeps a password out of the process list.
    #[arg(
        long,
        value_name = "URL",
        env = "AGENTNOTIFY_RELAY_DATABASE",
        hide_env_values = true
    )]
    pub database: Option<String>,
    /// Serve HTTPS with this certificate chain (PEM, leaf first). Needs --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key for --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Requests per second each client address may make, sustained (beyond: 429).
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit: u32,
    /// A load balancer in front of this Relay (repeatable): for connections from it, the
    /// client address is the last one it appended to X-Forwarded-For, so rate limits stay
    /// per client rather than per load balancer.
    #[arg(long, value_name = "IP")]
    pub trusted_proxy: Vec<IpAddr>,
    /// Requests each client address may make in a burst.
    #[arg(long, value_name = "N", default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_burst: u32,
    /// The contact push services see in VAPID tokens (mailto: or https:).
    #[arg(long, value_name = "URI", default_value = crate::push::DEFAULT_SUBJECT)]
    pub vapid_subject: String,
    /// Accept http:// push endpoints (only for a local mock push service).
    #[arg(long)]
    pub push_allow_http: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Server(#[from] crate::RelayServerError),
    #[error(transparent)]
    Tls(#[from] agentnotify_relay_proto::tls::TlsError),
}

impl ServeArgs {
    /// The options to run with; `data_dir` is where the database goes.
    pub fn options(&self, data_dir: PathBuf) -> Result<ServeOptions, ServeError> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                Some(agentnotify_relay_proto::tls::server_config(cert, key)?)
            }
            _ => None,
        };
        Ok(ServeOptions {
            addr: SocketAddr::new(self.bind, self.port),
            data_dir,
            database: self.database.clone(),
            tls,
            rate_per_second: self.rate_limit,
            rate_burst: self.rate_burst,
            trusted_proxies: self.trusted_proxy.clone(),
            vapid_subject: self.vapid_subject.clone(),
            push_allow_http: self.push_allow_http,
        })
    }

    /// Runs the Relay until a stop signal, printing its URL once it listens.
    pub async fn run(&self, data_dir: PathBuf) -> Result<(), ServeError> {
        crate::run(self.options(data_dir)?, |url| {
            println!("agentnotify relay listening on {url}");
        })
        .await?;
        Ok(())
    }
}
