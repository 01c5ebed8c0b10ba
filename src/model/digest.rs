//! The request digest (SPEC §2.1, §13.4): binds an answer to exactly what the person saw.
//!
//! New questions carry digest v2, which also covers the body and the multi-choice and
//! "Other" bounds. Records stored before v2 keep their v1 digest (their `digest_version`
//! says which), and stay answerable: answers are compared with the stored digest.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{Choice, Kind};

/// The digest version new questions get.
pub const DIGEST_VERSION: u8 = 2;

/// The displayed fields of a question, after normalisation.
pub struct DigestInput<'a> {
    pub kind: Kind,
    pub agent: &'a str,
    pub project: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub prompt: &'a str,
    pub body: Option<&'a str>,
    pub choices: &'a [Choice],
    pub text_max_length: Option<u32>,
    /// `[min, max]` for `multi_choice`, else ignored.
    pub selections: Option<(u32, u32)>,
    /// The bound of an "Other" text when the question allows one, else `None`.
    pub other_max_length: Option<u32>,
}

/// The exact UTF-8 string that is hashed for v2 (SPEC §13.4).
///
/// serde_json's compact writer is exactly the encoding the spec asks for: it escapes only
/// `"`, `\` and U+0000–U+001F (short forms where they exist, otherwise lowercase `\u00xx`)
/// and writes everything else as raw UTF-8. The test vectors pin this down.
pub fn canonical(input: &DigestInput<'_>) -> String {
    let selections = match (input.kind, input.selections) {
        (Kind::MultiChoice, Some((min, max))) => json!([min, max]),
        _ => Value::Null,
    };
    let other = match input.kind {
        Kind::SingleChoice | Kind::MultiChoice => json!(input.other_max_length),
        _ => Value::Null,
    };
    json!([
        "agentnotify.interaction.v2",
        input.kind.as_str(),
        input.agent,
        input.project,
        input.session_id,
        input.prompt,
        input.body,
        choices(input),
        text_max(input),
        selections,
        other,
    ])
    .to_string()
}

/// The v1 canonical string (SPEC §2.1), kept for tests and records made before v2.
pub fn canonical_v1(input: &DigestInput<'_>) -> String {
    json!([
        "agentnotify.interaction.v1",
        input.kind.as_str(),
        input.agent,
        input.project,
        input.session_id,
        input.prompt,
        choices(input),
        text_max(input),
    ])
    .to_string()
}

fn choices(input: &DigestInput<'_>) -> Vec<Value> {
    input
        .choices
        .iter()
        .map(|c| json!([c.id, c.label, c.detail]))
        .collect()
}

fn text_max(input: &DigestInput<'_>) -> Value {
    match input.kind {
        Kind::Text => json!(input.text_max_length),
        _ => Value::Null,
    }
}

/// `lowercase_hex(SHA-256(canonical))`, digest v2.
pub fn request_digest(input: &DigestInput<'_>) -> String {
    hex_sha256(canonical(input).as_bytes())
}

/// Lowercase hex SHA-256 of some bytes.
pub fn hex_sha256(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTORS_V1: &str = include_str!("../../tests/data/digest.json");
    const VECTORS_V2: &str = include_str!("../../tests/data/digest-v2.json");

    fn each_vector(doc: &str, check: impl Fn(&str, &DigestInput<'_>, &Value)) {
        let doc: Value = serde_json::from_str(doc).unwrap();
        let vectors = doc["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 5);
        for v in vectors {
            let input = &v["input"];
            let kind = Kind::parse(input["kind"].as_str().unwrap()).unwrap();
            let choices: Vec<Choice> = serde_json::from_value(input["choices"].clone()).unwrap();
            let n = |k: &str| input[k].as_u64().map(|n| n as u32);
            let other = match input["allow_other"].as_bool() {
                Some(true) => Some(n("other_max_length").unwrap_or(500)),
                _ => None,
            };
            let di = DigestInput {
                kind,
                agent: input["agent"].as_str().unwrap(),
                project: input["project"].as_str(),
                session_id: input["session_id"].as_str(),
                prompt: input["prompt"].as_str().unwrap(),
                body: input["body"].as_str(),
                choices: &choices,
                text_max_length: n("text_max_length"),
                selections: n("min_selections").zip(n("max_selections")),
                other_max_length: other,
            };
            check(v["name"].as_str().unwrap(), &di, v);
        }
    }

    #[test]
    fn v1_matches_the_published_vectors() {
        each_vector(VECTORS_V1, |name, di, v| {
            let canonical = canonical_v1(di);
            assert_eq!(canonical, v["canonical"].as_str().unwrap(), "{name}");
            assert_eq!(hex_sha256(canonical.as_bytes()), v["digest"], "{name}");
        });
    }

    #[test]
    fn v2_matches_the_published_vectors() {
        each_vector(VECTORS_V2, |name, di, v| {
            assert_eq!(canonical(di), v["canonical"].as_str().unwrap(), "{name}");
            assert_eq!(request_digest(di), v["digest"].as_str().unwrap(), "{name}");
        });
    }
}
