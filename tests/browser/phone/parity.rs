//! The phone's rendering against the model's, differentially: the phone cuts sealed question
//! text itself (`app/js/render.js`, with the browser's Unicode tables), the broker and the
//! terminal cut it with `agentnotify_model::render`. A person must see the same thing on
//! every surface (SPEC §13.2), so the two are compared on every code point's escaping, on
//! words built from letters of many scripts, and on random strings.

use agentnotify_model::render;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};

use super::chromium::Phone;
use super::world::AppOnly;

/// The code points each side shows by name, as inclusive `[first, last]` ranges.
fn rust_escaped_ranges() -> Vec<[u32; 2]> {
    let mut ranges: Vec<[u32; 2]> = Vec::new();
    for c in (0..=0x10FFFF).filter_map(char::from_u32) {
        if !render::is_escaped(c) {
            continue;
        }
        let cp = c as u32;
        match ranges.last_mut() {
            Some(last) if last[1] + 1 == cp => last[1] = cp,
            _ => ranges.push([cp, cp]),
        }
    }
    ranges
}

const ESCAPED_RANGES_JS: &str = r#"import('./js/render.js').then((r) => {
    const ranges = [];
    for (let cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        if (!r.isEscaped(String.fromCodePoint(cp))) continue;
        const last = ranges[ranges.length - 1];
        if (last && last[1] + 1 === cp) last[1] = cp; else ranges.push([cp, cp]);
    }
    return ranges;
})"#;

/// Letters of many scripts, with the Common and Inherited characters that join words, the
/// scripts UTS #39 lets mix (Han with Hiragana, Katakana, Hangul, Bopomofo), and look-alikes.
const LETTERS: &[char] = &[
    'a', 'Z', 'é', 'Ａ', 'а', 'Ж', 'α', 'Ω', 'ب', 'א', 'क', 'ক', 'ก', 'ա', 'ა', 'Ꭰ', 'ᐁ', 'ሀ',
    '日', 'の', 'カ', 'ｶ', '한', 'ㄅ', '𐌀', 'ᚠ', 'ܐ', 'ꓐ', '1', '٣', '\u{0301}', '\u{0300}', 'ー',
    '·', '_', '€',
];

/// Every word of one to three letters from a subset, and every pair from the whole set.
fn words() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in LETTERS {
        for b in LETTERS {
            out.push(format!("{a}{b}"));
        }
    }
    let few = &LETTERS[..16];
    for a in few {
        for b in few {
            for c in few {
                out.push(format!("{a}{b}{c}"));
            }
        }
    }
    out
}

/// Random strings from a mix of ranges: ASCII, Latin-1 and C1, general punctuation (bidi and
/// zero-width controls), Cyrillic and Greek, CJK, tags and variation selectors, emoji.
fn random_strings() -> Vec<String> {
    const RANGES: &[(u32, u32)] = &[
        (0x00, 0x7F),
        (0x80, 0xFF),
        (0x2000, 0x206F),
        (0x0370, 0x04FF),
        (0x3040, 0x30FF),
        (0x4E00, 0x4E2F),
        (0xAC00, 0xAC2F),
        (0xFE00, 0xFE0F),
        (0xE0000, 0xE007F),
        (0x1F600, 0x1F64F),
        (0x0600, 0x06FF),
        (0x0900, 0x097F),
    ];
    let mut rng = StdRng::seed_from_u64(0x132);
    (0..2_000)
        .map(|_| {
            let len = rng.random_range(1..24);
            (0..len)
                .filter_map(|_| {
                    let (lo, hi) = RANGES[rng.random_range(0..RANGES.len())];
                    char::from_u32(rng.random_range(lo..=hi))
                })
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn the_phone_escapes_exactly_the_code_points_the_model_escapes() {
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    let page: Vec<[u32; 2]> = phone.eval(ESCAPED_RANGES_JS).await;
    let model = rust_escaped_ranges();
    let count: u32 = model.iter().map(|[a, b]| b - a + 1).sum();
    assert!(
        count > 4_000,
        "the model escapes controls, bidi controls and default ignorables ({count})"
    );
    let show = |r: &[[u32; 2]]| {
        r.iter()
            .map(|[a, b]| format!("{a:04X}-{b:04X}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        show(&page),
        show(&model),
        "the phone and the model must show the same code points by name"
    );
    phone.close().await;
}

#[tokio::test]
async fn the_phone_cuts_words_and_random_text_exactly_as_the_model() {
    let app = AppOnly::start();
    let Some(phone) = Phone::launch().await else {
        return;
    };
    phone.goto(&app.url()).await;
    let mut cases = words();
    cases.extend(random_strings());
    // Words inside a sentence too, so word breaks and merging of plain runs are compared.
    cases.extend(words().chunks(7).map(|w| w.join(" ")).take(300));
    let page: Vec<Value> = phone
        .eval(&format!(
            "import('./js/render.js').then((r) => ({}).map((s) => [r.renderVisible(s), r.displaySegments(s)]))",
            json!(cases)
        ))
        .await;
    assert_eq!(page.len(), cases.len());
    let mut marked = 0;
    let mut differ = Vec::new();
    for (case, got) in cases.iter().zip(&page) {
        let segments = serde_json::to_value(render::display_segments(case)).unwrap();
        marked += segments
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["kind"] == "mixed_script_word")
            .count();
        let want = json!([render::render_visible(case), segments]);
        if *got != want {
            differ.push(format!(
                "{:?}\n  phone: {got}\n  model: {want}",
                case.escape_unicode().to_string()
            ));
        }
    }
    assert!(
        marked > 500,
        "the corpus holds many mixed-script words ({marked})"
    );
    assert!(
        differ.is_empty(),
        "{} of {} strings render differently on the phone:\n{}",
        differ.len(),
        cases.len(),
        differ
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    phone.close().await;
}
