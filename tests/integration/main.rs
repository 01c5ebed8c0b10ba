#[cfg(unix)]
mod harness;
