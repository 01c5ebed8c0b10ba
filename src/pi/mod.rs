//! Pi (SPEC §10.2): `agentnotify pi -- pi --mode rpc …` (`rpc.rs`) runs Pi in RPC mode,
//! passes the person's JSONL through both ways, and answers every dialog
//! (`extension_ui_request`) through the broker as well (`map.rs` is the pure mapping;
//! `ask.rs` opens one question, waits for its end, withdraws it).
//!
//! The other way, `agentnotify-hook pi gate`, is what our Pi extension (`harness/pi/`)
//! spawns per gated tool call; it is a hook like the others (`crate::hook::pi`).

mod ask;
pub mod map;
pub mod rpc;

/// Set in Pi's environment by the RPC wrapper: the extension then leaves the asking to the
/// dialog the wrapper routes through the broker, so one call never opens two questions.
pub const RPC_ENV: &str = "AGENTNOTIFY_PI_RPC";
