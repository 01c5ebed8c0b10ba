//! The data model: interactions, responses and notifications, their validation and the
//! request digest, and the one rendering of question text for people (`render.rs`).
//! Pure: no I/O, no HTTP, no storage.

pub mod arc;
pub mod digest;
pub mod fields;
pub mod interaction;
pub mod notification;
pub mod render;
pub mod secret;
pub mod time;

pub use fields::Invalid;
pub use interaction::{
    AnswerSubmission, Choice, Interaction, InteractionRequest, Kind, Question, Response, Status,
};
pub use notification::{Notification, NotificationRequest, NotificationStatus, Priority};
pub use time::Timestamp;

/// 32 lowercase hex characters (128 random bits): interaction and notification ids.
pub fn new_id() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// True when `s` has the shape of an id this broker hands out.
pub fn is_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
