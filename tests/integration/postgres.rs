//! Real parts for the many-process Relay (SPEC §14): a PostgreSQL server in a temp data dir
//! on a free loopback port, and HAProxy in front of Relay processes. Both come from Debian's
//! packages, installed on first use when missing (a skip is not a pass).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The folder of PostgreSQL's server programs (`initdb`, `postgres`, `psql`).
fn pg_bin() -> PathBuf {
    let find = || {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|b| b.join("initdb").exists())
            .collect();
        found.sort();
        found.pop()
    };
    crate::provision::require(&crate::provision::POSTGRESQL);
    find().expect(
        "PostgreSQL's server programs under /usr/lib/postgresql: apt-get install postgresql",
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The uid/gid to run the server as: PostgreSQL refuses to run as root.
fn server_user() -> Option<(u32, u32)> {
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let ids = |name: &str| {
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&name)).then(|| (f[2].parse().unwrap(), f[3].parse().unwrap()))
        })
    };
    Some(
        ids("postgres")
            .or_else(|| ids("nobody"))
            .expect("an unprivileged user"),
    )
}

/// A PostgreSQL server of its own; stopped (immediately) and deleted on drop.
pub(crate) struct Postgres {
    child: Option<Child>,
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
    /// The server's log lines, as they come.
    log: Option<mpsc::Receiver<String>>,
    /// Extra `-c name=value` settings of the server.
    settings: Vec<String>,
}

impl Postgres {
    /// A fresh cluster in a temp folder, not running yet.
    fn init() -> Postgres {
        let bin = pg_bin();
        let user = server_user();
        let dir = std::env::temp_dir().join(format!(
            "agentnotify-pg-{}",
            agentnotify_model::secret::random_b64url(9).replace(['-', '_'], "x")
        ));
        std::fs::create_dir(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
        let pg = Postgres {
            child: None,
            dir,
            bin,
            port: free_port(),
            user,
            log: None,
            settings: Vec::new(),
        };
        let out = pg
            .command("initdb")
            .args([
                "-U",
                "relay",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(pg.data())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pg
    }

    pub(crate) fn start() -> Postgres {
        let mut pg = Postgres::init();
        pg.run_server();
        pg.psql("postgres", "CREATE DATABASE relay");
        pg
    }

    /// A server that also speaks TLS with `chain` and `key` (PEM files), and refuses any
    /// connection over TCP that is not TLS.
    pub(crate) fn start_tls(chain: &std::path::Path, key: &std::path::Path) -> Postgres {
        let mut pg = Postgres::init();
        use std::os::unix::fs::PermissionsExt;
        for (from, name) in [(chain, "server.crt"), (key, "server.key")] {
            let to = pg.dir.join(name);
            std::fs::copy(from, &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
            if let Some((uid, gid)) = pg.user {
                std::os::unix::fs::chown(&to, Some(uid), Some(gid)).unwrap();
            }
        }
        // TCP only with TLS (psql's default `sslmode=prefer` takes it).
        std::fs::write(
            pg.data().join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .unwrap();
        let dir = pg.dir.display().to_string();
        pg.settings = vec![
            "ssl=on".into(),
            format!("ssl_cert_file={dir}/server.crt"),
            format!("ssl_key_file={dir}/server.key"),
        ];
        pg.run_server();
        pg.psql("postgres", "CREATE DATABASE relay");
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid);
        }
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        cmd
    }

    /// Starts the server and waits for its "ready to accept connections" line.
    fn run_server(&mut self) {
        let mut child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string()])
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "max_connections=200",
            ])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .arg("-k")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("postgres starts");
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        self.log = Some(rx);
        self.wait_for_log("ready to accept connections");
    }

    /// Waits (bounded) for a server log line containing `text`.
    pub(crate) fn wait_for_log(&self, text: &str) {
        let rx = self.log.as_ref().expect("the server runs");
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("postgres never logged {text:?}"));
            if line.contains(text) {
                return;
            }
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://relay@127.0.0.1:{}/relay", self.port)
    }

    /// Runs `sql` with psql in database `db`; returns its unaligned output.
    pub(crate) fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "relay",
            ])
            .args([
                "-d",
                db,
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A fast shutdown (every session is cut), waited for.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let _ = child.wait();
        }
    }

    /// Stops the server and starts it again on the same port and data.
    pub(crate) fn restart(&mut self) {
        self.stop();
        self.run_server();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            unsafe { libc::kill(child.id() as i32, libc::SIGQUIT) };
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// HAProxy with two frontends in front of two Relay processes: `device` prefers `a` and
/// `broker` prefers `b`, each falling back to the other when its instance is down (health
/// checks every 200 ms, and a request whose connection is refused is re-sent to the other).
pub(crate) struct Haproxy {
    child: Child,
    _dir: tempfile::TempDir,
    pub(crate) device_url: String,
    pub(crate) broker_url: String,
}

fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://").trim_end_matches('/')
}

impl Haproxy {
    /// `a` and `b`: the two Relays' URLs.
    pub(crate) fn start(a: &str, b: &str) -> Haproxy {
        Haproxy::start_with(a, b, 200)
    }

    /// Health checks every `check_ms` (they count against the balancer's own rate limit).
    pub(crate) fn start_with(a: &str, b: &str, check_ms: u32) -> Haproxy {
        let haproxy = crate::provision::require(&crate::provision::HAPROXY);
        let (device, broker) = (free_port(), free_port());
        let (a, b) = (host_port(a), host_port(b));
        let config = format!(
            "global\n  maxconn 4000\n\
             defaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  \
             timeout server 120s\n  timeout tunnel 120s\n  option redispatch\n  retries 3\n  \
             retry-on conn-failure\n  option forwardfor\n\
             frontend device\n  bind 127.0.0.1:{device}\n  default_backend device\n\
             frontend broker\n  bind 127.0.0.1:{broker}\n  default_backend broker\n\
             backend device\n  option httpchk GET /health\n  \
             server a {a} check inter {check_ms}ms fall 1 rise 1\n  \
             server b {b} check inter {check_ms}ms fall 1 rise 1 backup\n\
             backend broker\n  option httpchk GET /health\n  \
             server b {b} check inter {check_ms}ms fall 1 rise 1\n  \
             server a {a} check inter {check_ms}ms fall 1 rise 1 backup\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let check = Command::new(&haproxy)
            .args(["-c", "-q", "-f"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "haproxy refused its config: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(&haproxy)
            .args(["-db", "-f"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts");
        let proxy = Haproxy {
            child,
            _dir: dir,
            device_url: format!("http://127.0.0.1:{device}"),
            broker_url: format!("http://127.0.0.1:{broker}"),
        };
        for url in [&proxy.device_url, &proxy.broker_url] {
            wait_healthy(url);
        }
        proxy
    }
}

/// Waits (bounded) until `url/health` answers 200 through the proxy.
pub(crate) fn wait_healthy(url: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ok = std::net::TcpStream::connect(host_port(url)).is_ok_and(|mut s| {
            use std::io::{Read, Write};
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.write_all(b"GET /health HTTP/1.0\r\nHost: relay\r\n\r\n");
            let mut head = [0u8; 12];
            s.read_exact(&mut head).is_ok() && head.ends_with(b"200")
        });
        if ok {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{url} never became healthy"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
