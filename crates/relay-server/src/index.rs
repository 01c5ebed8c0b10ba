//! The Relay's two secondary indexes, kept in the same write as the records they point at:
//! an installation's devices, and the devices holding one question's envelope.
//!
//! Without them, listing one installation's devices and withdrawing one answered question
//! read every device of every installation inside the write lock: with 10,000 paired
//! devices an accepted answer cost 10,000 deletes, and the whole Relay wrote about nine
//! answers a second. With them each costs what the one installation, or the one
//! question, holds.

use agentnotify_relay_proto::wire::{question_event_id, DeviceInfo, Envelope};

use crate::kv::{Scope, Tree, Write};
use crate::live::Change;
use crate::store::{key2, sha256_hex, AnswerRecord, RelayServer, StoreFail};

/// Set in [`Tree::Meta`] once every record made before the indexes existed is indexed.
const BUILT: &[u8] = b"indexes_v1";

/// The start of every recipient key of `event_id` in `inst`: the event goes by its
/// SHA-256, so the device id that follows is found by position, whatever the event id holds.
fn recipients_prefix(inst: &str, event_id: &str) -> Vec<u8> {
    key2(inst, sha256_hex(event_id.as_bytes()).as_bytes())
}

fn recipient_key(inst: &str, event_id: &str, device: &str) -> Vec<u8> {
    let mut k = recipients_prefix(inst, event_id);
    k.extend_from_slice(device.as_bytes());
    k
}

/// The recipient entry of a stored envelope.
fn recipient_of(e: &Envelope) -> Vec<u8> {
    recipient_key(&e.installation_id, &e.event_id, &e.device_id)
}

impl Write<'_> {
    /// Stores (or replaces) `e` for its device; returns whether it replaced one.
    pub(crate) async fn put_envelope(&mut self, e: &Envelope) -> Result<bool, StoreFail> {
        let key = key2(&e.device_id, e.event_id.as_bytes());
        let replaced = self.get(Tree::Envelopes, &key).await?.is_some();
        self.put_json(Tree::Envelopes, &key, e).await?;
        self.index_envelope(e).await?;
        Ok(replaced)
    }

    async fn index_envelope(&mut self, e: &Envelope) -> Result<(), StoreFail> {
        self.put(Tree::Recipients, &recipient_of(e), b"").await
    }

    async fn index_device(&mut self, d: &DeviceInfo) -> Result<(), StoreFail> {
        let key = key2(&d.installation_id, d.device_id.as_bytes());
        self.put(Tree::InstallationDevices, &key, b"").await
    }

    /// Removes a record with what points at it or from it: an envelope's recipient entry,
    /// an answer's response-id entry.
    pub(crate) async fn remove_record(
        &mut self,
        t: Tree,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), StoreFail> {
        match t {
            Tree::Envelopes => {
                if let Ok(e) = serde_json::from_slice::<Envelope>(value) {
                    self.remove(Tree::Recipients, &recipient_of(&e)).await?;
                }
            }
            Tree::Answers => {
                if let Ok(rec) = serde_json::from_slice::<AnswerRecord>(value) {
                    let a = &rec.answer;
                    self.remove(
                        Tree::AnswerIds,
                        &key2(&a.installation_id, a.response_id.as_bytes()),
                    )
                    .await?;
                }
            }
            _ => {}
        }
        self.remove(t, key).await?;
        Ok(())
    }

    /// Removes one envelope and its index entry; returns whether it was there.
    async fn remove_envelope(
        &mut self,
        inst: &str,
        device: &str,
        event_id: &str,
    ) -> Result<bool, StoreFail> {
        self.remove(Tree::Recipients, &recipient_key(inst, event_id, device))
            .await?;
        Ok(self
            .remove(Tree::Envelopes, &key2(device, event_id.as_bytes()))
            .await?
            .is_some())
    }

    /// Removes the question `interaction_id` from every device of `inst` that holds it,
    /// announcing each removal; returns how many envelopes it removed.
    pub(crate) async fn withdraw_question(
        &mut self,
        inst: &str,
        interaction_id: &str,
    ) -> Result<usize, StoreFail> {
        let event = question_event_id(interaction_id);
        let event_id = event.as_str();
        let prefix = recipients_prefix(inst, event_id);
        let mut removed = 0;
        for (key, _) in self.scan(Tree::Recipients, &prefix).await? {
            let device = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            if self.remove_envelope(inst, &device, event_id).await? {
                removed += 1;
                self.announce(Change::Withdrawn {
                    device,
                    event_id: event_id.to_string(),
                })
                .await?;
            }
        }
        Ok(removed)
    }

    /// Stores a new device and lists it under its installation.
    pub(crate) async fn put_device(&mut self, d: &DeviceInfo) -> Result<(), StoreFail> {
        self.put_json(Tree::Devices, d.device_id.as_bytes(), d)
            .await?;
        self.index_device(d).await
    }

    /// Removes a device with its token, its listing and its envelopes. Returns whether it
    /// existed.
    pub(crate) async fn remove_device(&mut self, device_id: &str) -> Result<bool, StoreFail> {
        let Some(device) = self
            .get_json::<DeviceInfo>(Tree::Devices, device_id.as_bytes())
            .await?
        else {
            return Ok(false);
        };
        let inst = device.installation_id;
        self.remove(Tree::Devices, device_id.as_bytes()).await?;
        self.remove(
            Tree::InstallationDevices,
            &key2(&inst, device_id.as_bytes()),
        )
        .await?;
        self.remove(Tree::PushSubscriptions, device_id.as_bytes())
            .await?;
        if let Some(hash) = self
            .remove(Tree::DeviceTokens, device_id.as_bytes())
            .await?
        {
            self.remove(Tree::Tokens, &hash).await?;
        }
        let prefix = key2(device_id, b"");
        for (key, _) in self.scan(Tree::Envelopes, &prefix).await? {
            let event_id = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            self.remove_envelope(&inst, device_id, &event_id).await?;
        }
        Ok(true)
    }
}

impl RelayServer {
    /// The devices of one installation.
    pub(crate) async fn installation_devices(
        &self,
        inst: &str,
    ) -> Result<Vec<DeviceInfo>, StoreFail> {
        let prefix = key2(inst, b"");
        let mut out = Vec::new();
        for (key, _) in self.kv.scan(Tree::InstallationDevices, &prefix).await? {
            if let Some(d) = self.get(Tree::Devices, &key[prefix.len()..]).await? {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// Indexes the devices and envelopes stored before the indexes existed: once per store,
    /// at start, in one write (so two processes starting at once do it once).
    pub(crate) async fn build_indexes(&self) -> Result<(), StoreFail> {
        if self.kv.get(Tree::Meta, BUILT).await?.is_some() {
            return Ok(());
        }
        let mut w = self.write(Scope::Relay).await?;
        if w.get(Tree::Meta, BUILT).await?.is_some() {
            return Ok(());
        }
        let mut devices = 0;
        for (_, v) in w.scan(Tree::Devices, b"").await? {
            w.index_device(&serde_json::from_slice(&v)?).await?;
            devices += 1;
        }
        let mut envelopes = 0;
        for (_, v) in w.scan(Tree::Envelopes, b"").await? {
            w.index_envelope(&serde_json::from_slice(&v)?).await?;
            envelopes += 1;
        }
        w.put(Tree::Meta, BUILT, b"1").await?;
        w.commit(self).await?;
        tracing::info!(devices, envelopes, "relay indexes built");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agentnotify_model::Timestamp;
    use agentnotify_relay_proto::wire::{AnswerPost, AnswerResult, Envelope};

    use crate::kv::{Scope, Tree};
    use crate::store::{key2, AnswerRecord, RelayServer};

    fn envelope(device: &str, i: usize, expires: Timestamp) -> Envelope {
        Envelope {
            installation_id: "inst".into(),
            device_id: device.into(),
            event_id: format!("interaction:{i:032x}"),
            key_id: "k".into(),
            expires_at: expires.to_rfc3339(),
            sealed: "x".into(),
            signature: None,
            stored_at: None,
        }
    }

    async fn count(s: &RelayServer, t: Tree) -> usize {
        s.kv.scan(t, b"").await.unwrap().len()
    }

    /// Pruning, in pages over more than one write: expired envelopes leave with their
    /// recipient entries, old answers with their response ids; live records stay.
    #[tokio::test]
    async fn pruning_removes_old_records_with_their_index_entries_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let s = RelayServer::open(dir.path()).unwrap();
        let now = Timestamp::now();
        let long_ago = now.minus(Duration::from_secs(2 * 3600));
        let soon = now.plus(Duration::from_secs(600));
        let mut w = s.write(Scope::Relay).await.unwrap();
        for i in 0..1_203 {
            let live = i % 400 == 0;
            let e = envelope(
                &format!("d{}", i % 7),
                i,
                if live { soon } else { long_ago },
            );
            w.put_envelope(&e).await.unwrap();
        }
        for (i, received) in [now.minus(Duration::from_secs(8 * 86_400)), now]
            .into_iter()
            .enumerate()
        {
            let answer: AnswerPost = serde_json::from_value(serde_json::json!({
                "contract_version": "1", "response_id": format!("r{i}"),
                "interaction_id": format!("{i:032x}"), "installation_id": "inst",
                "device_id": "d0"}))
            .unwrap();
            let rec = AnswerRecord {
                seq: i as u64 + 1,
                body_sha256: String::new(),
                result: AnswerResult::pending(&answer.response_id),
                answer,
                received,
            };
            let seq = rec.seq.to_be_bytes();
            w.put_json(Tree::Answers, &key2("inst", &seq), &rec)
                .await
                .unwrap();
            w.put(
                Tree::AnswerIds,
                &key2("inst", format!("r{i}").as_bytes()),
                &seq,
            )
            .await
            .unwrap();
        }
        w.commit(&s).await.unwrap();
        assert_eq!(count(&s, Tree::Recipients).await, 1_203);
        let removed = s.prune(now).await.unwrap();
        // Four live envelopes (0, 400, 800, 1200), 1,199 expired ones, one old answer.
        assert_eq!(removed, 1_199 + 1);
        assert_eq!(count(&s, Tree::Envelopes).await, 4);
        assert_eq!(
            count(&s, Tree::Recipients).await,
            4,
            "index entries left behind"
        );
        assert_eq!(count(&s, Tree::Answers).await, 1);
        assert_eq!(count(&s, Tree::AnswerIds).await, 1);
        let mut w = s.write(Scope::Relay).await.unwrap();
        assert_eq!(
            w.withdraw_question("inst", &format!("{:032x}", 400))
                .await
                .unwrap(),
            1
        );
        w.commit(&s).await.unwrap();
    }
}
