//! OpenClaw (SPEC §10.2): the Gateway asks its connected operators to approve `exec` calls,
//! and denies at once when no operator that can see the approval is connected. So the
//! adapter is a long-running operator client, `agentnotify openclaw watch`, run as a
//! service (`harness/openclaw/`).
//!
//! [`approval`] maps an approval to a question and an answer back (pure), [`device`] is the
//! Ed25519 identity the Gateway pairs with, [`gateway`] one WebSocket connection, and
//! [`watch`] the supervisor: reconnects, back-fill, one task per approval, withdrawal.

pub mod approval;
pub mod device;
pub mod gateway;
pub mod watch;

pub use watch::{run, Options};

/// Where the Gateway listens unless told otherwise (`openclaw gateway run`'s default).
pub const DEFAULT_URL: &str = "ws://127.0.0.1:18789";
