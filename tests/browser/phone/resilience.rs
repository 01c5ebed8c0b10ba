//! When things happen elsewhere or go wrong: a question answered elsewhere leaves the phone,
//! a tap on a card that just appeared is ignored, the Relay goes down and comes back, the
//! phone is removed on the computer.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::world::{answer_on, card, paired_phone, quiet, verdict_on, Relay, World};
use crate::support::Api;

fn allow_deny(prompt: &str) -> Value {
    json!({"kind": "permission", "prompt": prompt})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_elsewhere_the_question_leaves_the_phone_within_a_second() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let q = world.ask(allow_deny("Answer me at the desk")).await;
    let id = q["id"].as_str().unwrap();
    phone
        .wait(
            "the question",
            &format!("document.querySelector({:?})", card(id)),
        )
        .await;
    let t = Instant::now();
    let (status, v) = world
        .api
        .respond(&q, Api::answer(&q, "cli-1", "deny"))
        .await;
    assert_eq!(status, 200, "{v}");
    let notice = phone
        .wait(
            "the card gone and a word why",
            &format!(
                "!document.querySelector({:?}) && !document.getElementById('banner').hidden && document.getElementById('banner-text').textContent",
                card(id)
            ),
        )
        .await;
    let took = t.elapsed();
    assert!(
        notice
            .as_str()
            .unwrap()
            .contains("answered or withdrawn elsewhere"),
        "{notice}"
    );
    assert!(
        took < Duration::from_secs(1),
        "the question lingered {took:?} after it was answered"
    );
    eprintln!("answered elsewhere -> gone from the phone: {took:?}");
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tap_on_a_card_that_just_appeared_is_ignored() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let q = world.ask(allow_deny("Did you read me?")).await;
    let id = q["id"].as_str().unwrap();
    let sel = card(id);
    phone
        .wait(
            "the card, still guarded",
            &format!("document.querySelector({sel:?})?.hasAttribute('data-guard')"),
        )
        .await;
    phone
        .tap(&format!("{sel} button[data-choice='allow-once']"))
        .await;
    let msg: String = phone
        .eval(&format!(
            "document.querySelector({sel:?}).querySelector('.card-msg').textContent"
        ))
        .await;
    assert!(msg.contains("just appeared or moved"), "{msg}");
    assert_eq!(
        world.record(id).await["status"],
        "pending",
        "the guarded tap answered nothing"
    );
    answer_on(&phone, id, "button[data-choice='allow-once']").await;
    assert_eq!(verdict_on(&phone, id).await.0, "accepted");
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_down_is_said_clearly_and_the_app_recovers_on_its_own() {
    let mut world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let kept: bool = phone
        .eval("navigator.serviceWorker.ready.then(() => caches.open('agentnotify-app-v1')).then((c) => c.match('index.html')).then((r) => !!r)")
        .await;
    assert!(kept, "the service worker keeps the app for offline use");
    let port = world.relay.port();
    world.relay.stop();
    let said = phone
        .wait(
            "the Relay unreachable",
            "document.getElementById('live').dataset.live === 'off' && !document.getElementById('banner').hidden && document.getElementById('banner-text').textContent",
        )
        .await;
    assert!(
        said.as_str().unwrap().contains("The Relay is unreachable"),
        "{said}"
    );
    quiet(&phone).await;
    phone.screenshot("phone-offline.png").await;

    // Opened again while the Relay is still down: the app comes from the service worker's
    // copy and says the same.
    let url: String = phone.eval("location.href").await;
    phone.goto(&url).await;
    let said = phone
        .wait(
            "the Relay unreachable, after reopening",
            "!document.getElementById('banner').hidden && document.getElementById('banner-text').textContent",
        )
        .await;
    assert!(
        said.as_str().unwrap().contains("The Relay is unreachable"),
        "{said}"
    );

    world.relay = Relay::start(&world.home, port);
    phone
        .wait(
            "live again, the message gone",
            "document.getElementById('live').dataset.live === 'on' && document.getElementById('banner').hidden",
        )
        .await;
    let q = world.ask(allow_deny("After the outage")).await;
    let id = q["id"].as_str().unwrap();
    answer_on(&phone, id, "button[data-choice='allow-once']").await;
    assert_eq!(verdict_on(&phone, id).await.0, "accepted");
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_removed_on_the_computer_is_told_so_and_offered_to_pair_again() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let device = world
        .devices()
        .into_iter()
        .find(|d| d["name"] == "Pixel 8")
        .unwrap();
    let id = device["device_id"].as_str().unwrap();
    let (code, out, err) = super::world::run(&world.home, &["relay", "devices", "revoke", id]);
    assert_eq!(code, 0, "{out} {err}");
    let said = phone
        .wait(
            "the phone told it was removed",
            "document.getElementById('banner').dataset.code === 'device_removed' && document.getElementById('banner-text').textContent",
        )
        .await;
    assert!(said.as_str().unwrap().contains("removed"), "{said}");
    let action: String = phone
        .eval("document.getElementById('banner-action').textContent")
        .await;
    assert_eq!(action, "Pair again");
    phone.tap("#banner-action").await;
    phone
        .wait(
            "the pairing instructions",
            "!document.getElementById('welcome').hidden",
        )
        .await;
    // Paired again with a fresh code (the link opened in the app already open: only its
    // fragment changes), it gets questions again.
    phone
        .eval::<bool>(&format!(
            "(location.assign({:?}), true)",
            world.pairing_link()
        ))
        .await;
    phone
        .wait(
            "the pairing question",
            "!document.getElementById('pairing').hidden",
        )
        .await;
    phone.tap("#pair-go").await;
    phone
        .wait(
            "live again",
            "document.getElementById('live').dataset.live === 'on'",
        )
        .await;
    let q = world
        .ask(json!({"kind": "permission", "prompt": "Back again?"}))
        .await;
    let id = q["id"].as_str().unwrap();
    answer_on(&phone, id, "button[data-choice='allow-once']").await;
    assert_eq!(verdict_on(&phone, id).await.0, "accepted");
    phone.close().await;
}
