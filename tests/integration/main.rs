//! Integration tests: the real binaries, a temp AGENTNOTIFY_HOME, ephemeral ports.

mod api;
mod app_files;
mod architecture;
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
mod phone;
mod relay;
mod reliability;
mod squatter;
mod support;
mod ui;
