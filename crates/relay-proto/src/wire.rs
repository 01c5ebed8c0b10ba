//! The JSON shapes that cross the Relay: its HTTP bodies and the sealed payloads inside.
//! Shared by the reference server, the broker side and the device client, so all three
//! agree by construction.

use serde::{Deserialize, Serialize};

use agentnotify_model::{Choice, Interaction, Kind};

/// `contract_version` of every payload and answer.
pub const CONTRACT_VERSION: &str = "1";
/// `payload_kind` of a sealed question.
pub const INTERACTION_REQUEST: &str = "interaction-request";

/// The event id a question envelope carries (and its seal is bound to).
pub fn question_event_id(interaction_id: &str) -> String {
    format!("interaction:{interaction_id}")
}

/// The event id a sealed answer is bound to.
pub fn answer_event_id(response_id: &str) -> String {
    format!("response:{response_id}")
}

/// What a phone sees of a question: the displayed fields plus what it needs to answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionView {
    pub id: String,
    pub key: Option<String>,
    pub agent: String,
    pub project: Option<String>,
    pub session_id: Option<String>,
    pub kind: Kind,
    pub prompt: String,
    pub choices: Vec<Choice>,
    pub text_max_length: Option<u32>,
    pub request_digest: String,
    pub nonce: String,
    pub created_at: String,
    pub expires_at: String,
}

/// The sealed `interaction-request` payload (SPEC §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionPayload {
    pub payload_kind: String,
    pub contract_version: String,
    pub interaction: QuestionView,
}

impl QuestionPayload {
    pub fn of(i: &Interaction) -> QuestionPayload {
        QuestionPayload {
            payload_kind: INTERACTION_REQUEST.into(),
            contract_version: CONTRACT_VERSION.into(),
            interaction: QuestionView {
                id: i.id.clone(),
                key: i.key.clone(),
                agent: i.agent.clone(),
                project: i.project.clone(),
                session_id: i.session_id.clone(),
                kind: i.kind,
                prompt: i.prompt.clone(),
                choices: i.choices.clone(),
                text_max_length: i.text_max_length,
                request_digest: i.request_digest.clone(),
                nonce: i.nonce.clone(),
                created_at: i.created_at.to_rfc3339(),
                expires_at: i.expires_at.to_rfc3339(),
            },
        }
    }
}

/// One envelope as stored and served by the Relay. Everything but `sealed` is routing
/// metadata the Relay may read; all of it is bound into the seal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(default)]
    pub installation_id: String,
    pub device_id: String,
    pub event_id: String,
    pub key_id: String,
    pub expires_at: String,
    pub sealed: String,
    /// The installation's Ed25519 signature over the rest (`crate::sign`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_at: Option<String>,
}

/// The answer content, sealed to the installation key (or, when the provider allows
/// plain answers, sent in clear with the outer fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerPayload {
    pub contract_version: String,
    pub response_id: String,
    pub interaction_id: String,
    pub request_digest: String,
    pub nonce: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub installation_id: String,
    pub device_id: String,
}

/// `POST /v1/interaction-responses` body, and each item of the `GET` listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerPost {
    pub contract_version: String,
    pub response_id: String,
    pub interaction_id: String,
    pub installation_id: String,
    pub device_id: String,
    /// Sealed [`AnswerPayload`]; when present the plain fields below are absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<String>,
    /// Key id of the installation key the answer is sealed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The question's expiry, bound into the seal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Set by the Relay when it stored the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_at: Option<String>,
}

/// `GET /v1/interaction-responses` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerBatch {
    pub responses: Vec<AnswerPost>,
    /// Opaque; pass as `since` to get what came after this batch.
    pub cursor: Option<String>,
    /// A long-poll ended early because a device registered or was removed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub devices_changed: bool,
}

/// What became of an answer; the broker reports it, the phone reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerResult {
    pub response_id: String,
    /// `pending` (not fetched yet), `accepted` or `refused`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The question answered (set with the broker's verdict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction_id: Option<String>,
    /// The installation's signature on an accepted or refused verdict (`crate::sign`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl AnswerResult {
    /// The Relay's own word that the broker has not judged the answer yet.
    pub fn pending(response_id: &str) -> AnswerResult {
        AnswerResult {
            response_id: response_id.to_string(),
            status: "pending".into(),
            code: None,
            message: None,
            interaction_id: None,
            signature: None,
        }
    }
}

/// A device as the Relay lists it to its installation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub device_id: String,
    pub installation_id: String,
    pub name: String,
    pub public_key: String,
    /// HMAC by the pairing secret over the key: proves a paired phone chose this key.
    pub proof: String,
    pub created_at: String,
    /// The single-use pairing it registered with (`crate::pairing::PairingId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairing_id: Option<String>,
    /// When the device last called the Relay (to a minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
}
