//! A phone: headless Chromium emulating a Pixel-sized touch screen, driven over the DevTools
//! protocol with chromiumoxide (CDP gives what WebDriver does not: notification permissions,
//! service worker registrations and push delivery, device metrics).

use std::path::PathBuf;
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use chromiumoxide::cdp::browser_protocol::network::SetUserAgentOverrideParams;
use chromiumoxide::cdp::browser_protocol::target::SetAutoAttachParams;
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::page::{Page, ScreenshotParams};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A Chromium on Android, so the page sees a phone.
const PHONE_UA: &str = "Mozilla/5.0 (Linux; Android 15; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Mobile Safari/537.36";

/// The emulated screen, in CSS pixels.
const SCREEN: (i64, i64) = (412, 915);

/// How long any one wait for the page may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(20);

/// Chromium (`CHROME_BIN` overrides PATH), installed first when missing.
fn chromium() -> Result<PathBuf, String> {
    Ok(std::env::var_os("CHROME_BIN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .unwrap_or_else(|| crate::provision::require(&crate::provision::CHROMIUM)))
}

/// One browser with one page, a fresh profile each time.
pub struct Phone {
    pub browser: Browser,
    pub page: Page,
    handler: tokio::task::JoinHandle<()>,
    _profile: tempfile::TempDir,
}

impl Phone {
    /// A fresh phone (Chromium is installed first when missing; never `None`).
    pub async fn launch() -> Option<Phone> {
        let chromium = match chromium() {
            Ok(c) => c,
            Err(why) => panic!("the phone app's browser tests need Chromium: {why}"),
        };
        let profile = tempfile::tempdir().expect("a browser profile folder");
        let config = BrowserConfig::builder()
            .chrome_executable(chromium)
            .disable_default_args()
            .no_sandbox()
            .args([
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-dev-shm-usage",
                "--disable-quic",
                "--force-color-profile=srgb",
                "--lang=en-US",
            ])
            .user_data_dir(profile.path())
            .window_size(412, 915)
            .viewport(Viewport {
                width: 412,
                height: 915,
                device_scale_factor: Some(2.0),
                emulating_mobile: true,
                is_landscape: false,
                has_touch: true,
            })
            .request_timeout(Duration::from_secs(60))
            .build()
            .expect("a browser configuration");
        let (browser, mut events) = Browser::launch(config).await.expect("start Chromium");
        let handler = tokio::spawn(async move { while events.next().await.is_some() {} });
        let page = browser.new_page("about:blank").await.expect("a page");
        // chromiumoxide holds every new target until a debugger lets it run, and lets
        // service workers wait forever: they start at once instead.
        page.execute(
            SetAutoAttachParams::builder()
                .auto_attach(true)
                .wait_for_debugger_on_start(false)
                .flatten(true)
                .build()
                .unwrap(),
        )
        .await
        .expect("let service workers start");
        page.set_user_agent(SetUserAgentOverrideParams::new(PHONE_UA))
            .await
            .expect("a phone's user agent");
        Some(Phone {
            browser,
            page,
            handler,
            _profile: profile,
        })
    }

    /// Emulates the phone's screen, `height` CSS pixels tall, `scale` device pixels each.
    async fn emulate(&self, height: i64, scale: f64) {
        self.page
            .execute(SetDeviceMetricsOverrideParams::new(
                SCREEN.0, height, scale, true,
            ))
            .await
            .expect("emulate the phone's screen");
    }

    /// Closes the browser and waits for it to exit (dropping it kills it instead).
    pub async fn close(mut self) {
        let _ = self.browser.close().await;
        let _ = self.browser.wait().await;
    }

    pub async fn goto(&self, url: &str) {
        self.page
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Evaluates `js` (an expression; a promise is awaited) and returns its JSON value.
    pub async fn eval<T: DeserializeOwned>(&self, js: &str) -> T {
        let r = tokio::time::timeout(WAIT, self.page.evaluate_expression(js))
            .await
            .unwrap_or_else(|_| panic!("the page did not finish evaluating in time: {js}"))
            .unwrap_or_else(|e| panic!("evaluating in the page failed: {e}\n{js}"));
        r.into_value()
            .unwrap_or_else(|e| panic!("unexpected result ({e}) of {js}"))
    }

    /// Waits until the expression `cond` is truthy, re-checking on every change of the page
    /// (a MutationObserver), and returns its value. Fails with the page's text on timeout.
    pub async fn wait(&self, what: &str, cond: &str) -> Value {
        let js = format!(
            r#"new Promise((resolve) => {{
                const check = () => {{
                    let v;
                    try {{ v = ({cond}); }} catch (_) {{ v = null; }}
                    if (v) {{ obs.disconnect(); resolve(v); }}
                }};
                const obs = new MutationObserver(check);
                obs.observe(document.documentElement, {{ subtree: true, childList: true, attributes: true, characterData: true }});
                check();
            }})"#
        );
        match tokio::time::timeout(WAIT, self.page.evaluate_expression(js)).await {
            Ok(Ok(v)) => v.into_value().unwrap_or(Value::Null),
            Ok(Err(e)) => panic!("waiting for {what}: {e}"),
            Err(_) => {
                let text: String = self.eval("document.body.innerText").await;
                panic!("timed out waiting for {what}; the page shows:\n{text}")
            }
        }
    }

    /// Taps the element `selector` (a pointer click at its centre, as a finger would).
    pub async fn tap(&self, selector: &str) {
        let e = self
            .page
            .find_element(selector)
            .await
            .unwrap_or_else(|e| panic!("no element {selector}: {e}"));
        e.scroll_into_view().await.ok();
        e.click()
            .await
            .unwrap_or_else(|e| panic!("tap {selector}: {e}"));
    }

    /// Types `text` into the element `selector`, as a keyboard's text input would (any
    /// script, not only the keys of a US layout).
    pub async fn type_into(&self, selector: &str, text: &str) {
        let e = self
            .page
            .find_element(selector)
            .await
            .unwrap_or_else(|e| panic!("no element {selector}: {e}"));
        e.focus()
            .await
            .unwrap_or_else(|e| panic!("focus {selector}: {e}"));
        self.page
            .execute(InsertTextParams::new(text))
            .await
            .unwrap_or_else(|e| panic!("type into {selector}: {e}"));
    }

    /// Fails if anything is wider than the screen (a phone page never scrolls sideways).
    pub async fn assert_fits(&self, what: &str) {
        let wide: Value = self
            .eval(
                r#"(() => {
                    const w = document.documentElement.clientWidth;
                    return [...document.querySelectorAll('body *')]
                        .filter((e) => e.getBoundingClientRect().right > w + 1)
                        .map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
                })()"#,
            )
            .await;
        assert_eq!(wide, serde_json::json!([]), "{what}: wider than the screen");
    }

    /// A screenshot of the whole page (phone-sized), kept as `name` in
    /// `AGENTNOTIFY_SCREENSHOT_DIR` when set (the ones in `docs/` come from
    /// `AGENTNOTIFY_SCREENSHOT_DIR=docs cargo test --test browser phone::`).
    pub async fn screenshot(&self, name: &str) {
        self.assert_fits(name).await;
        // The whole page at the phone's width (one device pixel per CSS pixel keeps the files
        // small), then the phone's screen again (chromiumoxide's own full-page capture drops
        // the mobile emulation).
        let height = self
            .eval::<f64>("document.documentElement.scrollHeight")
            .await
            .ceil() as i64;
        self.emulate(height.max(SCREEN.1), 1.0).await;
        let shot = self
            .page
            .screenshot(
                ScreenshotParams::builder()
                    .capture_beyond_viewport(true)
                    .build(),
            )
            .await;
        self.emulate(SCREEN.1, 2.0).await;
        let png = shot.expect("a screenshot");
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5_000,
            "{name} is a real PNG"
        );
        if let Some(dir) = std::env::var_os("AGENTNOTIFY_SCREENSHOT_DIR") {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), png).expect("write the screenshot");
        }
    }
}

impl Drop for Phone {
    fn drop(&mut self) {
        self.handler.abort();
    }
}
