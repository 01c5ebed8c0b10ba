//! The outbox's delivery loop (SPEC §11.2, §11.3): tries every due entry, each in a task of
//! its own (a receiver that hangs holds up nothing else), records the outcome durably,
//! backs off failures exponentially with jitter, and dead-letters what failed for 24 h.
//! Between due times it sleeps: no polling.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{content, ntfy, webhook, ChannelError, Hub, Kind};
use crate::broker::outbox::{
    entry_id, retry_wait, Action, EntryState, OutboxEntry, Subject, DEAD_AFTER,
};
use crate::broker::BrokerError;
use crate::model::{NotificationStatus, Status, Timestamp};

/// At most this many deliveries at once.
const MAX_CONCURRENT: usize = 16;
/// Answer subscriptions are re-checked against the settings at least this often.
const RECHECK: Duration = Duration::from_secs(60);
/// Retries due this soon are tried with the ones due now: many entries retrying at jittered
/// moments then cost a few wake-ups a second, not one each.
const LOOKAHEAD: Duration = Duration::from_millis(250);

/// What one attempt came to.
enum Done {
    /// Delivered; the receipt says how to withdraw it.
    Sent(Option<Value>),
    /// Nothing to do any more (the subject or the channel is gone): the entry is dropped.
    Moot,
}

pub async fn run(hub: Arc<Hub>) {
    loop {
        hub.reconcile_subscriptions();
        let next = match dispatch_due(&hub) {
            Ok(next) => next,
            Err(e) => {
                tracing::error!(error = %e, "outbox unreadable");
                Some(Timestamp::now() + Duration::from_secs(5))
            }
        };
        let sleep = next
            .map(|t| Timestamp::now().until(t))
            .unwrap_or(RECHECK)
            .min(RECHECK);
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = hub.broker.outbox_changed() => {}
            _ = hub.wake.notified() => {}
        }
    }
}

fn pair_key(e: &OutboxEntry) -> String {
    format!("{}:{}:{}", e.subject.as_str(), e.subject_id, e.channel)
}

/// Starts an attempt for every due entry not already in flight; returns when the next
/// waiting one falls due.
fn dispatch_due(hub: &Arc<Hub>) -> Result<Option<Timestamp>, ChannelError> {
    let now = Timestamp::now();
    let mut next: Option<Timestamp> = None;
    let mut waiting = false;
    let mut in_flight = hub.in_flight.lock().unwrap_or_else(|p| p.into_inner());
    for entry in hub.broker.outbox_entries()? {
        if entry.state != EntryState::Waiting {
            continue;
        }
        waiting = true;
        // Retries only: a first delivery never comes before its --delay is over.
        let horizon = if entry.attempts > 0 {
            now + LOOKAHEAD
        } else {
            now
        };
        if entry.next_attempt_at > horizon {
            next = Some(next.map_or(entry.next_attempt_at, |n| n.min(entry.next_attempt_at)));
            continue;
        }
        let key = pair_key(&entry);
        if in_flight.len() >= MAX_CONCURRENT || in_flight.contains(&key) {
            continue;
        }
        in_flight.insert(key);
        let hub = Arc::clone(hub);
        tokio::spawn(async move { attempt(hub, entry).await });
    }
    hub.waiting
        .store(waiting || !in_flight.is_empty(), Ordering::SeqCst);
    Ok(next)
}

async fn attempt(hub: Arc<Hub>, mut entry: OutboxEntry) {
    // Counted before the try: if the subject is settled meanwhile, the broker sees that
    // something may have arrived and queues its withdrawal.
    entry.attempts += 1;
    let counted = entry.clone();
    let still_there = hub
        .broker
        .update_outbox(&entry.id, |stored| {
            stored
                .filter(|s| s.created_at == counted.created_at)
                .map(|_| counted)
        })
        .is_ok();
    let result = if still_there {
        perform(&hub, &entry).await
    } else {
        Err(ChannelError::failed("outbox unwritable", None))
    };
    if let Err(e) = record(&hub, &entry, result) {
        tracing::error!(id = %entry.subject_id, channel = %entry.channel, error = %e, "cannot record a delivery attempt");
    }
    if let Err(e) = hub.broker.commit_outbox().await {
        tracing::error!(error = %e, "cannot flush the outbox");
    }
    hub.in_flight
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&pair_key(&entry));
    // Look again (pokes coalesce into one scan): what is due, and whether anything is left.
    hub.poke();
}

/// Writes what an attempt came to (only over the same entry: one queued again meanwhile,
/// by an update, stays queued).
fn record(
    hub: &Hub,
    entry: &OutboxEntry,
    result: Result<Done, ChannelError>,
) -> Result<(), BrokerError> {
    let same = |s: &OutboxEntry| s.created_at == entry.created_at;
    match result {
        Ok(Done::Moot) => {
            hub.broker.remove_outbox_if(&entry.id, same)?;
        }
        Ok(Done::Sent(receipt)) => {
            tracing::info!(
                id = %entry.subject_id,
                channel = %entry.channel,
                action = ?entry.action,
                attempts = entry.attempts,
                "delivered"
            );
            // Deliveries are kept (as delivered) for their withdrawal, except where there
            // is nothing to withdraw (no receipt).
            let found = if entry.action == Action::Deliver && receipt.is_some() {
                let mut found = false;
                hub.broker.update_outbox(&entry.id, |s| {
                    let mut s = s?;
                    found = true;
                    if same(&s) {
                        s.state = EntryState::Delivered;
                        s.last_error = None;
                        s.last_status = None;
                    }
                    // Queued again meanwhile (an update): it stays queued, and its next
                    // delivery must replace what this one showed.
                    s.receipt = receipt.clone().or(s.receipt);
                    Some(s)
                })?;
                found
            } else {
                hub.broker.remove_outbox_if(&entry.id, same)?
            };
            if !found && entry.action == Action::Deliver {
                // Settled while in flight: its withdrawal is queued; tell it what to take back.
                let wid = entry_id(
                    Action::Withdraw,
                    entry.subject,
                    &entry.subject_id,
                    &entry.channel,
                );
                hub.broker.update_outbox(&wid, |w| {
                    w.map(|mut w| {
                        w.receipt = w.receipt.or(receipt);
                        w
                    })
                })?;
            }
        }
        Err(e) => {
            let now = Timestamp::now();
            let gone = matches!(e, ChannelError::Gone { .. });
            let dead = gone || now.until(entry.created_at + DEAD_AFTER).is_zero();
            let (status, asked) = match &e {
                ChannelError::Failed {
                    status,
                    retry_after,
                    ..
                } => (*status, *retry_after),
                ChannelError::Gone { status, .. } => (Some(*status), None),
                _ => (None, None),
            };
            // The receiver's own `Retry-After` when it is later than our backoff.
            let wait = retry_wait(entry.attempts).max(asked.unwrap_or_default());
            let error = e.to_string();
            hub.broker.update_outbox(&entry.id, |s| {
                let mut s = s.filter(same)?;
                s.attempts = entry.attempts;
                s.last_error = Some(error.clone());
                s.last_status = status;
                if dead {
                    s.state = EntryState::Dead;
                } else {
                    s.next_attempt_at = now + wait;
                }
                Some(s)
            })?;
            if gone {
                tracing::error!(
                    id = %entry.subject_id,
                    channel = %entry.channel,
                    attempts = entry.attempts,
                    status,
                    "delivery dead-lettered: the receiver says the endpoint is gone"
                );
            } else if dead {
                tracing::error!(
                    id = %entry.subject_id,
                    channel = %entry.channel,
                    attempts = entry.attempts,
                    status,
                    "delivery dead-lettered after 24 h of failures"
                );
            } else {
                tracing::warn!(
                    id = %entry.subject_id,
                    channel = %entry.channel,
                    attempts = entry.attempts,
                    status,
                    retry_in_ms = wait.as_millis() as u64,
                    error = %e,
                    "delivery failed; will retry"
                );
            }
        }
    }
    Ok(())
}

/// One try of one entry.
async fn perform(hub: &Hub, entry: &OutboxEntry) -> Result<Done, ChannelError> {
    let settings = hub.settings();
    let Some(kind) = Hub::channel_kind(&settings, &entry.channel) else {
        return Ok(Done::Moot);
    };
    let channel = match kind {
        Kind::Relay => {
            return match entry.action {
                // The receipt keeps the entry (as delivered) for its withdrawal at the Relay.
                Action::Deliver => match crate::relay::outbox::deliver(&hub.relay, entry).await {
                    Ok(devices) => Ok(Done::Sent(Some(serde_json::json!({ "devices": devices })))),
                    Err(e) => Err(ChannelError::failed(e.to_string(), None)),
                },
                // A settled question leaves every phone at once (SPEC §12.4).
                Action::Withdraw => match crate::relay::outbox::withdraw(&hub.relay, entry).await {
                    Ok(_) => Ok(Done::Sent(None)),
                    Err(e) => Err(ChannelError::failed(e.to_string(), None)),
                },
            };
        }
        Kind::Channel(c) => c,
    };
    let content = match entry.subject {
        Subject::Interaction => match hub.broker.get(&entry.subject_id).await {
            Ok(i) if entry.action == Action::Deliver && i.status != Status::Pending => {
                return Ok(Done::Moot)
            }
            Ok(i) => {
                let c = content::of_interaction(&i, channel.include_message);
                (c, Some(i))
            }
            Err(BrokerError::NotFound(_)) if entry.action == Action::Withdraw => {
                (content::test_content(), None)
            }
            Err(BrokerError::NotFound(_)) => return Ok(Done::Moot),
            Err(e) => return Err(e.into()),
        },
        Subject::Notification => match hub.broker.get_notification(&entry.subject_id).await {
            Ok(n) if entry.action == Action::Deliver && n.status != NotificationStatus::Active => {
                return Ok(Done::Moot)
            }
            Ok(n) => (content::of_notification(&n, channel.include_message), None),
            Err(BrokerError::NotFound(_)) if entry.action == Action::Withdraw => {
                (content::test_content(), None)
            }
            Err(BrokerError::NotFound(_)) => return Ok(Done::Moot),
            Err(e) => return Err(e.into()),
        },
    };
    let (content, question) = content;
    let key = format!("{}:{}", entry.subject.as_str(), entry.subject_id);
    let receipt = match (channel.kind, entry.action) {
        (super::ChannelKind::Ntfy, Action::Deliver) => {
            let buttons = match &question {
                Some(q) if channel.answer_buttons => ntfy::buttons(hub, &channel, q, &content)?,
                _ => Vec::new(),
            };
            if !buttons.is_empty() {
                hub.broker.commit_outbox().await?;
            }
            ntfy::publish(hub, &channel, &content, &key, &buttons).await?
        }
        (super::ChannelKind::Ntfy, Action::Withdraw) => {
            ntfy::delete(hub, &channel, &key).await?;
            None
        }
        (super::ChannelKind::Webhook, action) => {
            let (event, data) = match action {
                Action::Deliver => (content.created_type, content.data.clone()),
                Action::Withdraw => {
                    let mut data = content.data.clone();
                    data["id"] = Value::String(entry.subject_id.clone());
                    (content.resolved_type, data)
                }
            };
            webhook::send(hub, &channel, &entry.event_id(), event, &data).await?;
            None
        }
        (super::ChannelKind::Desktop, Action::Deliver) => {
            let previous = entry.receipt.clone();
            hub.desktop
                .show(&channel, &content, question.as_ref(), previous)
                .await?
        }
        (super::ChannelKind::Desktop, Action::Withdraw) => {
            hub.desktop.close(entry.receipt.as_ref()).await?;
            None
        }
    };
    if entry.action == Action::Withdraw && entry.subject == Subject::Interaction {
        ntfy::forget_capabilities(hub, &entry.subject_id);
    }
    Ok(Done::Sent(receipt.or(Some(Value::Null))))
}
