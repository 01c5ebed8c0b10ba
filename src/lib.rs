//! agentnotify: answer an AI coding agent's permission requests and questions from anywhere.
//!
//! See `docs/ARCHITECTURE.md` for the layers and the invariants each one keeps.

pub mod fsutil;
pub mod harness;
pub mod paths;
pub mod secret;
