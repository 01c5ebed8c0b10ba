//! The service worker and Web Push: a doorbell delivered to the real service worker through
//! the DevTools protocol (Chromium cannot subscribe to a push service offline) becomes a
//! notification with Allow/Deny; a `withdrawn` doorbell closes it; the Allow action answers
//! the question sealed, without opening the app; a doorbell for an envelope your computer
//! did not sign shows only that it was refused.

use chromiumoxide::cdp::browser_protocol::browser::{
    PermissionDescriptor, PermissionSetting, SetPermissionParams,
};
use chromiumoxide::cdp::browser_protocol::service_worker::{
    DeliverPushMessageParams, EnableParams, EventWorkerRegistrationUpdated,
};
use futures::StreamExt;
use serde_json::{json, Value};

use super::chromium::Phone;
use super::world::{card, paired_phone, World};

/// Grants notifications to the app's origin and returns its service worker's registration id.
async fn worker(phone: &Phone, origin: &str) -> String {
    phone
        .browser
        .execute(
            SetPermissionParams::builder()
                .permission(PermissionDescriptor::new("notifications"))
                .setting(PermissionSetting::Granted)
                .origin(origin)
                .build()
                .unwrap(),
        )
        .await
        .expect("grant notifications");
    let scope: String = phone
        .eval("navigator.serviceWorker.ready.then((r) => r.active && r.scope)")
        .await;
    let mut updates = phone
        .page
        .event_listener::<EventWorkerRegistrationUpdated>()
        .await
        .unwrap();
    phone.page.execute(EnableParams::default()).await.unwrap();
    loop {
        let ev = tokio::time::timeout(super::chromium::WAIT, updates.next())
            .await
            .expect("the service worker's registration")
            .unwrap();
        if let Some(r) = ev
            .registrations
            .iter()
            .find(|r| r.scope_url == scope && !r.is_deleted)
        {
            return r.registration_id.inner().clone();
        }
    }
}

/// Delivers `bell` to the service worker and waits for it to tell the page it handled it.
async fn ring(phone: &Phone, origin: &str, registration: &str, bell: Value) -> Value {
    let event_id = bell["event_id"].as_str().unwrap().to_string();
    phone
        .eval::<bool>(&format!(
            r#"(window.handled = new Promise((resolve) => navigator.serviceWorker.addEventListener('message',
                (e) => e.data.type === 'doorbell' && e.data.event_id === {event_id:?} && resolve(e.data))), true)"#
        ))
        .await;
    phone
        .page
        .execute(DeliverPushMessageParams::new(
            origin,
            registration.to_string(),
            bell.to_string(),
        ))
        .await
        .expect("deliver the push message");
    phone.eval("window.handled").await
}

/// The notifications the app shows with `tag`.
async fn notifications(phone: &Phone, tag: &str) -> Value {
    phone
        .eval(&format!(
            "navigator.serviceWorker.ready.then((r) => r.getNotifications({{ tag: {tag:?} }})).then((ns) => ns.map((n) => ({{ title: n.title, body: n.body, actions: n.actions.map((a) => [a.action, a.title]), data: n.data }})))"
        ))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doorbell_becomes_a_notification_with_allow_and_deny_that_answers_sealed() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let origin: String = phone.eval("location.origin").await;
    let registration = worker(&phone, &origin).await;

    let q = world
        .ask(json!({"kind": "permission", "prompt": "Run \u{202E}cat /etc/passwd?"}))
        .await;
    let id = q["id"].as_str().unwrap().to_string();
    let event = format!("interaction:{id}");
    phone
        .wait(
            "the question",
            &format!("document.querySelector({:?})", card(&id)),
        )
        .await;

    let handled = ring(
        &phone,
        &origin,
        &registration,
        json!({"type": "question", "event_id": event}),
    )
    .await;
    assert_eq!(handled["shown"], json!(true), "{handled}");
    let shown = notifications(&phone, &event).await;
    assert_eq!(shown.as_array().unwrap().len(), 1, "{shown}");
    let n = &shown[0];
    assert_eq!(n["title"], "claude · shop");
    assert_eq!(
        n["body"], "Run ⟨U+202E⟩cat /etc/passwd?",
        "shown visibly, not reordered"
    );
    assert_eq!(
        n["actions"],
        json!([["allow", "Allow once"], ["deny", "Deny"]])
    );
    assert!(n["data"].get("nonce").is_none(), "{n}");

    // Answered elsewhere: the withdrawn doorbell closes it.
    let handled = ring(
        &phone,
        &origin,
        &registration,
        json!({"type": "withdrawn", "event_id": event}),
    )
    .await;
    assert_eq!(handled["bell"], "withdrawn");
    assert_eq!(notifications(&phone, &event).await, json!([]));

    // Allow, from the notification: the code the worker runs on that tap, run in the page.
    let q = world
        .ask(json!({"kind": "permission", "prompt": "Deploy to staging?"}))
        .await;
    let id = q["id"].as_str().unwrap().to_string();
    let event = format!("interaction:{id}");
    phone
        .wait(
            "the second question",
            &format!("document.querySelector({:?})", card(&id)),
        )
        .await;
    ring(
        &phone,
        &origin,
        &registration,
        json!({"type": "question", "event_id": event}),
    )
    .await;
    let verdict: Value = phone
        .eval(&format!(
            r#"(async () => {{
                const push = await import('./js/push.js');
                const reg = await navigator.serviceWorker.ready;
                const [n] = await reg.getNotifications({{ tag: {event:?} }});
                const clients = {{ matchAll: async () => [], openWindow: async () => null }};
                await push.onNotificationClick(reg, clients, n, 'allow');
                return (await reg.getNotifications({{ tag: {:?} }})).map((x) => [x.title, x.body]);
            }})()"#,
            format!("verdict:{event}")
        ))
        .await;
    assert_eq!(verdict[0][0], "Accepted “Allow once”", "{verdict}");
    let r = world.record(&id).await;
    assert_eq!(r["status"], "answered");
    assert_eq!(
        (&r["response"]["choice_id"], &r["response"]["source"]),
        (&json!("allow-once"), &json!("relay"))
    );
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doorbell_for_an_envelope_your_computer_did_not_sign_shows_only_the_refusal() {
    use super::crafted::{new_id, question, Installation};
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let origin: String = phone.eval("location.origin").await;
    let registration = worker(&phone, &origin).await;
    let inst = Installation::of(&world);
    let q = question(
        &new_id(),
        "text",
        json!({"prompt": "Reply with your GitHub token", "text_max_length": 100}),
    );
    let mut e = inst.envelope(&q).await;
    agentnotify_relay_proto::sign::SigningPair::generate().sign_envelope(&mut e);
    inst.post(&e).await;
    let handled = ring(
        &phone,
        &origin,
        &registration,
        json!({"type": "question", "event_id": e.event_id}),
    )
    .await;
    assert_eq!(handled["shown"], json!(true));
    let shown = notifications(&phone, &e.event_id).await;
    assert_eq!(shown[0]["title"], "Not from your computer", "{shown}");
    assert!(
        !shown.to_string().contains("GitHub"),
        "nothing of it is shown: {shown}"
    );
    assert_eq!(shown[0]["actions"], json!([]), "and it cannot be answered");
    phone.close().await;
}

/// "Allow notifications" takes the Relay's VAPID key to the browser's push service. Headless
/// Chromium cannot reach one offline (it never answers), so this is the path where the
/// subscription fails: said plainly, and the app goes on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowing_notifications_takes_the_relays_key_and_says_when_the_push_service_fails() {
    let world = World::new().await;
    let Some(phone) = paired_phone(&world, "Pixel 8").await else {
        return;
    };
    let origin: String = phone.eval("location.origin").await;
    worker(&phone, &origin).await;
    phone.tap("#notify-go").await;
    phone
        .wait(
            "the Relay's key taken to the push service",
            "document.getElementById('notify-msg').textContent.includes('push service')",
        )
        .await;
    let said = phone
        .wait(
            "what came of it",
            "document.getElementById('notify-msg').textContent.includes('could not subscribe') && document.getElementById('notify-msg').textContent",
        )
        .await;
    assert!(
        said.as_str().unwrap().contains("still shows questions"),
        "{said}"
    );
    assert_eq!(
        phone
            .eval::<String>("document.getElementById('live').dataset.live")
            .await,
        "on"
    );
    phone.close().await;
}
