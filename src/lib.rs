//! agentnotify: answer an AI coding agent's permission requests and questions from anywhere.
//!
//! See `docs/ARCHITECTURE.md` for the layers and the invariants each one keeps.

/// The data model (its own crate, `agentnotify-model`: pure, no I/O).
pub use agentnotify_model as model;

pub mod adapters;
pub mod api;
pub mod broker;
pub mod browser;
pub mod channels;
pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
pub mod device;
pub mod endpoint;
pub mod exit;
pub mod fsutil;
pub mod hook;
pub mod logging;
pub mod paths;
pub mod pi;
pub mod relay;
pub mod secret;
pub mod setup;
pub mod store;

/// This build's version, reported by `/health` and `broker.json`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The API generation; clients use a broker only when it matches.
pub const API_VERSION: &str = "v1";
