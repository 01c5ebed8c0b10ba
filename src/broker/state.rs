//! The broker's in-memory state and its transitions. Always used under the broker's lock;
//! every transition is written through to the store in the same critical section.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use tokio::sync::watch;

use super::outbox::Subject;
use super::{BrokerError, Result};
use crate::model::{
    Interaction, Notification, NotificationRequest, NotificationStatus, Response, Status, Timestamp,
};
use crate::store::Store;

/// A change announced to live surfaces after it is durable.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// `interaction` or `notification`.
    pub topic: &'static str,
    pub id: String,
    pub status: &'static str,
}

/// What a transaction did, to be settled after the lock is released: made durable, then
/// waiters woken (by dropping the watch senders) and events sent.
#[derive(Default)]
pub struct Outcome {
    pub wrote: bool,
    pub wake: Vec<watch::Sender<()>>,
    pub events: Vec<Event>,
    /// A deadline may now be earlier than the reaper thinks.
    pub reschedule: bool,
    /// New or updated questions and notifications, to be queued for their channels.
    pub deliver: Vec<(Subject, String)>,
    /// Questions and notifications that were settled, to be withdrawn from their channels.
    pub withdraw: Vec<(Subject, String)>,
    /// New outbox entries were written: the dispatcher has work.
    pub outbox: bool,
}

impl Outcome {
    /// Nothing to flush, wake, announce or reschedule.
    pub fn is_empty(&self) -> bool {
        !self.wrote
            && self.wake.is_empty()
            && self.events.is_empty()
            && !self.reschedule
            && self.deliver.is_empty()
            && self.withdraw.is_empty()
            && !self.outbox
    }
}

pub struct Pending {
    pub interaction: Interaction,
    /// Dropped when the interaction leaves `pending`: every receiver wakes.
    pub changed: watch::Sender<()>,
    pub waits_in_flight: u32,
    /// Owners that asked (or whose wait slice ran out) and have not started their next wait
    /// yet: with `waits_in_flight`, they hold the question, so no other request shares it.
    pub owners_expected: u32,
    /// When the owner lease lapses if no wait is in flight (leased questions only).
    pub lease_deadline: Option<Timestamp>,
}

#[derive(Default)]
pub struct State {
    pub pending: HashMap<String, Pending>,
    /// key → ids of the pending interactions holding it, oldest first (more than one only
    /// while identical calls wait at the same time).
    by_key: HashMap<String, Vec<String>>,
    expiries: BTreeSet<(Timestamp, String)>,
    leases: BTreeSet<(Timestamp, String)>,
    /// key → id of the active notification holding it.
    notification_keys: HashMap<String, String>,
    /// key → (created, id) of the newest notification under it, in any state: ARC events
    /// find their condition without reading every stored notification.
    newest_keyed: HashMap<String, (Timestamp, String)>,
    /// interaction id → active notifications announcing it.
    notifications_for: HashMap<String, Vec<String>>,
}

impl Pending {
    /// An owner still waits for this question (or is between two waits): one answer must
    /// never release two callers, so an identical request gets a question of its own.
    pub fn is_held(&self) -> bool {
        self.waits_in_flight > 0 || self.owners_expected > 0
    }
}

impl State {
    /// The id of the newest notification under `key`, in any state.
    pub fn newest_notification(&self, key: &str) -> Option<String> {
        self.newest_keyed.get(key).map(|(_, id)| id.clone())
    }

    /// Remembers `n` as its key's newest if it is (at start, for every stored one; then
    /// for each new one).
    pub fn note_keyed(&mut self, n: &Notification) {
        let Some(key) = &n.key else { return };
        let this = (n.created_at, n.id.clone());
        let newer = self.newest_keyed.get(key).is_none_or(|known| this > *known);
        if newer {
            self.newest_keyed.insert(key.clone(), this);
        }
    }

    /// Forgets what pruning may have removed; the caller notes the survivors again.
    pub fn forget_keyed(&mut self) {
        self.newest_keyed.clear();
    }

    /// The pending interactions holding `key`, oldest first.
    pub fn keyed(&self, key: &str) -> Vec<String> {
        self.by_key.get(key).cloned().unwrap_or_default()
    }

    pub fn track_pending(&mut self, record: Interaction, lease_deadline: Timestamp) {
        let id = record.id.clone();
        if let Some(key) = &record.key {
            self.by_key.entry(key.clone()).or_default().push(id.clone());
        }
        self.expiries.insert((record.expires_at, id.clone()));
        let lease_deadline = record.owner_lease.then_some(lease_deadline);
        if let Some(t) = lease_deadline {
            self.leases.insert((t, id.clone()));
        }
        let (changed, _) = watch::channel(());
        self.pending.insert(
            id,
            Pending {
                interaction: record,
                changed,
                waits_in_flight: 0,
                owners_expected: 0,
                lease_deadline,
            },
        );
    }

    pub fn track_notification(&mut self, n: &Notification) {
        if n.status != NotificationStatus::Active {
            return;
        }
        if let Some(key) = &n.key {
            self.notification_keys.insert(key.clone(), n.id.clone());
        }
        if let Some(iid) = &n.interaction_id {
            self.notifications_for
                .entry(iid.clone())
                .or_default()
                .push(n.id.clone());
        }
    }

    pub fn is_busy(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn pending_records(&self) -> Vec<Interaction> {
        self.pending
            .values()
            .map(|p| p.interaction.clone())
            .collect()
    }

    /// The current record: from memory when pending, else from the store.
    pub fn read(&self, store: &Store, id: &str) -> Result<Interaction> {
        if let Some(p) = self.pending.get(id) {
            return Ok(p.interaction.clone());
        }
        if !crate::model::is_id(id) {
            return Err(BrokerError::NotFound("interaction"));
        }
        store
            .get_interaction(id)?
            .ok_or(BrokerError::NotFound("interaction"))
    }

    /// Expires questions past their deadline and cancels leased ones whose owner is gone.
    pub fn sweep(&mut self, store: &Store, now: Timestamp, out: &mut Outcome) -> Result<()> {
        while let Some((t, id)) = self.expiries.first().cloned() {
            if t > now {
                break;
            }
            self.finish(store, &id, Status::Expired, None, now, out)?;
            tracing::info!(id = %id, "interaction expired");
        }
        while let Some((t, id)) = self.leases.first().cloned() {
            if t > now {
                break;
            }
            self.leases.remove(&(t, id.clone()));
            let idle = match self.pending.get_mut(&id) {
                Some(p) if p.waits_in_flight == 0 => true,
                Some(p) => {
                    // Still being waited on: the lease clock restarts when that wait ends.
                    p.lease_deadline = None;
                    false
                }
                None => false,
            };
            if idle {
                self.finish(store, &id, Status::Cancelled, None, now, out)?;
                tracing::info!(id = %id, "owner lease lapsed; interaction cancelled");
            }
        }
        Ok(())
    }

    /// The earliest moment a sweep has something to do.
    pub fn next_deadline(&self) -> Option<Timestamp> {
        let e = self.expiries.first().map(|(t, _)| *t);
        let l = self.leases.first().map(|(t, _)| *t);
        match (e, l) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves a pending interaction to a terminal state, durably and exactly once.
    pub fn finish(
        &mut self,
        store: &Store,
        id: &str,
        status: Status,
        response: Option<Response>,
        now: Timestamp,
        out: &mut Outcome,
    ) -> Result<Interaction> {
        let Some(p) = self.pending.get(id) else {
            return self.read(store, id);
        };
        let mut record = p.interaction.clone();
        record.status = status;
        record.updated_at = now;
        if response.is_some() {
            record.answered_at = Some(now);
            record.response = response;
        }
        // Written first: if the store fails, the state is untouched.
        store.put_interaction(&record)?;
        let p = self.pending.remove(id).expect("checked above");
        if let Some(key) = &record.key {
            if let Some(ids) = self.by_key.get_mut(key) {
                ids.retain(|x| x != id);
                if ids.is_empty() {
                    self.by_key.remove(key);
                }
            }
        }
        self.expiries.remove(&(record.expires_at, id.to_string()));
        if let Some(t) = p.lease_deadline {
            self.leases.remove(&(t, id.to_string()));
        }
        out.wrote = true;
        out.events.push(Event {
            topic: "interaction",
            id: id.to_string(),
            status: status.as_str(),
        });
        for nid in self.notifications_for.remove(id).unwrap_or_default() {
            self.close_notification(store, &nid, NotificationStatus::Resolved, now, out)?;
        }
        out.wake.push(p.changed);
        out.withdraw.push((Subject::Interaction, id.to_string()));
        Ok(record)
    }

    pub fn create(
        &mut self,
        store: &Store,
        record: Interaction,
        lease_deadline: Timestamp,
        out: &mut Outcome,
    ) -> Result<()> {
        store.put_interaction(&record)?;
        out.wrote = true;
        out.reschedule = true;
        out.events.push(Event {
            topic: "interaction",
            id: record.id.clone(),
            status: "pending",
        });
        let (id, owned) = (record.id.clone(), record.owner_lease);
        out.deliver.push((Subject::Interaction, record.id.clone()));
        self.track_pending(record, lease_deadline);
        if owned {
            if let Some(p) = self.pending.get_mut(&id) {
                p.owners_expected = 1;
            }
        }
        Ok(())
    }

    /// Keyed reuse: the same question asked again, by a caller once nobody holds it
    /// ([`Pending::is_held`]). It takes over the owner lease.
    pub fn reuse(
        &mut self,
        store: &Store,
        id: &str,
        owner_lease: bool,
        now: Timestamp,
        lease_deadline: Timestamp,
        out: &mut Outcome,
    ) -> Result<Interaction> {
        let p = self.pending.get_mut(id).expect("reuse of a pending id");
        if owner_lease && !p.interaction.owner_lease {
            p.interaction.owner_lease = true;
            p.interaction.updated_at = now;
            store.put_interaction(&p.interaction)?;
            out.wrote = true;
        }
        if owner_lease {
            p.owners_expected += 1;
        }
        let record = p.interaction.clone();
        self.refresh_lease(id, lease_deadline);
        out.reschedule = true;
        Ok(record)
    }

    /// Pushes the lease deadline of a leased question out to `deadline`.
    pub fn refresh_lease(&mut self, id: &str, deadline: Timestamp) {
        let Some(p) = self.pending.get_mut(id) else {
            return;
        };
        if !p.interaction.owner_lease {
            return;
        }
        if let Some(old) = p.lease_deadline.replace(deadline) {
            self.leases.remove(&(old, id.to_string()));
        }
        self.leases.insert((deadline, id.to_string()));
    }

    /// A wait ended. Returns true when the lease clock (re)started and the reaper must look.
    pub fn wait_ended(&mut self, id: &str) -> bool {
        let Some(p) = self.pending.get_mut(id) else {
            return false;
        };
        p.waits_in_flight = p.waits_in_flight.saturating_sub(1);
        if p.waits_in_flight > 0 || !p.interaction.owner_lease {
            return false;
        }
        match p.lease_deadline {
            Some(t) => {
                // Still scheduled from the last wait start.
                self.leases.insert((t, id.to_string()));
            }
            None => {
                // The deadline passed while the wait was in flight: it lapses now.
                let t = Timestamp::now();
                p.lease_deadline = Some(t);
                self.leases.insert((t, id.to_string()));
            }
        }
        true
    }

    pub fn notify(
        &mut self,
        store: &Store,
        req: NotificationRequest,
        now: Timestamp,
        out: &mut Outcome,
    ) -> Result<(Notification, bool)> {
        let existing = req
            .key
            .as_ref()
            .and_then(|k| self.notification_keys.get(k))
            .cloned();
        if let Some(id) = existing {
            if let Some(mut n) = store.get_notification(&id)? {
                self.untrack_notification(&n);
                req.update(&mut n, now);
                store.put_notification(&n)?;
                self.track_notification(&n);
                out.wrote = true;
                // An update in place is delivered again (the channels replace what they show).
                out.deliver.push((Subject::Notification, n.id.clone()));
                self.link_or_resolve(store, &mut n, now, out)?;
                return Ok((n, false));
            }
        }
        let mut n = req.into_notification(now);
        store.put_notification(&n)?;
        out.wrote = true;
        self.track_notification(&n);
        self.note_keyed(&n);
        out.events.push(Event {
            topic: "notification",
            id: n.id.clone(),
            status: "active",
        });
        out.deliver.push((Subject::Notification, n.id.clone()));
        self.link_or_resolve(store, &mut n, now, out)?;
        Ok((n, true))
    }

    /// A notification about a question that already ended is resolved at once.
    fn link_or_resolve(
        &mut self,
        store: &Store,
        n: &mut Notification,
        now: Timestamp,
        out: &mut Outcome,
    ) -> Result<()> {
        let Some(iid) = n.interaction_id.clone() else {
            return Ok(());
        };
        if self.pending.contains_key(&iid) {
            return Ok(());
        }
        if store.get_interaction(&iid)?.is_some() {
            *n = self.close_notification(
                store,
                &n.id.clone(),
                NotificationStatus::Resolved,
                now,
                out,
            )?;
        }
        Ok(())
    }

    fn untrack_notification(&mut self, n: &Notification) {
        if let Some(key) = &n.key {
            if self.notification_keys.get(key) == Some(&n.id) {
                self.notification_keys.remove(key);
            }
        }
        if let Some(iid) = &n.interaction_id {
            if let Some(list) = self.notifications_for.get_mut(iid) {
                list.retain(|x| x != &n.id);
                if list.is_empty() {
                    self.notifications_for.remove(iid);
                }
            }
        }
    }

    pub fn close_notification(
        &mut self,
        store: &Store,
        id: &str,
        status: NotificationStatus,
        now: Timestamp,
        out: &mut Outcome,
    ) -> Result<Notification> {
        let mut n = store
            .get_notification(id)?
            .ok_or(BrokerError::NotFound("notification"))?;
        if n.status != NotificationStatus::Active {
            return Ok(n);
        }
        self.untrack_notification(&n);
        n.status = status;
        n.updated_at = now;
        n.resolved_at = Some(now);
        store.put_notification(&n)?;
        out.wrote = true;
        out.events.push(Event {
            topic: "notification",
            id: n.id.clone(),
            status: status.as_str(),
        });
        out.withdraw.push((Subject::Notification, n.id.clone()));
        Ok(n)
    }
}
