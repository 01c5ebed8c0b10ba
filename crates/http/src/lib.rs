//! HTTP plumbing shared by every agentnotify server (the broker's API and web UI, the
//! reference Relay): error bodies, JSON replies, body reading, query parsing, token buckets,
//! the accept loop and signal waiting. A leaf: it knows no broker, no store, no model.

pub mod rate_limit;
mod reply;
mod serve;

pub use reply::*;
pub use serve::{accept_loop, serve_connection, wait_for_signal, ConnectionOptions, Listener};
