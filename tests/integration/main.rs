//! Integration tests: the real binaries, a temp AGENTNOTIFY_HOME, ephemeral ports.

mod api;
mod broker;
mod cli;
mod durability;
#[cfg(unix)]
mod harness;
mod hook;
mod relay;
mod support;
