//! The web UI in a real headless Chromium. A test binary of its own, because cargo runs test
//! binaries one after another: the browser's CPU load then never overlaps the timing-sensitive
//! tests of `tests/integration` on a small machine.

mod alerts;
mod guard;
mod integrity;
mod live;
mod origin;
mod phone;
mod webdriver;

/// Finds or installs Chromium and chromedriver.
#[allow(dead_code)]
#[path = "../support/provision.rs"]
mod provision;

/// The same real-daemon helper the HTTP-level web UI tests use.
#[allow(dead_code)]
#[path = "../integration/ui/daemon.rs"]
mod daemon;

/// The temp home and daemon plumbing `daemon` builds on.
#[path = "../integration/support.rs"]
mod support;
