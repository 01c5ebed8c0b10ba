//! How fast the phone app is, end to end through the real broker and Relay on loopback: a
//! question opened at the broker until its card is on the phone, and a tap on the phone until
//! the hook that asked has printed its decision and exited (docs/BENCHMARKS.md).

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::world::{card, paired_phone, quiet, settled_card, World};
use crate::support::{fixture, HOOK};

const ROUNDS: usize = 12;

fn p50(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// A measurement, run on its own (other browsers starting beside it would be what it
/// measures): `cargo test --test browser phone::timing -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run it alone with --ignored"]
async fn a_question_reaches_the_phone_and_a_tap_reaches_the_hook_in_milliseconds() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    quiet(&phone).await;

    let mut visible = Vec::new();
    for i in 0..ROUNDS {
        let t = Instant::now();
        let q = world
            .ask(json!({"kind": "permission", "prompt": format!("Timing {i}")}))
            .await;
        let id = q["id"].as_str().unwrap();
        phone
            .wait(
                "the card",
                &format!("document.querySelector({:?})", card(id)),
            )
            .await;
        visible.push(t.elapsed());
    }

    let mut answered = Vec::new();
    let payload = fixture("claude-bash.json");
    for i in 0..ROUNDS {
        let body = payload.replace("npm ci", &format!("npm ci # {i}"));
        let mut hook = world
            .home
            .cmd(HOOK)
            .args(["claude", "ask-permission"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        hook.stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let id = phone
            .wait(
                "the hook's question",
                &format!("[...document.querySelectorAll('#cards li.card[data-state=open]')].find((c) => c.innerText.includes('# {i}'))?.dataset.id"),
            )
            .await;
        let id = id.as_str().unwrap().to_string();
        settled_card(&phone, &id).await;
        let button = format!("{} button[data-choice='allow-once']", card(&id));
        let target = phone.page.find_element(button).await.unwrap();
        target.scroll_into_view().await.unwrap();
        let exited = tokio::task::spawn_blocking(move || {
            let mut out = String::new();
            hook.stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            hook.wait().unwrap();
            (SystemTime::now(), out)
        });
        // The tap's moment as the page saw it (the DevTools click itself takes a few round
        // trips before the event fires), on the same wall clock as the hook's exit.
        phone
            .eval::<bool>("(window.tapAt = null, document.addEventListener('click', () => { window.tapAt = performance.timeOrigin + performance.now(); }, { capture: true, once: true }), true)")
            .await;
        target.click().await.unwrap();
        let (done, out) = exited.await.unwrap();
        assert!(out.contains("\"allow\""), "{out}");
        let tap: f64 = phone.eval("window.tapAt").await;
        let exit = done.duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1000.0;
        let took = Duration::from_secs_f64(((exit - tap) / 1000.0).max(0.0));
        answered.push(took);
    }
    let (v, a) = (p50(&visible), p50(&answered));
    eprintln!(
        "phone app, {ROUNDS} rounds: question opened -> on the phone p50 {v:?} (max {:?}); tap -> hook exit p50 {a:?} (max {:?})",
        visible.iter().max().unwrap(),
        answered.iter().max().unwrap()
    );
    assert!(
        v <= Duration::from_millis(100),
        "question -> phone p50 {v:?}"
    );
    assert!(
        a <= Duration::from_millis(100),
        "tap -> hook exit p50 {a:?}"
    );
    phone.close().await;
}
