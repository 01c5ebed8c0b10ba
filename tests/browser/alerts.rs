//! The page's browser notifications (Notification API) in a real headless Chromium: a new
//! question raises one once permission is granted, and it closes once the question is settled
//! elsewhere. The page's `Notification` is wrapped (before the page loads) only to record what
//! the real one is asked to show and close.

use std::time::Duration;

use serde_json::json;

use crate::daemon::TestDaemon;
use crate::webdriver::{Browser, Driver};

const WAIT: Duration = Duration::from_secs(15);

/// Records every notification the page creates and closes, passing everything to the real API.
const RECORDER: &str = r#"
(() => {
  const Real = window.Notification;
  if (!Real) return;
  window.__shown = [];
  window.__closed = [];
  class Recorded extends Real {
    constructor(title, options) {
      super(title, options);
      const tag = options && options.tag;
      window.__shown.push({ title, body: options && options.body, tag });
      const close = this.close.bind(this);
      this.close = () => { window.__closed.push(tag); close(); };
    }
    static get permission() { return Real.permission; }
    static requestPermission(...a) { return Real.requestPermission(...a); }
  }
  window.Notification = Recorded;
})();
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_question_raises_a_browser_notification_that_closes_when_settled() {
    let browser = match Browser::find() {
        Ok(b) => b,
        Err(why) => panic!("needs Chromium and chromedriver: {why}"),
    };
    let d = TestDaemon::start();
    let wd = Driver::start(&browser).await;
    wd.cdp(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": RECORDER }),
    )
    .await;
    wd.cdp(
        "Browser.grantPermissions",
        json!({"permissions": ["notifications"], "origin": d.url}),
    )
    .await;
    // Already pending when the page opens: on screen, so no notification for it.
    let before = d
        .ask(json!({"kind": "permission", "agent": "claude", "prompt": "already here"}))
        .await;
    wd.goto(&d.link()).await;
    wd.wait_for("#live[data-live='on']", WAIT).await;
    wd.wait_for(
        &format!("#pending li[data-id='{}']", before["id"].as_str().unwrap()),
        WAIT,
    )
    .await;
    assert_eq!(wd.script("return Notification.permission").await, "granted");
    let q = d
        .ask(
            json!({"kind": "permission", "agent": "claude", "project": "shop",
                    "prompt": "Bash: rm -rf build"}),
        )
        .await;
    let tag = format!("agentnotify-{}", q["id"].as_str().unwrap());
    wd.wait_until(
        &format!("window.__shown.some(s => s.tag === '{tag}')"),
        WAIT,
    )
    .await;
    let shown = wd.script("return window.__shown").await;
    let shown = shown.as_array().unwrap();
    assert_eq!(shown.len(), 1, "only the new question: {shown:?}");
    assert_eq!(shown[0]["title"], "Claude needs your answer in shop");
    assert_eq!(shown[0]["body"], "Bash: rm -rf build");
    // Answered elsewhere: the notification closes.
    d.answer_as(&q, "deny", "cli").await;
    wd.wait_until(&format!("window.__closed.includes('{tag}')"), WAIT)
        .await;
}
