//! Integration tests: the real binaries, a temp AGENTNOTIFY_HOME, ephemeral ports.

mod answer;
mod api;
mod app_files;
mod architecture;
mod bodies;
mod broker;
mod channels;
mod cli;
#[cfg(unix)]
mod desktop;
mod durability;
#[cfg(unix)]
mod harness;
mod hook;
mod hook_fuzz;
mod lifecycle;
mod openapi;
mod phone;
mod postgres;
mod private;
mod receivers;
mod relay;
mod relay_cluster;
mod relay_stores;
mod reliability;
mod squatter;
mod support;
mod ui;
mod what_runs;
