//! The web UI in a real headless Chromium, driven over WebDriver against a real daemon: the
//! one-time link, questions appearing live, one-click answers of every kind, answers from
//! other surfaces, withdrawing, a stale page, keyboard use, and screenshots.
//!
//! Needs Debian's `chromium` and `chromium-driver`, which `tests/support/provision.rs`
//! installs when they are missing (or the test fails saying what to install). Set `AGENTNOTIFY_SCREENSHOT_DIR` to keep the
//! screenshots (the ones in `docs/` come from `AGENTNOTIFY_SCREENSHOT_DIR=docs cargo test
//! --test browser`).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::daemon::TestDaemon;
use crate::webdriver::{Browser, Driver};

/// Upper bound for anything the page must show; reached only when something is broken.
pub const WAIT: Duration = Duration::from_secs(15);

/// The browser, installed first when missing; the test fails if it cannot be (never skips).
pub fn browser_or_skip() -> Option<Browser> {
    match Browser::find() {
        Ok(b) => Some(b),
        Err(why) => panic!("the real-browser test needs Chromium and chromedriver: {why}"),
    }
}

pub fn card(q: &Value) -> String {
    format!("#pending li[data-id='{}']", q["id"].as_str().unwrap())
}

/// The card once its click guard is over (it ignores clicks for a second after it appears
/// or moves).
pub fn settled(q: &Value) -> String {
    format!("{}:not([data-guard])", card(q))
}

pub fn id(q: &Value) -> &str {
    q["id"].as_str().unwrap()
}

/// A fresh daemon and a browser signed in to its web UI with a one-time link, the page
/// listening live: where a test of the signed-in page starts.
pub async fn signed_in(browser: &Browser) -> (TestDaemon, Driver) {
    let d = TestDaemon::start();
    let wd = Driver::start(browser).await;
    wd.goto(&d.link()).await;
    wd.wait_for("#live[data-live='on']", WAIT).await;
    (d, wd)
}

/// One click on `q`'s "Allow once" once its click guard is over; checks that the broker
/// recorded the answer from the web and that the page logged no error.
pub async fn allow_once_from_the_page(d: &TestDaemon, wd: &Driver, q: &Value) {
    let allow = wd
        .wait_for(
            &format!("{} button[data-choice='allow-once']", settled(q)),
            WAIT,
        )
        .await;
    wd.click(&allow).await;
    let done = d.wait_done(id(q), 15).await;
    assert_eq!(done["status"], "answered");
    assert_eq!(done["response"]["source"], "web");
    let errors = wd.console_errors().await;
    assert!(errors.is_empty(), "browser console errors: {errors:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_every_kind_live_in_a_real_browser() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let d = TestDaemon::start();
    let wd = Driver::start(&browser).await;

    // Without a session the page says how to get one.
    wd.goto(&format!("{}/ui/", d.url)).await;
    wd.wait_text("#signin", "agentnotify ui", WAIT).await;

    // The one-time link signs the browser in and lands on /ui/, listening live.
    let link = d.link();
    wd.goto(&link).await;
    wd.wait_for("#live[data-live='on']", WAIT).await;
    assert!(
        wd.url().await.ends_with("/ui/"),
        "landed on {}",
        wd.url().await
    );
    wd.wait_for("#empty:not([hidden])", WAIT).await;

    // Permission: asked through the API, shown without a reload, answered with one click.
    let q = d
        .ask(
            json!({"kind": "permission", "agent": "claude", "project": "shop",
                    "prompt": "Bash: rm -rf build\n\nRemove the build directory"}),
        )
        .await;
    let allow_css = format!("{} button[data-choice='allow-once']", settled(&q));
    let allow = wd.wait_for(&allow_css, WAIT).await;
    // Text is read once the card has faded in (WebDriver reads only visible text).
    wd.wait_text(&allow_css, "Allow once", WAIT).await;
    wd.wait_text(&format!("{} pre.prompt", card(&q)), "rm -rf build", WAIT)
        .await;
    let meta = wd
        .wait_text(&format!("{} .meta", card(&q)), "left", WAIT)
        .await;
    assert!(meta.contains("claude") && meta.contains("shop"), "{meta}");
    wd.click(&allow).await;
    let done = d.wait_done(id(&q), 15).await;
    assert_eq!(done["status"], "answered");
    assert_eq!(done["response"]["source"], "web");
    assert_eq!(done["response"]["choice_id"], "allow-once");
    wd.wait_gone(&card(&q), WAIT).await;

    // Single choice, details visible.
    let q = d
        .ask(json!({"kind": "single_choice", "agent": "codex", "project": "shop",
                    "prompt": "Which database should the tests use?",
                    "choices": [{"id": "pg", "label": "Postgres", "detail": "Closest to production"},
                                {"id": "lite", "label": "SQLite", "detail": "Fast, in memory"},
                                {"id": "none", "label": "No database"}]}))
        .await;
    let lite_css = format!("{} button[data-choice='lite']", settled(&q));
    let lite = wd.wait_for(&lite_css, WAIT).await;
    let label = wd.wait_text(&lite_css, "Fast, in memory", WAIT).await;
    assert!(label.contains("SQLite"), "{label}");
    wd.click(&lite).await;
    let done = d.wait_done(id(&q), 15).await;
    assert_eq!(done["status"], "answered");
    assert_eq!(done["response"]["source"], "web");
    assert_eq!(done["response"]["choice_id"], "lite");

    // Text, in a bounded box whose counter shows the limit.
    let q = d
        .ask(
            json!({"kind": "text", "agent": "claude", "prompt": "Commit message?",
                    "text_max_length": 120}),
        )
        .await;
    let ta = wd.wait_for(&format!("{} textarea", card(&q)), WAIT).await;
    wd.wait_text(&format!("{} .counter", card(&q)), "0 / 120", WAIT)
        .await;
    assert_eq!(
        wd.script(&format!(
            "return document.querySelector(\"{} textarea\").maxLength",
            card(&q)
        ))
        .await,
        120
    );
    wd.type_into(&ta, "Fix the flaky login test").await;
    wd.wait_text(&format!("{} .counter", card(&q)), "24 / 120", WAIT)
        .await;
    let send = wd
        .wait_for(&format!("{} button[data-action='send']", settled(&q)), WAIT)
        .await;
    wd.click(&send).await;
    let done = d.wait_done(id(&q), 15).await;
    assert_eq!(done["status"], "answered");
    assert_eq!(done["response"]["source"], "web");
    assert_eq!(done["response"]["text"], "Fix the flaky login test");

    // Answered from another surface while shown: it leaves the list live, and says so.
    let q = d
        .ask(json!({"kind": "permission", "agent": "codex", "prompt": "git push origin main"}))
        .await;
    wd.wait_for(&card(&q), WAIT).await;
    assert_eq!(d.answer_as(&q, "deny", "cli").await.status, 200);
    wd.wait_gone(&card(&q), WAIT).await;
    wd.wait_text("#notice", "answered elsewhere (from cli)", WAIT)
        .await;

    // History shows who answered.
    wd.click(&wd.find("#tab-history").await.unwrap()).await;
    wd.wait_text(
        &format!("#history li[data-id='{}'] .outcome", id(&q)),
        "via cli",
        WAIT,
    )
    .await;
    wd.wait_text("#history li[data-status='answered'] .outcome", "via", WAIT)
        .await;
    let history = wd.text(&wd.find("#history").await.unwrap()).await;
    assert!(
        history.contains("Fix the flaky login test") && history.contains("via web"),
        "{history}"
    );
    wd.click(&wd.find("#tab-pending").await.unwrap()).await;

    // Withdraw cancels.
    let q = d
        .ask(json!({"kind": "permission", "agent": "claude", "prompt": "docker system prune -af"}))
        .await;
    let withdraw = wd
        .wait_for(
            &format!("{} button[data-action='withdraw']", settled(&q)),
            WAIT,
        )
        .await;
    wd.click(&withdraw).await;
    assert_eq!(d.wait_done(id(&q), 15).await["status"], "cancelled");
    wd.wait_gone(&card(&q), WAIT).await;

    // Nothing so far broke the CSP or threw (the signed-out start logged its expected 401s).
    let errors: Vec<String> = wd
        .console_errors()
        .await
        .into_iter()
        .filter(|e| !e.contains("401"))
        .collect();
    assert!(errors.is_empty(), "browser console errors: {errors:#?}");

    // A stale page (it stopped hearing events) answers something already answered: it gets
    // a clear message, and the first answer stands.
    wd.cdp("Network.enable", json!({})).await;
    wd.cdp(
        "Network.setBlockedURLs",
        json!({"urls": ["*/ui/api/events*"]}),
    )
    .await;
    let q = d
        .ask(json!({"kind": "permission", "agent": "claude", "prompt": "make deploy"}))
        .await;
    wd.goto(&format!("{}/ui/", d.url)).await;
    let allow = wd
        .wait_for(
            &format!("{} button[data-choice='allow-once']", settled(&q)),
            WAIT,
        )
        .await;
    assert_ne!(
        wd.script("return document.getElementById('live').dataset.live")
            .await,
        "on",
        "the event stream is blocked"
    );
    assert_eq!(d.answer_as(&q, "deny", "cli").await.status, 200);
    wd.click(&allow).await;
    wd.wait_text("#notice", "already answered elsewhere (from cli)", WAIT)
        .await;
    let record = d.get(id(&q)).await;
    assert_eq!(record["response"]["choice_id"], "deny");
    assert_eq!(record["response"]["source"], "cli");
    wd.cdp("Network.setBlockedURLs", json!({"urls": []})).await;
    let _ = wd.console_errors().await; // the blocked stream and the 409 were expected

    // Reusing the spent link in the signed-in tab just shows the page again (a tab without
    // the session gets "already used"; see the HTTP tests), and the secret leaves the address.
    wd.goto(&link).await;
    wd.wait_for("#live[data-live='on']", WAIT).await;
    assert!(wd.url().await.ends_with("/ui/"));
    let _ = wd.console_errors().await; // the refused exchange of the spent link was expected
}

/// SPEC §13 in the page: attack strings, a long body, multi-choice and Other, a lost reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_you_see_is_what_runs_in_a_real_browser() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let wd = Driver::start(&browser).await;
    crate::integrity::what_you_see_is_what_runs(&wd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_answers_by_keyboard_and_fits_light_dark_and_phone() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let wd = Driver::start(&browser).await;
    screenshots(&wd).await;
}

/// A clean daemon with realistic questions, photographed light, dark and at phone width;
/// also checks keyboard answering and that nothing overflows at 375 px.
async fn screenshots(wd: &Driver) {
    let d = TestDaemon::start();
    let done = d
        .ask(
            json!({"kind": "permission", "agent": "claude", "project": "shop-api",
                    "prompt": "Run a command in shop-api? — Run the whole test suite",
                    "body": "cargo test --workspace"}),
        )
        .await;
    d.answer_as(&done, "allow-once", "cli").await;
    wd.set_window(1000, 1600).await;
    wd.goto(&d.link()).await;
    wd.wait_for("#live[data-live='on']", WAIT).await;

    // Keyboard: focus an answer and press Enter.
    let q = d
        .ask(
            json!({"kind": "permission", "agent": "codex", "project": "infra",
                    "prompt": "Run a command in infra?", "body": "terraform plan -out=tfplan"}),
        )
        .await;
    wd.wait_for(&card(&q), WAIT).await;
    wd.script(&format!(
        "document.querySelector(\"{} button[data-choice='allow-once']\").focus()",
        card(&q)
    ))
    .await;
    wd.keys("\u{E007}").await;
    let r = d.wait_done(id(&q), 15).await;
    assert_eq!(
        r["response"]["source"], "web",
        "Enter on a focused answer sends it"
    );
    wd.wait_gone(&card(&q), WAIT).await;

    d.ask(json!({"kind": "text", "agent": "codex", "project": "infra",
                 "prompt": "What should the release notes headline say for v2.4?",
                 "text_max_length": 200}))
        .await;
    d.ask(json!({"kind": "single_choice", "agent": "claude", "project": "shop-web",
                 "prompt": "Which state library should the checkout page use?",
                 "choices": [
                     {"id": "zustand", "label": "Zustand", "detail": "Small hook-based store, little boilerplate"},
                     {"id": "redux", "label": "Redux Toolkit", "detail": "Established patterns, more setup"},
                     {"id": "context", "label": "React context", "detail": "No dependency; fine while state stays small"}]}))
        .await;
    d.ask(
        json!({"kind": "multi_choice", "agent": "claude", "project": "shop-web",
                 "prompt": "Which checks should run before the release?",
                 "choices": [
                     {"id": "unit", "label": "Unit tests"},
                     {"id": "e2e", "label": "End-to-end", "detail": "About 12 minutes"},
                     {"id": "a11y", "label": "Accessibility audit"}],
                 "min_selections": 1, "max_selections": 2, "allow_other": true}),
    )
    .await;
    let last = d
        .ask(json!({"kind": "permission", "agent": "claude", "project": "shop-api",
                    "prompt": "Run a command in shop-api? — Apply the pending migrations to production",
                    "body": "npm run db:migrate -- --env production \\\n  && npm run db:verify -- --env production \\\n  && curl -fsS https://shop-api.internal/health",
                    "choices": [
                        {"id": "allow-once", "label": "Allow once"},
                        {"id": "allow-always", "label": "Always allow",
                         "detail": "Also:\n- add allow rules: Bash(npm run db:migrate:*) (saved to localSettings)"},
                        {"id": "deny", "label": "Deny"}]}))
        .await;
    wd.wait_for(&format!("{} button", card(&last)), WAIT).await;
    wd.wait_text("#pending-count", "4", WAIT).await;

    let dir = std::env::var_os("AGENTNOTIFY_SCREENSHOT_DIR").map(PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let dir = dir.unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();
    let save = |name: &str, png: Vec<u8>| {
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
            "{name} is a real PNG"
        );
        std::fs::write(dir.join(name), png).unwrap();
    };

    if let Some(close) = wd.find("#notice-close").await {
        if wd
            .script("return !document.getElementById('notice').hidden")
            .await
            == true
        {
            wd.click(&close).await;
        }
    }
    wd.wait_until("document.getAnimations().length === 0", WAIT)
        .await;
    save("webui.png", wd.screenshot().await);
    wd.cdp(
        "Emulation.setEmulatedMedia",
        json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]}),
    )
    .await;
    save("webui-dark.png", wd.screenshot().await);
    wd.set_window(375, 812).await;
    let fits = wd
        .script("return document.documentElement.scrollWidth <= window.innerWidth")
        .await;
    assert_eq!(fits, true, "no horizontal scrolling at phone width");
    save("webui-phone.png", wd.screenshot().await);
    wd.cdp(
        "Emulation.setEmulatedMedia",
        json!({"features": [{"name": "prefers-color-scheme", "value": "light"}]}),
    )
    .await;
    wd.set_window(1000, 600).await;
    wd.click(&wd.find("#tab-history").await.unwrap()).await;
    wd.wait_text("#history", "via web", WAIT).await;
    save("webui-history.png", wd.screenshot().await);
    let errors = wd.console_errors().await;
    assert!(errors.is_empty(), "browser console errors: {errors:#?}");
}
