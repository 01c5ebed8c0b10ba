//! The request digest (SPEC §2.1): binds an answer to exactly what the person saw.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{Choice, Kind};

/// The displayed fields of a question, after normalisation.
pub struct DigestInput<'a> {
    pub kind: Kind,
    pub agent: &'a str,
    pub project: Option<&'a str>,
    pub session_id: Option<&'a str>,
    pub prompt: &'a str,
    pub choices: &'a [Choice],
    pub text_max_length: Option<u32>,
}

/// The exact UTF-8 string that is hashed.
///
/// serde_json's compact writer is exactly the encoding the spec asks for: it escapes only
/// `"`, `\` and U+0000–U+001F (short forms where they exist, otherwise lowercase `\u00xx`)
/// and writes everything else as raw UTF-8. The test vectors pin this down.
pub fn canonical(input: &DigestInput<'_>) -> String {
    let choices: Vec<Value> = input
        .choices
        .iter()
        .map(|c| json!([c.id, c.label, c.detail]))
        .collect();
    let text_max = match input.kind {
        Kind::Text => json!(input.text_max_length),
        _ => Value::Null,
    };
    json!([
        "agentnotify.interaction.v1",
        input.kind.as_str(),
        input.agent,
        input.project,
        input.session_id,
        input.prompt,
        choices,
        text_max,
    ])
    .to_string()
}

/// `lowercase_hex(SHA-256(canonical))`.
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

    const VECTORS: &str = include_str!("../../../tests/data/digest.json");

    #[test]
    fn matches_the_published_vectors() {
        let doc: Value = serde_json::from_str(VECTORS).unwrap();
        let vectors = doc["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 5);
        for v in vectors {
            let input = &v["input"];
            let kind = Kind::parse(input["kind"].as_str().unwrap()).unwrap();
            let choices: Vec<Choice> = serde_json::from_value(input["choices"].clone()).unwrap();
            let di = DigestInput {
                kind,
                agent: input["agent"].as_str().unwrap(),
                project: input["project"].as_str(),
                session_id: input["session_id"].as_str(),
                prompt: input["prompt"].as_str().unwrap(),
                choices: &choices,
                text_max_length: input["text_max_length"].as_u64().map(|n| n as u32),
            };
            let name = v["name"].as_str().unwrap();
            assert_eq!(canonical(&di), v["canonical"].as_str().unwrap(), "{name}");
            assert_eq!(request_digest(&di), v["digest"].as_str().unwrap(), "{name}");
        }
    }
}
