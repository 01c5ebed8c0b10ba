//! Integration tests: the real binaries, a temp AGENTNOTIFY_HOME, ephemeral ports.

mod answer;
mod api;
mod app_files;
mod arc;
mod architecture;
mod bodies;
mod broker;
mod channels;
mod cli;
#[cfg(unix)]
mod desktop;
mod durability;
mod guide;
#[cfg(unix)]
mod harness;
#[cfg(unix)]
mod hermes_setup;
mod hook;
mod hook_fuzz;
mod lifecycle;
mod openapi;
mod openclaw;
mod phone;
#[cfg(unix)]
mod pi;
mod postgres;
mod private;
/// Finds or installs the outside programs some tests drive.
#[allow(dead_code)]
#[path = "../support/provision.rs"]
mod provision;
mod receivers;
mod relay;
mod relay_cluster;
mod relay_http;
mod relay_stores;
mod reliability;
mod squatter;
mod support;
mod ui;
mod what_runs;
