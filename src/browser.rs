//! Opens the web UI's one-time link without putting it on a command line: every local user
//! can read `/proc/*/cmdline`, and whoever redeems the link first gets the session. The
//! opener is handed a private file that forwards to the link instead.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::paths::Paths;

/// The forwarding page's file name, in the (0700) state folder.
const PAGE: &str = "ui-link.html";

/// Writes the forwarding page (0600) and hands its path to the desktop's opener; false when
/// either fails (a headless machine: the caller prints the link instead).
pub fn open(paths: &Paths, url: &str) -> bool {
    match write_page(paths, url) {
        Ok(page) => spawn_opener(&page),
        Err(e) => {
            tracing::warn!(error = %e, "cannot write the web UI's forwarding page");
            false
        }
    }
}

/// The page replaces itself with the link (no history entry, nothing loaded from elsewhere).
fn write_page(paths: &Paths, url: &str) -> std::io::Result<PathBuf> {
    paths
        .ensure_dirs()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let url = escape(url);
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"referrer\" content=\"no-referrer\">\
<meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>agentnotify</title></head>\
<body><p><a href=\"{url}\">Open the agentnotify web UI</a></p></body></html>\n"
    );
    let page = paths.state_dir.join(PAGE);
    crate::fsutil::write_atomic(&page, html.as_bytes(), 0o600)?;
    Ok(page)
}

fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '"' => "&quot;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn spawn_opener(page: &Path) -> bool {
    let mut cmd = if cfg!(target_os = "macos") {
        Command::new("open")
    } else if cfg!(windows) {
        let mut c = Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        Command::new("xdg-open")
    };
    cmd.arg(page)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Not waited for: some openers stay in the foreground as long as the browser runs.
    cmd.spawn().is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_link_is_escaped_for_an_attribute() {
        assert_eq!(super::escape("a\"b<c>&'"), "a&quot;b&lt;c&gt;&amp;&#39;");
    }
}
