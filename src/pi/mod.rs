//! Pi (SPEC §10.2): the two ways a person answers Pi from anywhere.
//!
//! - `agentnotify-hook pi gate` (`gate.rs`): what our Pi extension (`harness/pi/`) spawns
//!   for each gated tool call. It reads the call on stdin, asks one permission question
//!   through the same start-or-attach, proof-checked client the hook uses, and prints
//!   `{"decision":"allow"|"deny"}` — or nothing, and then Pi's own dialog decides.
//! - `agentnotify pi -- pi --mode rpc …` (`rpc.rs`): runs Pi in RPC mode, passes the
//!   person's JSONL through both ways, and answers every dialog (`extension_ui_request`)
//!   through the broker as well (`map.rs` is the pure mapping).
//!
//! Both share `ask.rs`: open one question, wait for its end, withdraw it.

mod ask;
pub mod gate;
pub mod map;
pub mod rpc;

/// Set in Pi's environment by the RPC wrapper: the extension then leaves the asking to the
/// dialog the wrapper routes through the broker, so one call never opens two questions.
pub const RPC_ENV: &str = "AGENTNOTIFY_PI_RPC";
