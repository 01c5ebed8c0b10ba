//! A minimal W3C WebDriver client over chromedriver's HTTP JSON API, enough to drive headless
//! Chromium through the web UI: no extra crates, just reqwest.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;

use crate::provision;
use serde_json::{json, Value};
use tokio::time::Instant;

/// The key under which WebDriver returns an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Where the browser and its driver are, or why the test cannot run.
pub struct Browser {
    pub chromium: PathBuf,
    pub chromedriver: PathBuf,
}

impl Browser {
    /// Chromium and chromedriver (`CHROME_BIN` / `CHROMEDRIVER` override PATH), installed
    /// first when missing (`provision`); `Err` is never returned, the test fails instead.
    pub fn find() -> Result<Browser, String> {
        let chromium =
            env_path("CHROME_BIN").unwrap_or_else(|| provision::require(&provision::CHROMIUM));
        let chromedriver = env_path("CHROMEDRIVER")
            .unwrap_or_else(|| provision::require(&provision::CHROMEDRIVER));
        Ok(Browser {
            chromium,
            chromedriver,
        })
    }
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

/// A running chromedriver and one browser session in it.
pub struct Driver {
    child: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// An element reference.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Driver {
    /// Starts chromedriver on a free loopback port and opens a headless Chromium session.
    pub async fn start(browser: &Browser) -> Driver {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().unwrap().port()
        };
        let child = Command::new(&browser.chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = agentnotify_relay_proto::tls::plain_http_client()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().expect("browser profile dir");
        let mut driver = Driver {
            child,
            base,
            session: String::new(),
            http,
            _profile: profile,
        };
        driver.wait_ready().await;
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1100,900",
            "--hide-scrollbars",
            "--force-color-profile=srgb",
        ];
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        args.push(format!(
            "--user-data-dir={}",
            driver._profile.path().display()
        ));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": browser.chromium, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let res = driver.raw("POST", "/session", Some(caps)).await;
        driver.session = res["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver opened no session: {res}"))
            .to_string();
        driver
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self.http.get(format!("{}/status", self.base)).send().await {
                if let Ok(v) = r.json::<Value>().await {
                    if v["value"]["ready"] == true {
                        return;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or(json!({}))),
        };
        let res = req.send().await.expect("a chromedriver reply");
        res.json().await.expect("chromedriver JSON")
    }

    /// A command on the session; panics with WebDriver's message on error.
    pub async fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let v = self.try_cmd(method, path, body).await;
        if let Some(err) = v["value"]["error"].as_str() {
            panic!(
                "WebDriver {method} {path}: {err}: {}",
                v["value"]["message"]
            );
        }
        v["value"].clone()
    }

    async fn try_cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.raw(method, &format!("/session/{}{path}", self.session), body)
            .await
    }

    pub async fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url}))).await;
    }

    pub async fn url(&self) -> String {
        self.cmd("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The first element matching `css`, if any right now.
    pub async fn find(&self, css: &str) -> Option<Element> {
        let v = self
            .try_cmd(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v["value"][ELEMENT].as_str().map(|s| Element(s.to_string()))
    }

    /// Waits (bounded) until an element matching `css` exists.
    pub async fn wait_for(&self, css: &str, within: Duration) -> Element {
        let deadline = Instant::now() + within;
        loop {
            if let Some(e) = self.find(css).await {
                return e;
            }
            if Instant::now() >= deadline {
                let body = self.page_text().await;
                let url = self.url().await;
                let console = self.console_errors().await;
                panic!(
                    "no element {css:?} within {within:?} at {url}; console: {console:#?}; the page says:\n{body}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (bounded) until no element matches `css`.
    pub async fn wait_gone(&self, css: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.find(css).await.is_some() {
            assert!(
                Instant::now() < deadline,
                "{css:?} still there after {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (bounded) until the text of `css` contains `needle`.
    pub async fn wait_text(&self, css: &str, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(e) = self.find(css).await {
                let t = self.text(&e).await;
                if t.contains(needle) {
                    return t;
                }
                assert!(
                    Instant::now() < deadline,
                    "{css:?} says {t:?}, not {needle:?}"
                );
            } else {
                assert!(Instant::now() < deadline, "no {css:?} within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn text(&self, e: &Element) -> String {
        self.cmd("GET", &format!("/element/{}/text", e.0), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub async fn click(&self, e: &Element) {
        self.cmd("POST", &format!("/element/{}/click", e.0), Some(json!({})))
            .await;
    }

    pub async fn type_into(&self, e: &Element, text: &str) {
        self.cmd(
            "POST",
            &format!("/element/{}/value", e.0),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub async fn page_text(&self) -> String {
        match self.find("body").await {
            Some(b) => self.text(&b).await,
            None => String::new(),
        }
    }

    /// Runs a script in the page and returns its value.
    pub async fn script(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Waits (bounded) until a script expression is true in the page.
    pub async fn wait_until(&self, expr: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.script(&format!("return Boolean({expr})")).await != true {
            assert!(
                Instant::now() < deadline,
                "{expr} still false after {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Presses keys in whatever has focus (W3C actions).
    pub async fn keys(&self, keys: &str) {
        let mut actions = Vec::new();
        for ch in keys.chars() {
            actions.push(json!({"type": "keyDown", "value": ch.to_string()}));
            actions.push(json!({"type": "keyUp", "value": ch.to_string()}));
        }
        self.cmd(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "kb", "actions": actions}]})),
        )
        .await;
        self.try_cmd("DELETE", "/actions", None).await;
    }

    /// Moves the (real, WebDriver) pointer to the centre of an element and leaves it there.
    pub async fn hover(&self, e: &Element) {
        let origin = json!({ ELEMENT: e.0 });
        let move_to =
            json!({"type": "pointerMove", "duration": 0, "origin": origin, "x": 0, "y": 0});
        self.cmd(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "pointer", "id": "mouse",
                "parameters": {"pointerType": "mouse"}, "actions": [move_to]}]})),
        )
        .await;
    }

    pub async fn set_window(&self, width: u32, height: u32) {
        self.cmd(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// A Chrome DevTools command (for emulating a dark colour scheme).
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
        .await
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let b64 = self.cmd("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("base64 PNG")
    }

    /// A PNG of one element.
    pub async fn element_screenshot(&self, e: &Element) -> Vec<u8> {
        let b64 = self
            .cmd("GET", &format!("/element/{}/screenshot", e.0), None)
            .await;
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("base64 PNG")
    }

    /// The browser console's messages since the last call (errors include CSP violations).
    pub async fn console_errors(&self) -> Vec<String> {
        let v = self
            .try_cmd("POST", "/se/log", Some(json!({"type": "browser"})))
            .await;
        v["value"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .filter(|e| e["level"] == "SEVERE")
                    .filter_map(|e| e["message"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Best effort: closing the session ends Chromium; then the driver itself.
        if !self.session.is_empty() {
            let url = format!("{}/session/{}", self.base, self.session);
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(rt) = rt {
                    rt.block_on(async {
                        let c = agentnotify_relay_proto::tls::plain_http_client().build();
                        if let Ok(c) = c {
                            let _ = c.delete(url).timeout(Duration::from_secs(10)).send().await;
                        }
                    });
                }
            })
            .join();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
