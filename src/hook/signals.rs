//! The host's SIGTERM, SIGINT and SIGHUP end the hook silently with status 0 in every phase
//! (SPEC §6). While the flow runs, tokio's handlers take them and the flow withdraws what it
//! opened; before it starts (reading stdin) and after it ended there is nothing to withdraw,
//! and a handler installed first exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

/// True while tokio's handlers are in place and the flow withdraws on a signal.
static FLOW_HANDLES: AtomicBool = AtomicBool::new(false);

/// Installs the exit-at-once handler. Tokio's handlers, added later, chain to it, so it
/// must stand aside (see [`flow_handles`]) while the flow runs.
pub fn exit_quietly_on_host_signals() {
    #[cfg(unix)]
    // SAFETY: the handler only reads an atomic and calls `_exit`, both async-signal-safe.
    unsafe {
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The flow's own signal handling is up.
pub fn flow_handles() {
    FLOW_HANDLES.store(true, Ordering::SeqCst);
}

/// The flow is over: a signal from here on exits at once.
pub fn flow_stops_handling() {
    FLOW_HANDLES.store(false, Ordering::SeqCst);
}

/// Holds the signals back while the decision is written, so a line is never cut short;
/// the process exits right after, so held signals are never delivered.
pub fn hold_while_printing() {
    #[cfg(unix)]
    // SAFETY: plain signal-mask calls on a local, initialised set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(unix)]
extern "C" fn on_signal(_: libc::c_int) {
    if !FLOW_HANDLES.load(Ordering::SeqCst) {
        // SAFETY: `_exit` is async-signal-safe; nothing was printed, nothing is open.
        unsafe { libc::_exit(0) }
    }
}
