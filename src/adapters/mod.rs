//! Adapters for hosts that ask for approval over a surface of their own rather than a hook
//! the host runs (SPEC §10.2). Each one turns the host's requests into broker interactions
//! through the loopback client and hands back only answers a person gave.

pub mod openclaw;
