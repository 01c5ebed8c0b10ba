//! Shared test plumbing: a temp home, the real daemon, and an HTTP client for its API.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

pub const AGENTNOTIFY: &str = env!("CARGO_BIN_EXE_agentnotify");
pub const HOOK: &str = env!("CARGO_BIN_EXE_agentnotify-hook");

/// A throwaway `AGENTNOTIFY_HOME` (and `HOME`); kills any broker started in it on drop.
pub struct Home {
    pub dir: tempfile::TempDir,
    /// Extra environment for every command of this home (e.g. `SSL_CERT_FILE`).
    env: Vec<(String, std::ffi::OsString)>,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Home {
            dir,
            env: Vec::new(),
        }
    }

    /// Sets `key` for every command started from this home (brokers they spawn inherit it).
    pub fn with_env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Home {
        self.env
            .push((key.to_string(), value.as_ref().to_os_string()));
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A command for one of our binaries, isolated to this home and an ephemeral port.
    pub fn cmd(&self, bin: &str) -> Command {
        let mut c = Command::new(bin);
        c.env("AGENTNOTIFY_HOME", self.path())
            .env("HOME", self.path().join("home"))
            .env("AGENTNOTIFY_PORT", "0")
            .env_remove("AGENTNOTIFY_URL")
            .env_remove("AGENTNOTIFY_TOKEN")
            .env_remove("AGENTNOTIFY_LOG")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR");
        for (key, value) in &self.env {
            c.env(key, value);
        }
        c
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.path().join("token"))
            .expect("token file")
            .trim()
            .to_string()
    }

    pub fn broker_json(&self) -> Option<Value> {
        let bytes = std::fs::read(self.path().join("broker.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The API of the broker named in broker.json.
    pub fn api(&self) -> Api {
        let info = self.broker_json().expect("broker.json");
        Api::new(info["url"].as_str().unwrap(), &self.token())
    }

    /// Every log line written so far.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        if let Ok(entries) = std::fs::read_dir(self.path().join("logs")) {
            for e in entries.flatten() {
                all.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        all
    }

    pub fn write_config(&self, text: &str) {
        std::fs::write(self.path().join("config.toml"), text).unwrap();
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if let Some(info) = self.broker_json() {
            if let Some(pid) = info["pid"].as_i64() {
                // Only ever a broker of ours (a test may write a fake broker.json).
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains("agentnotify") {
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                }
            }
        }
    }
}

/// A foreground `agentnotify daemon --port 0` in a home; killed on drop.
pub struct Daemon {
    pub child: Child,
    pub url: String,
    pub pid: u32,
}

impl Daemon {
    /// Starts the daemon with a rate limit high enough for load tests, plus `extra` args.
    pub fn start(home: &Home, extra: &[&str]) -> Daemon {
        let mut args = vec![
            "daemon",
            "--port",
            "0",
            "--rate-limit",
            "100000",
            "--rate-burst",
            "100000",
        ];
        args.extend_from_slice(extra);
        Daemon::start_with(home, &args)
    }

    pub fn start_with(home: &Home, args: &[&str]) -> Daemon {
        let mut child = home
            .cmd(AGENTNOTIFY)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the daemon");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("daemon's first line");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("daemon did not say where it listens: {line:?}"))
            .to_string();
        let pid = child.id();
        Daemon { child, url, pid }
    }

    pub fn api(&self, home: &Home) -> Api {
        Api::new(&self.url, &home.token())
    }

    /// SIGKILL, and reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A small client for the bearer API.
#[derive(Clone)]
pub struct Api {
    pub url: String,
    pub token: String,
    pub http: reqwest::Client,
}

impl Api {
    pub fn new(url: &str, token: &str) -> Api {
        Api {
            url: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            // Below the broker's 10 s keep-alive header timeout (see client::Client::new).
            http: agentnotify_relay_proto::tls::plain_http_client()
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        }
    }

    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{}", self.url, path))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(330));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request sent");
        let status = res.status().as_u16();
        let bytes = res.bytes().await.unwrap();
        let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "non-JSON reply {status}: {:?}",
                String::from_utf8_lossy(&bytes)
            )
        });
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(body)).await
    }

    /// Opens a question; panics unless created or reused.
    pub async fn ask(&self, body: Value) -> Value {
        let (status, v) = self.post("/v1/interactions/request", body).await;
        assert!(
            status == 201 || status == 200,
            "request failed: {status} {v}"
        );
        v
    }

    /// A permission question with a unique prompt.
    pub async fn ask_permission(&self, prompt: &str) -> Value {
        self.ask(json!({"kind": "permission", "prompt": prompt, "agent": "codex", "project": "shop", "session_id": "sess-1"}))
            .await
    }

    /// A valid answer body for a record.
    pub fn answer(record: &Value, response_id: &str, choice: &str) -> Value {
        json!({
            "response_id": response_id,
            "request_digest": record["request_digest"],
            "nonce": record["nonce"],
            "choice_id": choice,
            "source": "cli",
        })
    }

    pub async fn respond(&self, record: &Value, body: Value) -> (u16, Value) {
        let id = record["id"].as_str().unwrap();
        self.post(&format!("/v1/interactions/{id}/respond"), body)
            .await
    }

    pub async fn pending(&self) -> Vec<Value> {
        let (_, v) = self.get("/v1/interactions?pending=true").await;
        v["interactions"].as_array().cloned().unwrap_or_default()
    }

    /// The first pending question `what` accepts, once one is (bounded: 30 s, then the
    /// test fails saying it waited for `waited_for`).
    pub async fn pending_where(&self, waited_for: &str, what: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(q) = self.pending().await.into_iter().find(|q| what(q)) {
                return q;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no pending question: {waited_for}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

/// Runs a command to completion with `stdin`, returning (exit code, stdout, stderr).
pub fn run_with_stdin(mut cmd: Command, stdin: &[u8]) -> (i32, String, String) {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    let _ = writer.join();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks a rate-limit refusal: 429 with a `Retry-After` of at least a second and the
/// `rate_limited` code.
pub async fn assert_rate_limited(res: reqwest::Response) {
    assert_eq!(res.status().as_u16(), 429);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1, "Retry-After {retry}");
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["code"], "rate_limited");
}

/// Every field name the API's bodies know, for generators of hostile bodies.
pub const BODY_FIELDS: &[&str] = &[
    "kind",
    "prompt",
    "choices",
    "key",
    "agent",
    "agent_instance",
    "project",
    "session_id",
    "turn_id",
    "native_request_id",
    "text_max_length",
    "ttl_seconds",
    "owner_lease",
    "response_id",
    "request_digest",
    "nonce",
    "choice_id",
    "text",
    "source",
    "device_id",
    "title",
    "message",
    "type",
    "priority",
    "metadata",
    "interaction_id",
    "id",
    "label",
    "detail",
];

pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("hooks/fixtures")
        .join(name);
    std::fs::read_to_string(path).expect("fixture")
}

/// Tests that load the whole machine (thousands of processes, hundreds of waiting hooks,
/// crash loops) take turns: on two cores, two of them at once starve each other's hooks
/// past the 15 s owner lease, which proves nothing about the code.
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

/// A stand-in for the desktop's opener (`xdg-open`, first on a `PATH` of its own) that
/// records the arguments it was given in `record`, written whole once it ran.
pub struct FakeOpener {
    pub record: PathBuf,
    dir: tempfile::TempDir,
}

impl FakeOpener {
    pub fn new() -> FakeOpener {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("argv");
        let opener = dir.path().join("xdg-open");
        std::fs::write(
            &opener,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{0}.tmp' && mv '{0}.tmp' '{0}'\n",
                record.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeOpener { record, dir }
    }

    /// `PATH` with the stand-in first.
    pub fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}
