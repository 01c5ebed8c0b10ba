//! The shape of the code, checked: dependencies between the main crate's modules point one
//! way (docs/ARCHITECTURE.md), and the hook binary links no store, no TLS and no allocator
//! swap.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of the main crate and the modules it may use. Anything else is a
/// forbidden edge. (`model` is a crate of its own, below everything; `bin` uses the library
/// by its name, not `crate::`.)
const ALLOWED: &[(&str, &[&str])] = &[
    ("fsutil", &[]),
    ("exit", &[]),
    ("paths", &["fsutil"]),
    ("config", &[]),
    ("secret", &["fsutil"]),
    ("logging", &["paths", "fsutil", "model"]),
    ("endpoint", &["paths", "fsutil"]),
    ("browser", &["paths", "fsutil"]),
    ("store", &["model"]),
    ("broker", &["model", "store"]),
    (
        "relay",
        &[
            "broker", "model", "store", "config", "fsutil", "paths", "secret",
        ],
    ),
    (
        "channels",
        &[
            "broker", "config", "model", "fsutil", "paths", "secret", "relay", "browser",
        ],
    ),
    (
        "api",
        &["broker", "channels", "model", "relay", "secret", "store"],
    ),
    (
        "daemon",
        &[
            "api", "broker", "channels", "relay", "store", "config", "endpoint", "fsutil", "model",
            "paths", "secret", "logging",
        ],
    ),
    (
        "client",
        &["endpoint", "fsutil", "paths", "secret", "model"],
    ),
    (
        "hook",
        &[
            "client", "logging", "model", "paths", "secret", "fsutil", "exit",
        ],
    ),
    ("device", &["fsutil", "model", "secret", "paths"]),
    ("pi", &["client", "logging", "model", "paths", "fsutil"]),
    (
        "setup",
        &[
            "client", "endpoint", "fsutil", "paths", "model", "secret", "hook", "exit", "adapters",
        ],
    ),
    (
        "adapters",
        &["client", "model", "paths", "secret", "fsutil"],
    ),
    (
        "cli",
        &[
            "adapters", "channels", "client", "daemon", "device", "relay", "config", "endpoint",
            "fsutil", "logging", "model", "paths", "secret", "hook", "setup", "exit", "browser",
            "pi",
        ],
    ),
];

/// The modules a source text names through `crate::…` (comments skipped).
fn used_modules(source: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for line in source.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let name = item.trim().split("::").next().unwrap_or("").trim();
                    if !name.is_empty() {
                        used.insert(name.to_string());
                    }
                }
            } else {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
                    .collect();
                if !name.is_empty() {
                    used.insert(name);
                }
            }
            rest = after;
        }
    }
    used
}

/// The forbidden edges among `files` (path under `src/` → source text).
fn forbidden_edges(files: &[(PathBuf, String)]) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut bad = Vec::new();
    for (path, source) in files {
        let top = path
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs");
        if top == "bin" || top == "lib" {
            continue;
        }
        let Some(ok) = allowed.get(top) else {
            bad.push(format!(
                "src/{} belongs to no layer (add `{top}` to ALLOWED)",
                path.display()
            ));
            continue;
        };
        for used in used_modules(source) {
            if used != top && !ok.contains(&used.as_str()) {
                bad.push(format!(
                    "src/{}: `{top}` must not use `crate::{used}`",
                    path.display()
                ));
            }
        }
    }
    bad
}

fn sources(dir: &Path, under: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, under, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.strip_prefix(under).unwrap().to_path_buf(), text));
        }
    }
}

#[test]
fn module_dependencies_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &src, &mut files);
    assert!(files.len() > 20, "the walk found the sources");
    let bad = forbidden_edges(&files);
    assert!(bad.is_empty(), "forbidden edges:\n{}", bad.join("\n"));
}

#[test]
fn the_check_catches_a_forbidden_edge() {
    let files = vec![
        (
            PathBuf::from("client/mod.rs"),
            "use crate::daemon::BrokerInfo;\n// crate::api in a comment is fine\n".to_string(),
        ),
        (
            PathBuf::from("broker/mod.rs"),
            "use crate::{model::Interaction, api::ApiContext};".to_string(),
        ),
        (
            PathBuf::from("store.rs"),
            "use crate::model::Interaction;".to_string(),
        ),
    ];
    assert_eq!(
        forbidden_edges(&files),
        vec![
            "src/client/mod.rs: `client` must not use `crate::daemon`".to_string(),
            "src/broker/mod.rs: `broker` must not use `crate::api`".to_string(),
        ]
    );
}

/// Function symbols of a binary.
fn symbols(path: &str) -> Vec<String> {
    use object::{Object, ObjectSymbol};
    let bytes = std::fs::read(path).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect()
}

/// What the hook must not link: the store (sled), TLS and the Relay client (rustls,
/// reqwest), and the daemon's allocator (jemalloc). Each costs start-up time on every run.
const NOT_IN_THE_HOOK: &[(&str, &str)] = &[
    ("sled", "4sled"),
    ("reqwest", "7reqwest"),
    ("rustls", "6rustls"),
    ("jemalloc", "_rjem_"),
];

#[test]
fn the_hook_links_no_store_tls_or_allocator() {
    let hook = symbols(crate::support::HOOK);
    let daemon = symbols(crate::support::AGENTNOTIFY);
    for (what, marker) in NOT_IN_THE_HOOK {
        // The daemon links each of them: the marker really finds the crate.
        assert!(
            daemon.iter().any(|s| s.contains(marker)),
            "the check for {what} finds nothing even in the daemon"
        );
        let found: Vec<&String> = hook.iter().filter(|s| s.contains(marker)).take(3).collect();
        assert!(found.is_empty(), "the hook links {what}: {found:?}");
    }
}
