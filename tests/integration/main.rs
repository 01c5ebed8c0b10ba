//! Integration tests: the real binaries, a temp AGENTNOTIFY_HOME, ephemeral ports.

mod answer;
mod api;
mod bodies;
mod broker;
mod cli;
mod durability;
#[cfg(unix)]
mod harness;
mod hook;
mod hook_fuzz;
mod lifecycle;
mod openapi;
mod relay;
mod reliability;
mod support;
mod ui;
mod what_runs;
