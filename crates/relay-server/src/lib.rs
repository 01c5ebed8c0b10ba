//! The reference Relay (`agentnotify-relay`, also `agentnotify relay serve`): installations
//! and devices with tokens, an envelope store with expiry, and the answer queue the broker
//! polls (SPEC §8).
//!
//! It is deliberately dumb: it routes opaque sealed boxes and never judges an answer — the
//! broker does (SPEC §3.3). What it can see and do is listed in `docs/RELAY.md`.
//!
//! - `app`: the phone app's files (`app/`), served at `/app/` with a strict CSP; its
//!   `base.css` is the web UI's too ([`BASE_CSS`]).
//! - `store`: the durable state and its records, tokens kept only as hashes.
//! - `index`: an installation's devices and a question's recipients, without full scans.
//! - `kv`: the two stores behind one interface (sled, the default; PostgreSQL).
//! - `pg`: the PostgreSQL store: migrations, transactions, `LISTEN/NOTIFY` across processes.
//! - `routes`: the accept loop (plain or TLS), per-address rate limits, the route table.
//! - `handlers`: one function per route.
//! - `live`: the feed of changes that long-polls and device streams wait on.
//! - `push`: Web Push doorbells (VAPID key, subscriptions, the sender).
//! - `cli`: the `serve` arguments, shared by both ways of starting it.

mod app;
pub mod cli;
mod handlers;
mod index;
mod kv;
mod live;
mod pg;
mod push;
mod routes;
mod store;

pub use app::BASE_CSS;
pub use cli::{ServeArgs, DEFAULT_RELAY_PORT};
pub use routes::{run, ServeOptions};
pub use store::{RelayServer, RelayServerError};

/// This build's version, reported by `/health`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
