//! Everything a phone talks to, for real: a temp home with a broker (`agentnotify daemon`),
//! a Relay (`agentnotify relay serve`, which serves the app at `/app/`) and a provider with a
//! consenting route.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use serde_json::{json, Value};

use crate::support::{Api, Daemon, Home, AGENTNOTIFY};

/// A running `agentnotify relay serve`; killed on drop.
pub struct Relay {
    child: Child,
    pub url: String,
}

impl Relay {
    /// Starts the Relay on `port` (0: any) with its data in the home; a rate limit no test
    /// reaches.
    pub fn start(home: &Home, port: u16) -> Relay {
        let mut child = home
            .cmd(AGENTNOTIFY)
            .args(["relay", "serve", "--port", &port.to_string(), "--data"])
            .arg(home.path().join("relay-data"))
            .args(["--rate-limit", "100000", "--rate-burst", "100000"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start relay serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("relay did not say where it listens: {line:?}"))
            .to_string();
        Relay { child, url }
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Relay alone, serving the app: for the tests of the page's own modules.
pub struct AppOnly {
    pub relay: Relay,
    _home: Home,
}

impl AppOnly {
    pub fn start() -> AppOnly {
        let home = Home::new();
        AppOnly {
            relay: Relay::start(&home, 0),
            _home: home,
        }
    }

    /// The app's page.
    pub fn url(&self) -> String {
        format!("{}/app/", self.relay.url)
    }
}

pub struct World {
    pub home: Home,
    pub relay: Relay,
    _daemon: Daemon,
    pub api: Api,
}

impl World {
    /// Default settings: answers reach the broker over its long-poll, not its periodic poll.
    pub async fn new() -> World {
        let home = Home::new();
        let relay = Relay::start(&home, 0);
        let (code, out, err) = run(
            &home,
            &[
                "relay",
                "add",
                "home",
                "--url",
                &relay.url,
                "--include-message",
            ],
        );
        assert_eq!(code, 0, "relay add: {out} {err}");
        let daemon = Daemon::start(&home, &[]);
        let api = daemon.api(&home);
        World {
            home,
            relay,
            _daemon: daemon,
            api,
        }
    }

    /// A fresh pairing link from `agentnotify relay pair home`.
    pub fn pairing_link(&self) -> String {
        let (code, out, err) = run(&self.home, &["relay", "pair", "home", "--json"]);
        assert_eq!(code, 0, "relay pair: {out} {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["link"].as_str().unwrap().to_string()
    }

    /// The paired devices as the broker lists them.
    pub fn devices(&self) -> Vec<Value> {
        let (code, out, err) = run(&self.home, &["relay", "devices", "--json"]);
        assert_eq!(code, 0, "relay devices: {out} {err}");
        serde_json::from_str::<Value>(&out).unwrap()["devices"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Opens a question through the broker's API.
    pub async fn ask(&self, body: Value) -> Value {
        let mut body = body;
        for (k, v) in [
            ("agent", "claude"),
            ("project", "shop"),
            ("session_id", "s1"),
        ] {
            if body.get(k).is_none() {
                body[k] = json!(v);
            }
        }
        self.api.ask(body).await
    }

    /// The question's record as the broker has it.
    pub async fn record(&self, id: &str) -> Value {
        self.api.get(&format!("/v1/interactions/{id}")).await.1
    }
}

pub fn run(home: &Home, args: &[&str]) -> (i32, String, String) {
    let out = home
        .cmd(AGENTNOTIFY)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A phone paired with `world` through the link `relay pair` prints, named `name`.
pub async fn paired_phone(world: &World, name: &str) -> Option<super::chromium::Phone> {
    let phone = super::chromium::Phone::launch().await?;
    phone.goto(&world.pairing_link()).await;
    phone
        .wait(
            "the pairing question",
            "!document.getElementById('pairing').hidden",
        )
        .await;
    phone
        .eval::<Value>("document.getElementById('device-name').value = ''")
        .await;
    phone.type_into("#device-name", name).await;
    phone.tap("#pair-go").await;
    phone
        .wait(
            "the paired app, live",
            "!document.getElementById('panel-questions').hidden && document.getElementById('live').dataset.live === 'on'",
        )
        .await;
    Some(phone)
}

/// The selector of question `id`'s card.
pub fn card(id: &str) -> String {
    format!("#cards li.card[data-id='{id}']")
}

/// Waits until question `id`'s card is shown and past its click guard, then taps `button`
/// (a selector inside the card).
pub async fn answer_on(phone: &super::chromium::Phone, id: &str, button: &str) {
    settled_card(phone, id).await;
    phone.tap(&format!("{} {button}", card(id))).await;
}

/// Waits until question `id`'s card shows a verdict, and returns `[verdict, message]`.
pub async fn verdict_on(phone: &super::chromium::Phone, id: &str) -> (String, String) {
    let card = card(id);
    let v = phone
        .wait(
            "the verdict on the card",
            &format!("(() => {{ const c = document.querySelector({card:?}); return c && c.dataset.verdict && c.dataset.state === 'done' && [c.dataset.verdict, c.querySelector('.card-msg').textContent]; }})()"),
        )
        .await;
    (v[0].as_str().unwrap().into(), v[1].as_str().unwrap().into())
}

/// Says "Not now" to the install and notification offers and closes the notice, so a
/// screenshot shows the questions.
pub async fn quiet(phone: &super::chromium::Phone) {
    phone
        .eval::<bool>(
            "for (const id of ['install-later', 'notify-later']) { const b = document.getElementById(id); if (b.offsetParent) b.click(); } if (document.getElementById('banner').dataset.code === 'notice') document.getElementById('banner-action').click(); true",
        )
        .await;
}

/// Waits until question `id`'s card is past its click guard (and its arrival animation).
pub async fn settled_card(phone: &super::chromium::Phone, id: &str) {
    let card = card(id);
    phone
        .wait(
            "the card, past its click guard",
            &format!("(() => {{ const c = document.querySelector({card:?}); return c && !c.hasAttribute('data-guard'); }})()"),
        )
        .await;
}
