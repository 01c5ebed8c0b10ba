//! Property tests over the request and response body parsers (10,000 cases each):
//! whatever JSON arrives, parsing never panics, a refusal names a field, and what is
//! accepted satisfies every bound of SPEC §2.

use agentnotify::model::{AnswerSubmission, InteractionRequest, NotificationRequest};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::support::BODY_FIELDS as FIELDS;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(u64::MAX)),
        prop::sample::select(vec![
            "",
            " ",
            "a",
            "allow-once",
            "deny",
            "é漢😀",
            "\u{0}\n",
            "a b",
            "-x_"
        ])
        .prop_map(Value::from),
        (1usize..70).prop_map(|n| Value::from("a".repeat(n))),
        Just(json!("permission")),
        Just(json!("single_choice")),
        Just(json!("text")),
        (0usize..2100).prop_map(|n| Value::from("x".repeat(n))),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 16, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..14).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(FIELDS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// Objects built from the real field names, so most cases get past the first check.
fn body() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => value(),
        6 => prop::collection::vec((prop::sample::select(FIELDS), value()), 0..10)
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
    ]
}

fn names_a_field(message: &str) -> bool {
    FIELDS.iter().any(|f| message.contains(f))
        || message.contains("JSON object")
        || message.contains("choice")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, ..ProptestConfig::default() })]

    #[test]
    fn interaction_requests_are_accepted_only_within_bounds(b in body()) {
        match InteractionRequest::from_json(&b) {
            Ok(r) => {
                let n = r.question.prompt.chars().count();
                prop_assert!((1..=2000).contains(&n));
                prop_assert!((30..=3600).contains(&r.ttl_seconds));
                prop_assert!(r.question.agent.chars().count() <= 100 && !r.question.agent.is_empty());
                prop_assert!(r.key.as_ref().is_none_or(|k| k.chars().count() <= 100));
                match r.question.kind {
                    agentnotify::model::Kind::Text => {
                        prop_assert!(r.question.choices.is_empty());
                        prop_assert!(r.question.text_max_length.is_some_and(|m| (1..=2000).contains(&m)));
                    }
                    _ => prop_assert!((2..=12).contains(&r.question.choices.len())),
                }
                let mut ids: Vec<&str> = r.question.choices.iter().map(|c| c.id.as_str()).collect();
                ids.sort();
                ids.dedup();
                prop_assert_eq!(ids.len(), r.question.choices.len());
                prop_assert_eq!(r.digest().len(), 64);
            }
            Err(e) => prop_assert!(names_a_field(&e.0), "{}", e.0),
        }
    }

    #[test]
    fn answer_submissions_are_accepted_only_within_bounds(b in body()) {
        match AnswerSubmission::from_json(&b) {
            Ok(s) => {
                prop_assert!((1..=128).contains(&s.response_id.chars().count()));
                prop_assert!(!s.source.is_empty() && s.source.len() <= 64);
                prop_assert!(s.device_id.as_ref().is_none_or(|d| (1..=128).contains(&d.chars().count())));
            }
            Err(e) => prop_assert!(names_a_field(&e.0), "{}", e.0),
        }
    }

    #[test]
    fn notification_requests_are_accepted_only_within_bounds(b in body()) {
        match NotificationRequest::from_json(&b) {
            Ok(n) => {
                prop_assert!((1..=200).contains(&n.title.chars().count()));
                prop_assert!((1..=4000).contains(&n.message.chars().count()));
                prop_assert!(n.metadata.as_ref().is_none_or(|m| m.is_object() && m.to_string().len() <= 8192));
            }
            Err(e) => prop_assert!(names_a_field(&e.0), "{}", e.0),
        }
    }
}
