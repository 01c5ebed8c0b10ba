//! `broker.json`: how clients find the running broker. Written by the daemon once its API
//! listens (atomically, 0600), read by every client, removed by the daemon that wrote it.

use serde::{Deserialize, Serialize};

use crate::paths::Paths;

/// The content of `broker.json`: how clients find the running broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    pub pid: u32,
    pub port: u16,
    /// The Unix socket clients use (absent where it could not be bound: then TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<std::path::PathBuf>,
    pub url: String,
    pub version: String,
    pub api: String,
    pub started_at: String,
}

impl BrokerInfo {
    /// The broker the file names, if the file exists and parses.
    pub fn read(paths: &Paths) -> Option<BrokerInfo> {
        let bytes = std::fs::read(paths.broker_json()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the file atomically (readers never see half of it), 0600.
    pub fn write(&self, paths: &Paths) -> std::io::Result<()> {
        let mut json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        json.push(b'\n');
        crate::fsutil::write_atomic(&paths.broker_json(), &json, 0o600)
    }

    /// Removes the file (best effort: a stale file is also detected by its readers).
    pub fn remove(paths: &Paths) {
        let _ = std::fs::remove_file(paths.broker_json());
    }
}
