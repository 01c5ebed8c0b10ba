//! The one delivery outbox of every channel (SPEC §11.2): what still has to reach a channel,
//! what reached it (so it can be withdrawn), and what gave up.
//!
//! Entries are written in the same critical section as the change they announce and made
//! durable by the same flush, so a question the hook was told about always has its
//! deliveries queued, and `kill -9` loses none. Ids are deterministic
//! (`deliver:interaction:{id}:{channel}`, `withdraw:…`): queueing twice is a no-op, and the
//! receiving side dedupes a repeat on an id derived from them.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Interaction, Notification, Timestamp};

/// How long an entry is retried before it is dead-lettered.
pub const DEAD_AFTER: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Show it (a new question or notification, or an update of one).
    Deliver,
    /// Take it back: it was settled (ntfy `DELETE`, desktop close, webhook `*.resolved`).
    Withdraw,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    Interaction,
    Notification,
}

impl Subject {
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Interaction => "interaction",
            Subject::Notification => "notification",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// To be tried at `next_attempt_at`.
    Waiting,
    /// Delivered; kept so it can be withdrawn when its subject is settled.
    Delivered,
    /// Tried for [`DEAD_AFTER`] without success; shown by `channels status`, never retried.
    Dead,
}

/// One (event, channel) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub id: String,
    pub action: Action,
    pub subject: Subject,
    pub subject_id: String,
    pub channel: String,
    pub state: EntryState,
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
    pub created_at: Timestamp,
    /// Why the last attempt failed (no secrets, no content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The receiver's HTTP status of the last attempt, if it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// What the channel needs to withdraw what it delivered (e.g. a desktop notification id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
    /// Bumped each time the subject changes and is delivered again (a notification updated
    /// in place): a new event for receivers that dedupe on ids, the same for retries.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub revision: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The deterministic id of an entry.
pub fn entry_id(action: Action, subject: Subject, id: &str, channel: &str) -> String {
    let action = match action {
        Action::Deliver => "deliver",
        Action::Withdraw => "withdraw",
    };
    format!("{action}:{}:{id}:{channel}", subject.as_str())
}

impl OutboxEntry {
    pub fn new(
        action: Action,
        subject: Subject,
        subject_id: &str,
        channel: &str,
        due: Timestamp,
        now: Timestamp,
    ) -> OutboxEntry {
        OutboxEntry {
            id: entry_id(action, subject, subject_id, channel),
            action,
            subject,
            subject_id: subject_id.to_string(),
            channel: channel.to_string(),
            state: EntryState::Waiting,
            attempts: 0,
            next_attempt_at: due,
            created_at: now,
            last_error: None,
            last_status: None,
            receipt: None,
            revision: 0,
        }
    }

    /// The id of this event on the receiving side: the entry id, plus the revision once
    /// the subject was updated.
    pub fn event_id(&self) -> String {
        match self.revision {
            0 => self.id.clone(),
            r => format!("{}:r{r}", self.id),
        }
    }

    /// Whether anything may have reached the receiver (delivered, or tried at least once:
    /// a try that failed on our side may still have arrived).
    pub fn may_have_arrived(&self) -> bool {
        self.state == EntryState::Delivered || self.attempts > 0
    }
}

/// One channel a new question or notification goes to, and how long to hold it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub channel: String,
    /// Delivered only if still pending after this long (SPEC §11.1 `--delay`).
    pub delay: Duration,
}

/// Decides which channels a new question or notification goes to. The broker calls it under
/// its lock, so it must be quick and must not call back into the broker.
pub trait Planner: Send + Sync {
    fn for_interaction(&self, record: &Interaction) -> Vec<Delivery>;
    fn for_notification(&self, record: &Notification) -> Vec<Delivery>;
}

/// Longest wait between two delivery attempts (SPEC §11.2).
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(300);

/// Exponential backoff with jitter: `base · 2^(n-1)`, capped at `max`, then a random
/// 50–100 % of that, so many brokers (and many entries for one dead receiver) do not retry
/// in step.
pub fn backoff(failures: u32, base: Duration, max: Duration) -> Duration {
    let exp = base.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let capped = exp.min(max);
    let jitter = 0.5 + rand::random::<f64>() * 0.5;
    capped.mul_f64(jitter).max(Duration::from_millis(100))
}

/// The wait after the `failures`-th failed delivery: 1 s doubling, at most 5 minutes.
pub fn retry_wait(failures: u32) -> Duration {
    backoff(failures, Duration::from_secs(1), MAX_RETRY_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_a_second_up_to_five_minutes_with_jitter() {
        assert!(retry_wait(1) <= Duration::from_secs(1));
        let third = retry_wait(3);
        assert!(third >= Duration::from_secs(2) && third <= Duration::from_secs(4));
        let waits: Vec<Duration> = (0..20).map(|_| retry_wait(30)).collect();
        assert!(waits
            .iter()
            .all(|d| *d >= MAX_RETRY_WAIT / 2 && *d <= MAX_RETRY_WAIT));
        assert!(
            waits.iter().any(|d| *d != waits[0]),
            "jitter spreads retries"
        );
    }

    #[test]
    fn ids_are_deterministic_per_event_and_channel() {
        assert_eq!(
            entry_id(Action::Deliver, Subject::Interaction, "ab", "phone"),
            "deliver:interaction:ab:phone"
        );
        assert_eq!(
            entry_id(Action::Withdraw, Subject::Notification, "cd", "ops"),
            "withdraw:notification:cd:ops"
        );
    }
}
