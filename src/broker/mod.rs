//! The broker: the one state machine every surface goes through (SPEC §3).
//!
//! All decisions happen here, under one lock: create / reuse / supersede, the answer rules,
//! cancel, expiry and the owner lease. Pending interactions live in memory (with a watch
//! channel per question, so waiters wake the instant anything lands); every record is written
//! through to the [`Store`] and made durable before any caller is told about the change.

pub mod outbox;
mod state;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{broadcast, watch, Notify};

use crate::model::interaction::{AnswerRefusal, Verdict};
use crate::model::{
    AnswerSubmission, Interaction, InteractionRequest, Invalid, Notification, NotificationRequest,
    NotificationStatus, Status, Timestamp,
};
use crate::store::{Store, StoreError};
use outbox::{Action, EntryState, OutboxEntry, Planner, Subject};
use state::{Outcome, State};

pub use state::Event;

/// Tunables of the state machine.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// How long a leased question lives with no wait in flight and none started (SPEC §3.1).
    pub lease_grace: Duration,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            lease_grace: Duration::from_secs(15),
        }
    }
}

/// Errors of broker operations; the API maps each to a status code and `code`.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("{0}")]
    Invalid(#[from] Invalid),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error(transparent)]
    Refused(#[from] AnswerRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, BrokerError>;

/// Filters for listing interactions.
#[derive(Debug, Clone, Default)]
pub struct InteractionFilter {
    pub status: Option<Status>,
    pub agent: Option<String>,
    pub project: Option<String>,
    pub session: Option<String>,
    pub limit: usize,
}

impl InteractionFilter {
    fn matches(&self, i: &Interaction) -> bool {
        self.status.is_none_or(|s| i.status == s)
            && self.agent.as_ref().is_none_or(|a| &i.question.agent == a)
            && self
                .project
                .as_ref()
                .is_none_or(|p| i.question.project.as_ref() == Some(p))
            && self
                .session
                .as_ref()
                .is_none_or(|s| i.question.session_id.as_ref() == Some(s))
    }
}

/// Filters for listing notifications.
#[derive(Debug, Clone, Default)]
pub struct NotificationFilter {
    pub status: Option<NotificationStatus>,
    pub agent: Option<String>,
    pub project: Option<String>,
    pub limit: usize,
}

/// What the retention job removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub interactions: usize,
    pub notifications: usize,
}

/// The broker. Cheap to share behind an `Arc`.
pub struct Broker {
    core: Arc<Core>,
    state: Mutex<State>,
    config: BrokerConfig,
    /// Which channels new questions and notifications go to; none until the daemon sets it.
    planner: OnceLock<Arc<dyn Planner>>,
}

/// What settling a transaction needs, shareable with a task that outlives the caller.
struct Core {
    store: Store,
    reaper_wake: Notify,
    events: broadcast::Sender<Event>,
    /// Woken once new outbox entries are durable.
    outbox_wake: Notify,
}

impl Broker {
    /// Loads pending interactions and active notifications from the store.
    pub fn open(store: Store, config: BrokerConfig) -> Result<Arc<Broker>> {
        let now = Timestamp::now();
        let mut state = State::default();
        for record in store.all_interactions() {
            let record = record?;
            if record.status == Status::Pending {
                state.track_pending(record, now + config.lease_grace);
            }
        }
        for n in store.all_notifications() {
            let n = n?;
            state.track_notification(&n);
            state.note_keyed(&n);
        }
        let (events, _) = broadcast::channel(1024);
        Ok(Arc::new(Broker {
            core: Arc::new(Core {
                store,
                reaper_wake: Notify::new(),
                events,
                outbox_wake: Notify::new(),
            }),
            state: Mutex::new(state),
            config,
            planner: OnceLock::new(),
        }))
    }

    /// Live events (interaction created / changed), for surfaces that push updates.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.core.events.subscribe()
    }

    /// Sets who decides where new questions and notifications are delivered (once).
    pub fn set_planner(&self, planner: Arc<dyn Planner>) {
        let _ = self.planner.set(planner);
    }

    /// Wakes the dispatcher (an entry was made due by hand).
    pub fn wake_outbox(&self) {
        self.core.outbox_wake.notify_one();
    }

    /// Resolves when new outbox entries have become durable (the dispatcher's wake-up).
    pub async fn outbox_changed(&self) {
        self.core.outbox_wake.notified().await
    }

    /// Changes the outbox entry `id` under the broker's lock: `change` gets the stored entry
    /// (if any) and returns what to store, or `None` to leave it as it is. Durable after
    /// [`Broker::commit_outbox`]. Answers never go through the outbox: they go through
    /// [`Broker::respond`].
    pub fn update_outbox<F>(&self, id: &str, change: F) -> Result<()>
    where
        F: FnOnce(Option<OutboxEntry>) -> Option<OutboxEntry>,
    {
        let _state = self.lock();
        if let Some(entry) = change(self.core.store.get_outbox(id)?) {
            self.core.store.put_outbox(id, &entry)?;
        }
        Ok(())
    }

    /// Removes the outbox entry `id` under the broker's lock.
    pub fn remove_outbox(&self, id: &str) -> Result<()> {
        let _state = self.lock();
        self.core.store.remove_outbox(id)?;
        Ok(())
    }

    /// Removes the outbox entry `id` if `keep` says it is still the one the caller read.
    pub fn remove_outbox_if(
        &self,
        id: &str,
        still: impl FnOnce(&OutboxEntry) -> bool,
    ) -> Result<bool> {
        let _state = self.lock();
        match self.core.store.get_outbox::<OutboxEntry>(id)? {
            Some(e) if still(&e) => {
                self.core.store.remove_outbox(id)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Every outbox entry, in id order.
    pub fn outbox_entries(&self) -> Result<Vec<OutboxEntry>> {
        Ok(self.core.store.outbox_entries()?)
    }

    /// Makes every outbox change so far durable.
    pub async fn commit_outbox(&self) -> Result<()> {
        Ok(self.core.store.barrier().await?)
    }

    /// Stores an answer capability under `key` (durable after [`Broker::commit_outbox`]).
    pub fn put_capability<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<()> {
        self.core.store.put_capability(key, value)?;
        Ok(())
    }

    /// Takes a capability: it exists for at most one caller, once.
    pub fn take_capability<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        Ok(self.core.store.take_capability(key)?)
    }

    /// Drops every capability `drop` picks (those of settled questions).
    pub fn drop_capabilities<T: serde::de::DeserializeOwned>(
        &self,
        drop: impl FnMut(&T) -> bool,
    ) -> Result<usize> {
        Ok(self.core.store.retain_capabilities(drop)?)
    }

    /// Queues deliveries for what `out` created or updated, and withdrawals for what it
    /// settled. Runs under the lock, in the same critical section as the change, so the
    /// entries are made durable by the same flush.
    fn plan_outbox(&self, state: &State, now: Timestamp, out: &mut Outcome) -> Result<()> {
        let store = &self.core.store;
        let deliver = std::mem::take(&mut out.deliver);
        let withdraw = std::mem::take(&mut out.withdraw);
        if let Some(planner) = self.planner.get() {
            for (subject, id) in deliver {
                let deliveries = match subject {
                    Subject::Interaction => match state.pending.get(&id) {
                        Some(p) => planner.for_interaction(&p.interaction),
                        None => continue,
                    },
                    Subject::Notification => match store.get_notification(&id)? {
                        Some(n) if n.status == NotificationStatus::Active => {
                            planner.for_notification(&n)
                        }
                        _ => continue,
                    },
                };
                for d in deliveries {
                    let eid = outbox::entry_id(Action::Deliver, subject, &id, &d.channel);
                    let entry = match store.get_outbox::<OutboxEntry>(&eid)? {
                        // An update of something queued or shown: shown again, in place
                        // (the receipt says what to replace).
                        Some(mut e) => {
                            if e.state != EntryState::Waiting {
                                e.next_attempt_at = now;
                            }
                            e.state = EntryState::Waiting;
                            e.attempts = 0;
                            e.created_at = now;
                            e.revision += 1;
                            e
                        }
                        None => OutboxEntry::new(
                            Action::Deliver,
                            subject,
                            &id,
                            &d.channel,
                            now + d.delay,
                            now,
                        ),
                    };
                    store.put_outbox(&eid, &entry)?;
                    out.wrote = true;
                    out.outbox = true;
                }
            }
        }
        // Withdrawals even without a planner: entries queued before must not linger.
        for (subject, id) in withdraw {
            let prefix = format!("deliver:{}:{id}:", subject.as_str());
            for e in store.outbox_with_prefix::<OutboxEntry>(&prefix)? {
                store.remove_outbox(&e.id)?;
                out.wrote = true;
                // Still waiting (its delay not over, or never tried): it just never goes.
                if e.may_have_arrived() {
                    let mut w =
                        OutboxEntry::new(Action::Withdraw, subject, &id, &e.channel, now, now);
                    w.receipt = e.receipt;
                    store.put_outbox(&w.id, &w)?;
                    out.outbox = true;
                }
            }
        }
        Ok(())
    }

    /// True while anything is pending or anyone is waiting (an on-demand broker stays up).
    pub fn is_busy(&self) -> bool {
        self.lock().is_busy()
    }

    pub fn pending_count(&self) -> usize {
        self.lock().pending.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` under the lock after sweeping expiry and leases; then makes every change
    /// durable, wakes waiters and announces events.
    ///
    /// Settling runs in its own task: hyper drops a handler's future when its client goes
    /// away, and a change already made in memory must still be flushed, announced and
    /// scheduled (a lost reaper wake-up would leave an owner lease that never lapses).
    async fn transact<T>(
        &self,
        f: impl FnOnce(&mut State, &Store, Timestamp, &mut Outcome) -> Result<T>,
    ) -> Result<T> {
        let mut outcome = Outcome::default();
        let result = {
            let mut state = self.lock();
            let now = Timestamp::now();
            let swept = state.sweep(&self.core.store, now, &mut outcome);
            let result = swept.and_then(|()| f(&mut state, &self.core.store, now, &mut outcome));
            let planned = self.plan_outbox(&state, now, &mut outcome);
            result.and_then(|v| planned.map(|()| v))
        };
        if outcome.is_empty() {
            return result;
        }
        let core = Arc::clone(&self.core);
        tokio::spawn(async move { core.settle(outcome).await })
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        result
    }

    /// Opens a question, or reuses / supersedes a pending one with the same key (SPEC §3.2):
    /// an identical one is reused only while no owner holds it (SPEC §3.1, §6).
    /// Returns the record and whether it was newly created.
    pub async fn request(&self, req: InteractionRequest) -> Result<(Interaction, bool)> {
        let grace = self.config.lease_grace;
        self.transact(|state, store, now, out| {
            let digest = req.digest();
            let keyed = req
                .key
                .as_deref()
                .map(|k| state.keyed(k))
                .unwrap_or_default();
            // The same question is shared only once no owner holds it: two identical calls
            // waiting at the same time each get their own, so one approval runs one call.
            let free = keyed.iter().find(|id| {
                let p = &state.pending[*id];
                p.interaction.request_digest == digest && !p.is_held()
            });
            if let Some(existing) = free.cloned() {
                let record =
                    state.reuse(store, &existing, req.owner_lease, now, now + grace, out)?;
                return Ok((record, false));
            }
            for id in &keyed {
                if state.pending[id].interaction.request_digest != digest {
                    state.finish(store, id, Status::Superseded, None, now, out)?;
                }
            }
            let record = req.into_interaction(now);
            state.create(store, record.clone(), now + grace, out)?;
            tracing::info!(id = %record.id, kind = record.question.kind.as_str(), "interaction created");
            Ok((record, true))
        })
        .await
    }

    pub async fn get(&self, id: &str) -> Result<Interaction> {
        self.transact(|state, store, _, _| state.read(store, id))
            .await
    }

    /// Lists interactions newest first.
    pub async fn list(&self, filter: &InteractionFilter) -> Result<Vec<Interaction>> {
        let limit = filter.limit.max(1);
        let pending_only = self
            .transact(|state, _, _, _| {
                Ok((filter.status == Some(Status::Pending)).then(|| state.pending_records()))
            })
            .await?;
        if let Some(mut records) = pending_only {
            records.retain(|i| filter.matches(i));
            records.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
            records.truncate(limit);
            return Ok(records);
        }
        let mut out = Vec::new();
        for record in self.core.store.interactions_newest_first() {
            let record = record?;
            if filter.matches(&record) {
                out.push(record);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Waits until the interaction leaves `pending` or `timeout` passes; returns its state.
    /// An `owner` wait keeps a leased question alive (SPEC §3.1); observers' waits do not,
    /// so a surface watching a question never keeps it open for a vanished owner.
    pub async fn wait(
        self: &Arc<Self>,
        id: &str,
        timeout: Duration,
        owner: bool,
    ) -> Result<Interaction> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut in_flight: Option<WaitGuard> = None;
        let grace = self.config.lease_grace;
        loop {
            // Parked waits hold no copy of the record: thousands of them may be open.
            let timed_out = tokio::time::Instant::now() >= deadline;
            let seen = self
                .transact(|state, store, now, _| {
                    Ok(match state.pending.get_mut(id) {
                        Some(p) => {
                            if timed_out && owner {
                                // The owner's slice ran out: it comes back for the next one.
                                p.owners_expected += 1;
                            }
                            if owner && in_flight.is_none() {
                                p.waits_in_flight += 1;
                                p.owners_expected = p.owners_expected.saturating_sub(1);
                                state.refresh_lease(id, now + grace);
                                in_flight = Some(WaitGuard {
                                    broker: Arc::clone(self),
                                    id: id.to_string(),
                                });
                            }
                            let p = &state.pending[id];
                            if timed_out {
                                Seen::Done(Box::new(p.interaction.clone()))
                            } else {
                                Seen::Pending(p.changed.subscribe(), p.interaction.expires_at)
                            }
                        }
                        None => Seen::Done(Box::new(state.read(store, id)?)),
                    })
                })
                .await?;
            match seen {
                Seen::Done(record) => return Ok(*record),
                Seen::Pending(mut changed, expires_at) => {
                    let now = tokio::time::Instant::now();
                    let until_expiry = Timestamp::now().until(expires_at);
                    let wake_at = deadline.min(now + until_expiry);
                    tokio::select! {
                        _ = changed.changed() => {}
                        _ = tokio::time::sleep_until(wake_at) => {}
                    }
                }
            }
        }
    }

    /// Applies the answer rules of SPEC §3.3 and, on acceptance, stores the answer durably.
    pub async fn respond(&self, id: &str, sub: AnswerSubmission) -> Result<Interaction> {
        self.transact(|state, store, now, out| {
            let current = state.read(store, id)?;
            match current.judge(&sub, now) {
                Verdict::Replay => Ok(current),
                Verdict::Refuse(why) => {
                    tracing::info!(id, refusal = why.code(), source = %sub.source, "answer refused");
                    Err(why.into())
                }
                Verdict::Accept(response) => {
                    let source = response.source.clone();
                    let record = state.finish(store, id, Status::Answered, Some(response), now, out)?;
                    tracing::info!(id, %source, "interaction answered");
                    Ok(record)
                }
            }
        })
        .await
    }

    /// Cancels a pending interaction; idempotent on terminal ones.
    pub async fn cancel(&self, id: &str) -> Result<Interaction> {
        self.transact(|state, store, now, out| {
            if state.pending.contains_key(id) {
                tracing::info!(id, "interaction cancelled");
                state.finish(store, id, Status::Cancelled, None, now, out)
            } else {
                state.read(store, id)
            }
        })
        .await
    }

    /// Posts a notification, or updates the active one with the same key in place.
    pub async fn notify(&self, req: NotificationRequest) -> Result<(Notification, bool)> {
        self.transact(|state, store, now, out| state.notify(store, req, now, out))
            .await
    }

    pub async fn get_notification(&self, id: &str) -> Result<Notification> {
        self.core
            .store
            .get_notification(id)?
            .ok_or(BrokerError::NotFound("notification"))
    }

    /// The newest notification under `key`, in any state (kept in memory by key).
    pub async fn notification_by_key(&self, key: &str) -> Result<Option<Notification>> {
        let id = self.lock().newest_notification(key);
        match id {
            Some(id) => Ok(self.core.store.get_notification(&id)?),
            None => Ok(None),
        }
    }

    pub async fn list_notifications(
        &self,
        filter: &NotificationFilter,
    ) -> Result<Vec<Notification>> {
        let mut all = Vec::new();
        for n in self.core.store.all_notifications() {
            let n = n?;
            let keep = filter.status.is_none_or(|s| n.status == s)
                && filter
                    .agent
                    .as_ref()
                    .is_none_or(|a| n.agent.as_ref() == Some(a))
                && filter
                    .project
                    .as_ref()
                    .is_none_or(|p| n.project.as_ref() == Some(p));
            if keep {
                all.push(n);
            }
        }
        all.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        all.truncate(filter.limit.max(1));
        Ok(all)
    }

    /// Resolves or dismisses a notification; idempotent once it is no longer active.
    pub async fn close_notification(
        &self,
        id: &str,
        status: NotificationStatus,
    ) -> Result<Notification> {
        self.transact(|state, store, now, out| {
            state.close_notification(store, id, status, now, out)
        })
        .await
    }

    /// Removes terminal interactions and closed notifications last changed before `cutoff`.
    pub async fn prune(&self, cutoff: Timestamp) -> Result<Pruned> {
        let mut pruned = Pruned::default();
        {
            // Under the lock, like every other change: a record being settled or reused
            // while it is removed would otherwise come back, or lose its change.
            let mut state = self.lock();
            for record in self.core.store.all_interactions() {
                let record = record?;
                if record.status.is_terminal() && record.updated_at < cutoff {
                    self.core.store.remove_interaction(&record)?;
                    pruned.interactions += 1;
                }
            }
            state.forget_keyed();
            for n in self.core.store.all_notifications() {
                let n = n?;
                if n.status != NotificationStatus::Active && n.updated_at < cutoff {
                    self.core.store.remove_notification(&n.id)?;
                    pruned.notifications += 1;
                } else {
                    state.note_keyed(&n);
                }
            }
            // Dead letters are kept for people to see, as long as the history.
            for e in self.core.store.outbox_entries::<OutboxEntry>()? {
                if e.state == EntryState::Dead && e.created_at < cutoff {
                    self.core.store.remove_outbox(&e.id)?;
                }
            }
        }
        self.core.store.barrier().await?;
        tracing::info!(
            interactions = pruned.interactions,
            notifications = pruned.notifications,
            "retention pruned"
        );
        Ok(pruned)
    }

    /// Background task: expires questions and ends lapsed leases at their deadlines, so
    /// waiters and live surfaces hear about it even when no request comes in.
    pub async fn run_reaper(self: Arc<Self>) {
        loop {
            let next = self
                .transact(|state, _, _, _| Ok(state.next_deadline()))
                .await;
            let next = match next {
                Ok(next) => next,
                Err(e) => {
                    tracing::error!(error = %e, "reaper could not sweep");
                    Some(Timestamp::now() + Duration::from_secs(1))
                }
            };
            let sleep = match next {
                Some(t) => Timestamp::now().until(t) + Duration::from_millis(1),
                None => Duration::from_secs(3600),
            };
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.core.reaper_wake.notified() => {}
            }
        }
    }

    /// Flushes everything (used at shutdown).
    pub fn flush(&self) -> Result<()> {
        Ok(self.core.store.flush_now()?)
    }
}

enum Seen {
    /// Still pending: wake on a change or at the expiry.
    Pending(watch::Receiver<()>, Timestamp),
    /// Ended, or the wait's own time is up: reply with this.
    Done(Box<Interaction>),
}

/// Marks one wait as in flight; dropping it (however the wait ends) starts the lease clock.
struct WaitGuard {
    broker: Arc<Broker>,
    id: String,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        if self.broker.lock().wait_ended(&self.id) {
            self.broker.core.reaper_wake.notify_one();
        }
    }
}

impl Core {
    async fn settle(&self, outcome: Outcome) -> Result<()> {
        if outcome.wrote {
            self.store.barrier().await?;
        }
        drop(outcome.wake);
        for event in outcome.events {
            let _ = self.events.send(event);
        }
        if outcome.reschedule {
            self.reaper_wake.notify_one();
        }
        if outcome.outbox {
            self.outbox_wake.notify_one();
        }
        Ok(())
    }
}
