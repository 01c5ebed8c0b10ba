//! The phone app (`crates/relay-server/app/`) in a real headless Chromium with mobile
//! emulation, over the DevTools protocol.

mod chromium;
mod crafted;
mod flow;
mod parity;
mod push;
mod resilience;
mod timing;
mod vectors;
mod welcome;
mod world;
