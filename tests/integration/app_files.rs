//! The phone app's files (`crates/relay-server/app/`), checked as files: the vendored cipher
//! is byte for byte what its README records, nothing is loaded from another origin, no
//! inline script or style (the CSP forbids them anyway), and the app's own code never logs.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn app() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/relay-server/app")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn ext(p: &Path) -> &str {
    p.extension().and_then(|e| e.to_str()).unwrap_or("")
}

#[test]
fn the_vendored_cipher_matches_the_checksums_its_readme_records() {
    let dir = app().join("vendor/noble-ciphers");
    let readme = read(&dir.join("README.md"));
    assert!(
        readme.contains("@noble/ciphers` 2.4.0"),
        "the pinned version is recorded"
    );
    let mut checked = 0;
    for f in files(&dir) {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        if name == "README.md" {
            continue;
        }
        let sum: String = Sha256::digest(std::fs::read(&f).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let row = format!("| `{name}` | `{sum}` |");
        assert!(
            readme.contains(&row),
            "{name} is not the recorded file (sha256 {sum}); update the README only with a \
             file taken from the pinned npm tarball"
        );
        checked += 1;
    }
    assert_eq!(checked, 5, "four ES modules and the LICENSE, nothing else");
    assert!(read(&dir.join("LICENSE")).contains("MIT License"));
}

/// Every module specifier in the app's JavaScript, and every `src`/`href` in its page, is a
/// relative path of this origin.
#[test]
fn nothing_is_loaded_from_another_origin() {
    for f in files(&app()) {
        let text = match ext(&f) {
            "js" | "html" | "css" | "webmanifest" => read(&f),
            _ => continue,
        };
        let name = f.strip_prefix(app()).unwrap().display().to_string();
        if ext(&f) == "js" {
            for spec in module_specifiers(&text) {
                assert!(
                    spec.starts_with("./") || spec.starts_with("../"),
                    "{name} imports {spec:?}: only relative module paths are allowed"
                );
            }
            if !name.starts_with("vendor/") {
                for banned in [
                    "importScripts(",
                    "eval(",
                    "new Function",
                    "innerHTML",
                    "console.",
                ] {
                    assert!(!text.contains(banned), "{name} uses {banned}");
                }
            }
        }
        for attr in ["src=\"", "href=\"", "\"src\": \"", "url("] {
            for (i, _) in text.match_indices(attr) {
                let value: String = text[i + attr.len()..]
                    .chars()
                    .take_while(|c| !matches!(c, '"' | ')'))
                    .collect();
                assert!(
                    !value.contains("//") && !value.contains(':') || value.starts_with("data:"),
                    "{name} loads {value:?} from another origin"
                );
            }
        }
    }
}

/// The `from '…'` and `import('…')` specifiers of a module.
fn module_specifiers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("//") || line.starts_with('*') || line.starts_with("/*") {
            continue;
        }
        for key in [" from ", "import("] {
            if let Some(i) = line.find(key) {
                let rest = line[i + key.len()..].trim_start();
                if let Some(q) = rest.chars().next().filter(|c| matches!(c, '"' | '\'')) {
                    out.push(rest[1..].chars().take_while(|c| *c != q).collect());
                }
            }
        }
    }
    out
}

#[test]
fn the_page_has_a_strict_policy_and_no_inline_code() {
    let html = read(&app().join("index.html"));
    assert!(html.contains("http-equiv=\"Content-Security-Policy\""));
    for rule in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
    ] {
        assert!(html.contains(rule), "the page's CSP has {rule}");
    }
    assert!(!html.contains("unsafe-inline") && !html.contains("unsafe-eval"));
    assert!(!html.contains("<style"), "no inline style element");
    assert!(!html.contains(" style=\""), "no inline style attribute");
    for (i, _) in html.match_indices("<script") {
        let tag: String = html[i..].chars().take_while(|c| *c != '>').collect();
        assert!(tag.contains(" src=\""), "every script is a file: {tag}");
    }
    for handler in ["onclick=", "onload=", "onerror=", "onsubmit=", "oninput="] {
        assert!(!html.contains(handler), "no inline handler {handler}");
    }
}

/// The service worker keeps every script, style and page of the app for offline use: its
/// list names each of them (a file added to the app and forgotten there would be missing
/// when the Relay is out of reach).
#[test]
fn the_service_workers_offline_list_names_every_file_the_page_loads() {
    let sw = read(&app().join("sw.js"));
    for f in files(&app()) {
        let rel = f.strip_prefix(app()).unwrap().to_str().unwrap().to_string();
        if rel == "sw.js" || !matches!(ext(&f), "js" | "css" | "html" | "webmanifest") {
            continue;
        }
        assert!(
            sw.contains(&format!("'{rel}'")),
            "sw.js does not keep {rel} for offline use"
        );
    }
}
