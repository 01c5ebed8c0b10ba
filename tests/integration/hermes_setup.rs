//! `install-harness hermes`, `uninstall-harness hermes` and `doctor hermes` as the real
//! binary against temporary HOME / HERMES_HOME folders (SPEC §10.2).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Home, HOOK};

struct Hermes {
    home: Home,
    hermes_home: PathBuf,
}

impl Hermes {
    fn new() -> Hermes {
        let home = Home::new();
        let hermes_home = home.path().join("home").join(".hermes");
        Hermes { home, hermes_home }
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(HOOK)
            .args(args)
            .env_clear()
            .env("HOME", self.home.path().join("home"))
            .env("AGENTNOTIFY_HOME", self.home.path())
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn plugin(&self) -> PathBuf {
        self.hermes_home.join("plugins").join("agentnotify")
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn hermes_install_writes_the_plugin_prints_the_consent_lines_and_uninstall_removes_it() {
    let h = Hermes::new();
    let (code, out, err) = h.run(&["install-harness", "hermes"]);
    assert_eq!(code, 0, "{out} {err}");
    // The two config.yaml settings are printed, never written.
    assert!(out.contains("plugins.enabled: [agentnotify]"), "{out}");
    assert!(
        out.contains("security.approval.transport: agentnotify"),
        "{out}"
    );
    assert!(!h.hermes_home.join("config.yaml").exists());
    let init = std::fs::read_to_string(h.plugin().join("__init__.py")).unwrap();
    let shipped = include_str!("../../harness/hermes/agentnotify/__init__.py");
    let hook = std::fs::canonicalize(HOOK).unwrap();
    let literal = serde_json::to_string(hook.to_str().unwrap()).unwrap();
    assert_eq!(init, shipped.replacen("\"{{hook}}\"", &literal, 1));
    assert!(init.contains("register_approval_transport(NAME, present)"));
    assert_eq!(
        std::fs::read_to_string(h.plugin().join("plugin.yaml")).unwrap(),
        include_str!("../../harness/hermes/agentnotify/plugin.yaml")
    );
    assert_eq!(mode(&h.plugin()), 0o700);
    assert_eq!(mode(&h.plugin().join("__init__.py")), 0o600);
    // Again: nothing changes, and it says so.
    let (code, again, _) = h.run(&["install-harness", "hermes"]);
    assert_eq!(code, 0);
    assert!(again.contains("nothing changed"), "{again}");
    // doctor reports it, and a Hermes-only setup is all right.
    let (code, report, _) = h.run(&["doctor", "hermes", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let line = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["host"] == "hermes")
        .cloned()
        .unwrap();
    assert_eq!(line["status"], "ok", "{report:#}");
    assert!(report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["name"] != "hook_installed" || c["status"] != "fail"));
    let _ = code; // the PATH check may fail here: only our lines matter
                  // A Python cache Hermes wrote beside it goes too; a file of the person's stays.
    std::fs::create_dir_all(h.plugin().join("__pycache__")).unwrap();
    std::fs::write(
        h.plugin().join("__pycache__/__init__.cpython-311.pyc"),
        b"x",
    )
    .unwrap();
    let (code, out, _) = h.run(&["uninstall-harness", "hermes"]);
    assert_eq!(code, 0);
    assert!(out.contains("removed"), "{out}");
    assert!(!h.plugin().exists());
    let (code, report, _) = h.run(&["doctor", "hermes"]);
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("FAIL  hermes: plugin installed: no agentnotify plugin"),
        "{report}"
    );
}

#[test]
fn hermes_uninstall_leaves_a_plugin_that_is_not_ours_and_bad_arguments_are_usage_errors() {
    let h = Hermes::new();
    std::fs::create_dir_all(h.plugin()).unwrap();
    std::fs::write(h.plugin().join("__init__.py"), "def register(ctx): pass\n").unwrap();
    let (code, out, _) = h.run(&["uninstall-harness", "hermes"]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing changed"), "{out}");
    assert!(h.plugin().join("__init__.py").exists());
    let (code, _, err) = h.run(&["install-harness", "hermes", "--trust"]);
    assert_eq!(code, 2);
    assert!(err.contains("--trust"), "{err}");
    let (code, _, err) = h.run(&[
        "install-harness",
        "hermes",
        "--command-path",
        "relative/agentnotify-hook",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("absolute"), "{err}");
    // Someone else's plugin of that name is never overwritten.
    let (code, _, err) = h.run(&["install-harness", "hermes"]);
    assert_eq!(code, 1);
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(
        std::fs::read_to_string(h.plugin().join("__init__.py")).unwrap(),
        "def register(ctx): pass\n"
    );
}
