//! The outside programs the test suites drive (Chromium, chromedriver, tmux, a session bus,
//! python3-dbusmock, npm), found on PATH or installed on first use, so `cargo test --locked`
//! passes on a machine that has only a Rust toolchain. Missing programs are installed from
//! Debian's packages (apt-get as root, or `sudo -n`), once: test processes take turns through
//! a file lock. When that cannot be done, the test fails naming exactly what to install; a
//! test never skips silently.
//!
//! `AGENTNOTIFY_TEST_FRESH=chromium,chromedriver,tmux` plays a fresh machine for the programs
//! it lists: they are treated as missing and their packages are fetched (`apt-get download`)
//! and unpacked (`dpkg-deb -x`) into `target/provision/fresh/`, which needs no root and
//! leaves the machine's own copies alone.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// One program a test needs and the Debian packages that provide it.
pub struct Need {
    /// The name looked up on PATH (for a Python module, the interpreter in `file`).
    pub program: &'static str,
    /// What to install: apt package names.
    pub packages: &'static [&'static str],
    /// Where the program is inside the packages (also once installed system-wide).
    pub file: &'static str,
    /// Checked with `python3 -c 'import …'` instead of PATH when set.
    pub python_module: Option<&'static str>,
    /// Why the tests need it, said when installing it.
    pub why: &'static str,
}

pub const CHROMIUM: Need = Need {
    program: "chromium",
    packages: &["chromium", "chromium-common"],
    file: "usr/lib/chromium/chromium",
    python_module: None,
    why: "the browser tests drive the web UI and the phone app in a real headless Chromium",
};
pub const CHROMEDRIVER: Need = Need {
    program: "chromedriver",
    packages: &["chromium-driver"],
    file: "usr/lib/chromium/chromedriver",
    python_module: None,
    why: "the web UI's browser tests drive Chromium over WebDriver",
};
pub const TMUX: Need = Need {
    program: "tmux",
    packages: &["tmux"],
    file: "usr/bin/tmux",
    python_module: None,
    why: "the terminal tests type into `agentnotify answer` and `setup` as a person would",
};
pub const DBUS_DAEMON: Need = Need {
    program: "dbus-daemon",
    packages: &["dbus-daemon"],
    file: "usr/bin/dbus-daemon",
    python_module: None,
    why: "the desktop channel's tests run a private session bus",
};
pub const GDBUS: Need = Need {
    program: "gdbus",
    packages: &["libglib2.0-bin"],
    file: "usr/bin/gdbus",
    python_module: None,
    why: "the desktop channel's tests click a notification's buttons over D-Bus",
};
pub const DBUSMOCK: Need = Need {
    program: "python3",
    packages: &["python3-dbusmock"],
    file: "usr/bin/python3",
    python_module: Some("dbusmock"),
    why: "the desktop channel's tests record notifications with python3-dbusmock",
};
pub const NPM: Need = Need {
    program: "npm",
    packages: &["npm"],
    file: "usr/bin/npm",
    python_module: None,
    why: "the Web Push tests install the mock push service web-push-testing from npm",
};
pub const NODE: Need = Need {
    program: "node",
    packages: &["nodejs"],
    file: "usr/bin/node",
    python_module: None,
    why: "the Web Push tests run the mock push service web-push-testing",
};

pub const POSTGRESQL: Need = Need {
    program: "pg_ctlcluster",
    packages: &["postgresql"],
    file: "usr/bin/pg_ctlcluster",
    python_module: None,
    why: "the Relay's PostgreSQL store is tested against a real PostgreSQL in a temp cluster",
};
pub const HAPROXY: Need = Need {
    program: "haproxy",
    packages: &["haproxy"],
    file: "usr/sbin/haproxy",
    python_module: None,
    why: "two Relay processes are tested behind a real load balancer",
};

/// The path of `need`'s program, installing its packages first when it is missing; panics
/// with what to install when that fails.
pub fn require(need: &Need) -> PathBuf {
    static FOUND: Mutex<Option<HashMap<&'static str, PathBuf>>> = Mutex::new(None);
    let mut found = FOUND.lock().unwrap_or_else(|p| p.into_inner());
    let found = found.get_or_insert_with(HashMap::new);
    let key = need.python_module.unwrap_or(need.program);
    if let Some(path) = found.get(key) {
        return path.clone();
    }
    let path = provide(need).unwrap_or_else(|why| {
        panic!(
            "{} is missing and could not be installed ({why}); {}. Install it yourself: \
             apt-get install {} (Debian/Ubuntu)",
            key,
            need.why,
            need.packages.join(" ")
        )
    });
    found.insert(key, path.clone());
    path
}

fn provide(need: &Need) -> Result<PathBuf, String> {
    if fresh(need) {
        return unpack_locally(need);
    }
    if let Some(path) = present(need) {
        return Ok(path);
    }
    let _turn = Turn::take()?;
    // Another test process may have installed it while this one waited for its turn.
    if let Some(path) = present(need) {
        return Ok(path);
    }
    say(format_args!(
        "installing {} (apt-get install {}): {}",
        need.program,
        need.packages.join(" "),
        need.why
    ));
    apt_install(need.packages)?;
    present(need).ok_or_else(|| {
        format!(
            "apt-get installed {} but {} is still not there",
            need.packages.join(" "),
            need.file
        )
    })
}

/// Whether `AGENTNOTIFY_TEST_FRESH` asks to play a machine without this program.
fn fresh(need: &Need) -> bool {
    std::env::var("AGENTNOTIFY_TEST_FRESH")
        .map(|list| list.split(',').any(|p| p.trim() == need.program))
        .unwrap_or(false)
}

fn present(need: &Need) -> Option<PathBuf> {
    if let Some(module) = need.python_module {
        let python = Path::new("/").join(need.file);
        let ok = Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        return ok.then_some(python);
    }
    on_path(need.program).or_else(|| {
        let installed = Path::new("/").join(need.file);
        installed.is_file().then_some(installed)
    })
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `apt-get install`, as root or through `sudo -n`; refreshes the package lists once when
/// the first attempt fails (a fresh container has none).
fn apt_install(packages: &[&str]) -> Result<(), String> {
    let root = unsafe { libc::geteuid() } == 0;
    let run = |args: &[&str]| -> Result<bool, String> {
        let mut cmd = if root {
            Command::new("apt-get")
        } else {
            let mut c = Command::new("sudo");
            c.args(["-n", "apt-get"]);
            c
        };
        cmd.args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd.status().map(|s| s.success()).map_err(|e| {
            format!(
                "cannot run apt-get{}: {e}",
                if root { "" } else { " via sudo -n" }
            )
        })
    };
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend_from_slice(packages);
    if run(&install)? || (run(&["update", "-q"])? && run(&install)?) {
        return Ok(());
    }
    Err(if root {
        "apt-get install failed".to_string()
    } else {
        "not root, and `sudo -n apt-get` was refused".to_string()
    })
}

/// The fresh-machine play: fetch the packages and unpack them under `target/provision/`.
fn unpack_locally(need: &Need) -> Result<PathBuf, String> {
    let root = provision_dir().join("fresh");
    let path = root.join(need.file);
    let _turn = Turn::take()?;
    if path.is_file() {
        return Ok(path);
    }
    say(format_args!(
        "installing {} into {} (AGENTNOTIFY_TEST_FRESH: apt-get download {}): {}",
        need.program,
        root.display(),
        need.packages.join(" "),
        need.why
    ));
    let debs = provision_dir().join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| e.to_string())?;
    let ok = Command::new("apt-get")
        .arg("download")
        .args(need.packages)
        .current_dir(&debs)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run apt-get: {e}"))?;
    if !ok.success() {
        return Err(format!(
            "apt-get download {} failed",
            need.packages.join(" ")
        ));
    }
    for entry in std::fs::read_dir(&debs).map_err(|e| e.to_string())? {
        let deb = entry.map_err(|e| e.to_string())?.path();
        let name = deb.file_name().unwrap().to_string_lossy().into_owned();
        if need
            .packages
            .iter()
            .any(|p| name.starts_with(&format!("{p}_")))
        {
            let ok = Command::new("dpkg-deb")
                .arg("-x")
                .arg(&deb)
                .arg(&root)
                .status()
                .map_err(|e| format!("cannot run dpkg-deb: {e}"))?;
            if !ok.success() {
                return Err(format!("dpkg-deb -x {name} failed"));
            }
        }
    }
    path.is_file()
        .then(|| path.clone())
        .ok_or_else(|| format!("{} is not in {}", need.file, need.packages.join(" ")))
}

/// Straight to stderr, not through `eprintln!`, which the test harness captures (and shows
/// only for a failing test): an install is worth seeing either way.
fn say(what: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "{what}");
}

fn provision_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/provision")
}

/// Exclusive use of the package manager among this suite's processes (cargo runs test
/// binaries one after another, but several suites may run at once).
struct Turn(std::fs::File);

impl Turn {
    fn take() -> Result<Turn, String> {
        let dir = provision_dir();
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let file = std::fs::File::create(dir.join("lock")).map_err(|e| e.to_string())?;
        file.lock()
            .map_err(|e| format!("cannot lock {}: {e}", dir.display()))?;
        Ok(Turn(file))
    }
}
