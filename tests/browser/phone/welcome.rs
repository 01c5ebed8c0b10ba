//! Before pairing: the app says how to pair, drops a pairing code from the address bar the
//! moment it reads it, and explains a code it cannot use.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use super::chromium::Phone;
use super::world::AppOnly;

fn code(v: Value) -> String {
    format!("anp1.{}", URL_SAFE_NO_PAD.encode(v.to_string()))
}

fn key() -> String {
    URL_SAFE_NO_PAD.encode([7u8; 32])
}

#[tokio::test]
async fn unpaired_it_says_how_to_pair_and_explains_codes_it_cannot_use() {
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    phone
        .wait(
            "the pairing instructions",
            "!document.getElementById('welcome').hidden",
        )
        .await;
    let text: String = phone
        .eval("document.getElementById('welcome').innerText")
        .await;
    assert!(text.contains("agentnotify relay pair"), "{text}");
    phone.screenshot("phone-welcome.png").await;

    let cases = [
        ("not a code at all", "That is not a pairing link or code"),
        (
            &*code(
                json!({"installation_id": "i", "installation_public_key": key(), "pairing_secret": "s"}),
            ),
            "older agentnotify",
        ),
        (
            &*code(
                json!({"installation_id": "i", "installation_public_key": key(),
                "installation_signing_key": key(), "pairing_secret": "s",
                "expires_at": "2020-01-01T00:00:00Z"}),
            ),
            "This pairing code expired",
        ),
    ];
    for (pasted, says) in cases {
        phone.type_into("#paste", pasted).await;
        phone.tap("#paste-form button[type=submit]").await;
        let shown = phone
            .wait(
                "the reason the code is refused",
                &format!(
                    "!document.getElementById('banner').hidden && document.getElementById('banner-text').textContent.includes({says:?}) && document.getElementById('banner-text').textContent"
                ),
            )
            .await;
        assert!(shown.as_str().unwrap().contains(says), "{shown}");
    }
    phone.close().await;
}

#[tokio::test]
async fn a_pairing_link_leaves_the_address_bar_and_the_history_at_once() {
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    let c = code(
        json!({"relay_url": app.relay.url, "installation_id": "5f1e0c3a9b7d4e2f8a6c1b0d9e8f7a6b",
        "installation_public_key": key(), "installation_signing_key": key(),
        "pairing_secret": "secret-secret-secret", "expires_at": "2099-01-01T00:00:00Z"}),
    );
    phone
        .goto(&format!("{}/app/#pair={c}", app.relay.url))
        .await;
    phone
        .wait(
            "the pairing question",
            "!document.getElementById('pairing').hidden",
        )
        .await;
    let (href, len): (String, u32) = phone.eval("[location.href, history.length]").await;
    assert_eq!(
        href,
        format!("{}/app/", app.relay.url),
        "the code is gone from the address bar"
    );
    assert_eq!(len, 2, "about:blank and the app, with the code replaced");
    let what: String = phone
        .eval("document.getElementById('pair-what').textContent")
        .await;
    assert!(what.contains("5f1e0c3a"), "{what}");
    let stored: Value = phone
        .eval("JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})")
        .await;
    assert!(
        !stored.as_str().unwrap().contains("secret-secret"),
        "{stored}"
    );
    phone.close().await;
}

/// Chromium's own check: manifest, service worker and icons make the app installable (it
/// then offers "Add to home screen"); the icons are the sizes the manifest says.
#[tokio::test]
async fn the_app_is_installable() {
    use chromiumoxide::cdp::browser_protocol::page::GetInstallabilityErrorsParams;
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    let active: bool = phone
        .eval("navigator.serviceWorker.ready.then((r) => !!r.active)")
        .await;
    assert!(active, "the service worker is active");
    let errors = phone
        .page
        .execute(GetInstallabilityErrorsParams::default())
        .await
        .unwrap()
        .result
        .installability_errors;
    assert!(errors.is_empty(), "not installable: {errors:?}");
    let icons: Value = phone
        .eval(
            r#"(async () => {
                const m = await (await fetch('manifest.webmanifest')).json();
                const out = [m.display, m.start_url, m.scope];
                for (const i of m.icons.filter((i) => i.type === 'image/png')) {
                    const img = new Image();
                    img.src = i.src;
                    await img.decode();
                    out.push([i.sizes, `${img.naturalWidth}x${img.naturalHeight}`, i.purpose || 'any']);
                }
                return out;
            })()"#,
        )
        .await;
    assert_eq!(
        icons,
        json!([
            "standalone",
            "./",
            "./",
            ["192x192", "192x192", "any"],
            ["512x512", "512x512", "any"],
            ["512x512", "512x512", "maskable"]
        ])
    );
    phone.close().await;
}
