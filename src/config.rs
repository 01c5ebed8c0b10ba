//! `config.toml` in the config dir: optional settings with defaults.

use std::path::Path;

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}")]
    Parse { path: String, message: String },
}

/// Settings a person may put in `config.toml`; every field is optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Port of the broker (0 = ephemeral). Default 47821.
    pub port: Option<u16>,
    /// Days terminal interactions and closed notifications are kept. Default 30.
    pub history_retention_days: Option<u32>,
    /// Seconds an on-demand broker stays up with nothing to do. Default 900.
    pub idle_exit_seconds: Option<u64>,
    #[serde(default)]
    pub rate_limit: RateLimitConfig,
    /// `[relay]`: providers and routes (SPEC §8), kept in this file so it stays the single
    /// config. Opaque here: the relay link reads and validates it (`relay::config`).
    #[serde(default)]
    pub relay: toml::Table,
    /// `[channels]`: where questions and notifications are delivered (SPEC §11). Opaque
    /// here: the channels layer reads and validates it (`channels::config`).
    #[serde(default)]
    pub channels: toml::Table,
}

/// The shared POST rate limit (SPEC §4.1).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    pub per_second: Option<u32>,
    pub burst: Option<u32>,
}

pub const DEFAULT_PORT: u16 = 47821;
pub const DEFAULT_RETENTION_DAYS: u32 = 30;
pub const DEFAULT_IDLE_EXIT_SECONDS: u64 = 900;
pub const DEFAULT_RATE_PER_SECOND: u32 = 30;
pub const DEFAULT_RATE_BURST: u32 = 60;

impl Config {
    /// Reads the file; a missing file means all defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.display().to_string(),
            message: e.message().to_string(),
        })
    }

    pub fn retention_days(&self) -> u32 {
        self.history_retention_days
            .unwrap_or(DEFAULT_RETENTION_DAYS)
    }
    pub fn idle_exit_seconds(&self) -> u64 {
        self.idle_exit_seconds.unwrap_or(DEFAULT_IDLE_EXIT_SECONDS)
    }
    pub fn rate_per_second(&self) -> u32 {
        self.rate_limit
            .per_second
            .unwrap_or(DEFAULT_RATE_PER_SECOND)
    }
    pub fn rate_burst(&self) -> u32 {
        self.rate_limit.burst.unwrap_or(DEFAULT_RATE_BURST)
    }
}
