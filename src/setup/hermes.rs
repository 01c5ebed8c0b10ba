//! Hermes Agent (SPEC §10.2): `install-harness hermes` puts our approval transport plugin
//! (`harness/hermes/agentnotify/`) into `$HERMES_HOME/plugins/agentnotify/` (`~/.hermes`
//! by default), `uninstall-harness hermes` removes exactly those files, and `doctor` reports
//! them. Hermes loads a plugin only once the person enables it in `config.yaml`; that consent
//! is theirs to give, so setup prints the two lines instead of editing the YAML.
//!
//! Kept apart from the Claude/Codex setup (JSON hook files, their `Host`): the command line
//! calls [`install`], [`uninstall`] and [`doctor`] for [`Harness::Hermes`].

use std::path::{Path, PathBuf};

use super::doctor::{absent, Check, HostReport, Status};
use super::error::SetupError;
use super::files::{remove_dir_if_empty, remove_file, write_file};
use super::host::Harness;

const PLUGIN_YAML: &str = include_str!("../../harness/hermes/agentnotify/plugin.yaml");
const PLUGIN_PY: &str = include_str!("../../harness/hermes/agentnotify/__init__.py");
/// How an installed `__init__.py` is recognised as ours.
const MARK: &str = "agentnotify's approval transport for Hermes Agent";
const PLUGIN_NAME: &str = "agentnotify";

/// The two `config.yaml` lines that enable the transport (what the person consents to).
pub const CONSENT: [&str; 2] = [
    "plugins.enabled: [agentnotify]",
    "security.approval.transport: agentnotify",
];

/// `$HERMES_HOME`, else `~/.hermes`.
fn hermes_home() -> Result<PathBuf, SetupError> {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    match (var("HERMES_HOME"), var("HOME")) {
        (Some(h), _) => Ok(PathBuf::from(h)),
        (None, Some(home)) => Ok(PathBuf::from(home).join(".hermes")),
        (None, None) => Err(SetupError::NoHome),
    }
}

fn plugin_dir() -> Result<PathBuf, SetupError> {
    Ok(hermes_home()?.join("plugins").join(PLUGIN_NAME))
}

/// The plugin's `__init__.py` with the hook's absolute path filled in (as a Python string
/// literal: JSON's string escapes are Python's too).
pub fn plugin_source(hook: &str) -> String {
    let literal = serde_json::to_string(hook).expect("a string serialises");
    PLUGIN_PY.replacen("\"{{hook}}\"", &literal, 1)
}

/// `install-harness hermes`: writes the plugin running `command_path` (default: this
/// program) and prints the settings that enable it.
pub fn install(command_path: Option<PathBuf>, dry_run: bool) -> Result<(), SetupError> {
    let hook = &super::cli::command_path(command_path)?;
    let dir = plugin_dir()?;
    let init = dir.join("__init__.py");
    if std::fs::read_to_string(&init).is_ok_and(|t| !t.contains(MARK)) {
        return Err(SetupError::WrongShapeNoForce {
            path: init,
            problem: "another plugin named agentnotify is installed here".into(),
        });
    }
    let files = [
        (dir.join("plugin.yaml"), PLUGIN_YAML.to_string()),
        (dir.join("__init__.py"), plugin_source(hook)),
    ];
    let changed: Vec<_> = files
        .iter()
        .filter(|(path, text)| std::fs::read_to_string(path).ok().as_deref() != Some(text))
        .collect();
    if changed.is_empty() {
        println!(
            "Hermes: the agentnotify plugin in {} is up to date; nothing changed.",
            dir.display()
        );
    } else if dry_run {
        println!("Dry run: nothing was written. These files would be written:");
        for (path, _) in &changed {
            println!("  {}", path.display());
        }
    } else {
        crate::fsutil::create_private_dir(&dir)
            .map_err(|e| SetupError::io("create the folder", &dir, e))?;
        for (path, text) in changed {
            write_file(path, text.as_bytes(), None, 0o600)?;
        }
        println!(
            "Hermes: installed the agentnotify plugin in {}",
            dir.display()
        );
    }
    println!("Hermes loads it only once you enable it. Add these two settings to {} (agentnotify does not edit it):", hermes_home()?.join("config.yaml").display());
    for line in CONSENT {
        println!("  {line}");
    }
    println!("Optional: security.approval.transport_fallback: builtin (Hermes asks in its own prompt when agentnotify cannot).");
    println!("Questions live within Hermes' approvals.timeout; then Hermes blocks the command.");
    Ok(())
}

/// `uninstall-harness hermes`: removes our plugin's files (never a plugin that is not ours).
pub fn uninstall(dry_run: bool) -> Result<(), SetupError> {
    let dir = plugin_dir()?;
    let init = dir.join("__init__.py");
    let ours = std::fs::read_to_string(&init).is_ok_and(|t| t.contains(MARK));
    if !ours {
        println!(
            "Hermes: no agentnotify plugin in {}; nothing changed.",
            dir.display()
        );
        return Ok(());
    }
    if dry_run {
        println!(
            "Dry run: nothing was removed. {} would be removed.",
            dir.display()
        );
        return Ok(());
    }
    remove_file(&init)?;
    remove_file(&dir.join("plugin.yaml"))?;
    // Python's bytecode cache of our module, written by Hermes when it loaded it.
    let cache = dir.join("__pycache__");
    if let Ok(entries) = std::fs::read_dir(&cache) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("__init__.") {
                remove_file(&e.path())?;
            }
        }
        remove_dir_if_empty(&cache);
    }
    remove_dir_if_empty(&dir);
    println!(
        "Hermes: removed the agentnotify plugin from {}",
        dir.display()
    );
    println!(
        "Also remove these settings from {}: {}",
        hermes_home()?.join("config.yaml").display(),
        CONSENT.join(", ")
    );
    Ok(())
}

/// `doctor`'s Hermes line: the plugin installed and pointing at a hook that exists.
/// `required`: `doctor hermes` was asked for, so its absence is a problem.
pub fn doctor(required: bool) -> HostReport {
    let check = |status, detail: String| {
        Check::new(Some(Harness::Hermes), "plugin_installed", status, detail)
    };
    let install = "agentnotify-hook install-harness hermes";
    let found = plugin_dir().map(|dir| (std::fs::read_to_string(dir.join("__init__.py")), dir));
    let (set_up, line) = match found {
        Err(e) => (false, check(Status::Fail, e.to_string())),
        Ok((Ok(text), dir)) if text.contains(MARK) => match hook_of(&text) {
            Some(hook) if crate::fsutil::is_executable_file(Path::new(&hook)) => (
                true,
                check(
                    Status::Ok,
                    format!(
                        "{} (runs {hook}); enabled by {}",
                        dir.display(),
                        CONSENT.join(", ")
                    ),
                ),
            ),
            _ => (
                true,
                check(
                    Status::Fail,
                    format!("{} runs a hook that is missing", dir.display()),
                )
                .fix(install),
            ),
        },
        Ok((_, dir)) => (
            false,
            check(
                absent(required),
                format!("no agentnotify plugin in {}", dir.display()),
            )
            .fix(install),
        ),
    };
    HostReport {
        set_up,
        checks: vec![line],
    }
}

/// The hook path written into an installed plugin.
fn hook_of(source: &str) -> Option<String> {
    let line = source.lines().find(|l| l.starts_with("HOOK = "))?;
    serde_json::from_str(line.trim_start_matches("HOOK = ")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_path_is_written_as_a_python_string_and_read_back() {
        let src = plugin_source("/opt/a \"b\"/agentnotify-hook");
        assert!(!src.contains("{{hook}}"));
        assert_eq!(
            hook_of(&src).as_deref(),
            Some("/opt/a \"b\"/agentnotify-hook")
        );
        assert!(src.contains(MARK));
    }
}
