//! The phone's side, as a command-line device: pair, read sealed questions, answer one.
//!
//! A device folder holds `device.json` (0600): the device's private key, its Relay token,
//! and what the pairing code said about the installation (its id and public key). The
//! installation keys come only from the pairing code, so answers are sealed to the real
//! desktop even if the Relay lies, and a question or verdict the installation did not sign
//! (one the Relay made up) is never shown as genuine.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::model::Kind;
use crate::secret::Secret;
use agentnotify_relay_proto::client::{RelayClient, RelayClientError};
use agentnotify_relay_proto::pairing::{self, PairingCode, PairingError};
use agentnotify_relay_proto::seal::{self, KeyPair, SealError};
use agentnotify_relay_proto::sign;
use agentnotify_relay_proto::wire::{
    answer_event_id, question_event_id, AnswerPayload, AnswerPost, AnswerResult, Envelope,
    QuestionPayload, QuestionView, CONTRACT_VERSION, INTERACTION_REQUEST,
};

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "no device is registered in {0}; run `agentnotify relay device register --code …` first"
    )]
    NotRegistered(PathBuf),
    #[error("a device is already registered in {0}; use another --device-dir")]
    AlreadyRegistered(PathBuf),
    #[error("cannot use {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is damaged: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error(transparent)]
    Pairing(#[from] PairingError),
    #[error(transparent)]
    Relay(#[from] RelayClientError),
    #[error("question {0} is not in this device's inbox (answered, expired, or never sent here)")]
    NoSuchQuestion(String),
    #[error("a sealed question could not be opened: {0}")]
    Unreadable(SealError),
    #[error("a sealed question is not for this device: {0}")]
    Misaddressed(&'static str),
    #[error("not from your computer: the question is not signed by the installation this device paired with")]
    Forged,
    #[error("not from your computer: the verdict on answer {0} is not signed by the installation this device paired with")]
    ForgedVerdict(String),
    #[error(
        "{0} was paired by an older agentnotify (no signing key): pair it again with a fresh code"
    )]
    Outdated(PathBuf),
    #[error("answer refused: {message} ({code})")]
    Refused { code: String, message: String },
    #[error("no verdict on answer {0} yet; check again later")]
    NoVerdict(String),
    #[error("the relay no longer knows this device: it was removed (revoked) or the relay lost it; pair it again with a fresh code")]
    Removed,
}

/// A Relay error as the device sees it: 401 means this device is gone.
fn relay_error(e: RelayClientError) -> DeviceError {
    match e {
        RelayClientError::Refused { status: 401, .. } => DeviceError::Removed,
        e => DeviceError::Relay(e),
    }
}

type Result<T> = std::result::Result<T, DeviceError>;

/// What a registered device keeps.
#[derive(Clone, Serialize, Deserialize)]
pub struct DeviceState {
    pub relay_url: String,
    pub installation_id: String,
    pub installation_public_key: String,
    /// Ed25519: every envelope and verdict must be signed by it.
    #[serde(default)]
    pub installation_signing_key: String,
    pub device_id: String,
    pub device_token: String,
    pub device_secret_key: String,
    pub name: String,
}

impl std::fmt::Debug for DeviceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceState")
            .field("relay_url", &self.relay_url)
            .field("installation_id", &self.installation_id)
            .field("device_id", &self.device_id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A device: its folder's state, ready to talk to the Relay.
pub struct Device {
    pub state: DeviceState,
    key: KeyPair,
    installation_public: [u8; 32],
}

fn state_file(dir: &Path) -> PathBuf {
    dir.join("device.json")
}

/// One event of the device's stream, as [`Device::watch`] reports it.
#[derive(Debug, Clone)]
pub enum StreamEvent {
    /// A question, opened (signed by the installation and addressed to this device).
    Question(Box<QuestionView>),
    /// An envelope that is not from the installation or does not open.
    Rejected {
        event_id: String,
        reason: String,
    },
    /// The connect snapshot is complete.
    Ready(usize),
    Withdrawn(String),
    Verdict(AnswerResult),
    Heartbeat,
    /// The stream broke; the watcher reconnects.
    Disconnected(String),
}

/// No byte for this long means the stream is dead (the Relay sends a heartbeat every 15 s).
const STREAM_SILENCE: Duration = Duration::from_secs(45);

/// What `inbox` found.
#[derive(Debug, Default)]
pub struct Inbox {
    pub questions: Vec<QuestionView>,
    /// Boxes signed by the installation that still do not open (not for this key).
    pub unreadable: usize,
    /// Boxes the installation did not sign: not from your computer.
    pub forged: usize,
}

/// The answer a person gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Choice(String),
    Text(String),
    /// Several choices (a multi_choice), with an optional "Other" text.
    Choices(Vec<String>, Option<String>),
}

impl Device {
    /// Pairs with the installation named in `code` and saves the device in `dir`.
    pub async fn register(dir: &Path, code: &str, name: &str) -> Result<Device> {
        if state_file(dir).exists() {
            return Err(DeviceError::AlreadyRegistered(dir.to_path_buf()));
        }
        let code = PairingCode::decode(code)?;
        let installation_public =
            seal::decode_key(&code.installation_public_key).map_err(|_| PairingError::Malformed)?;
        let key = KeyPair::generate();
        let public_key = key.public_b64();
        let client = RelayClient::new(&code.relay_url, None);
        let (device_id, token) = client
            .register_device(&json!({
                "installation_id": code.installation_id,
                "pairing_token": pairing::pairing_token(&code.pairing_secret),
                "public_key": public_key,
                "name": name,
                "proof": pairing::device_proof(&code.pairing_secret, &code.installation_id, &public_key),
            }))
            .await?;
        let state = DeviceState {
            relay_url: code.relay_url,
            installation_id: code.installation_id,
            installation_public_key: code.installation_public_key,
            installation_signing_key: code.installation_signing_key,
            device_id,
            device_token: token.expose().to_string(),
            device_secret_key: key.secret_b64(),
            name: name.to_string(),
        };
        let io = |source| DeviceError::Io {
            path: dir.to_path_buf(),
            source,
        };
        crate::fsutil::create_private_dir(dir).map_err(io)?;
        let bytes = serde_json::to_vec_pretty(&state).expect("strings serialise");
        crate::fsutil::write_atomic(&state_file(dir), &bytes, 0o600).map_err(io)?;
        Ok(Device {
            state,
            key,
            installation_public,
        })
    }

    pub fn load(dir: &Path) -> Result<Device> {
        let path = state_file(dir);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(DeviceError::NotRegistered(dir.to_path_buf()))
            }
            Err(source) => return Err(DeviceError::Io { path, source }),
        };
        let corrupt = |message: String| DeviceError::Corrupt {
            path: path.clone(),
            message,
        };
        let state: DeviceState =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if state.installation_signing_key.is_empty() {
            return Err(DeviceError::Outdated(dir.to_path_buf()));
        }
        let key = KeyPair::from_secret_b64(&state.device_secret_key)
            .map_err(|e| corrupt(e.to_string()))?;
        let installation_public =
            seal::decode_key(&state.installation_public_key).map_err(|e| corrupt(e.to_string()))?;
        Ok(Device {
            state,
            key,
            installation_public,
        })
    }

    pub fn client(&self) -> RelayClient {
        RelayClient::new(
            &self.state.relay_url,
            Some(Secret::new(self.state.device_token.clone())),
        )
    }

    /// Opens one envelope, checking it is signed by the installation and addressed to this
    /// device.
    pub fn open(&self, e: &Envelope) -> Result<QuestionView> {
        if !sign::verify_envelope(&self.state.installation_signing_key, e) {
            return Err(DeviceError::Forged);
        }
        if e.installation_id != self.state.installation_id {
            return Err(DeviceError::Misaddressed("another installation"));
        }
        if e.device_id != self.state.device_id || e.key_id != self.key.key_id() {
            return Err(DeviceError::Misaddressed("another device or key"));
        }
        let binding = seal::Binding {
            installation_id: &e.installation_id,
            device_id: &e.device_id,
            key_id: &e.key_id,
            event_id: &e.event_id,
            expires_at: &e.expires_at,
        };
        let bytes = self
            .key
            .open(&binding, &e.sealed)
            .map_err(DeviceError::Unreadable)?;
        let payload: QuestionPayload = serde_json::from_slice(&bytes)
            .map_err(|_| DeviceError::Misaddressed("not a question payload"))?;
        if payload.payload_kind != INTERACTION_REQUEST
            || payload.contract_version != CONTRACT_VERSION
            || question_event_id(&payload.interaction.id) != e.event_id
            || payload.interaction.expires_at != e.expires_at
        {
            return Err(DeviceError::Misaddressed("payload and envelope disagree"));
        }
        Ok(payload.interaction)
    }

    /// Fetches and opens every waiting question. Boxes that are not signed by the
    /// installation or do not open are counted, not shown: a box the Relay made up or
    /// altered is never displayed.
    pub async fn inbox(&self) -> Result<Inbox> {
        let mut inbox = Inbox::default();
        for e in self.client().envelopes().await.map_err(relay_error)? {
            match self.open(&e) {
                Ok(q) => inbox.questions.push(q),
                Err(DeviceError::Forged) => inbox.forged += 1,
                Err(_) => inbox.unreadable += 1,
            }
        }
        inbox
            .questions
            .sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(inbox)
    }

    /// Follows the device's stream, reconnecting (1 s doubling to 30 s) until `tx` closes;
    /// returns `Removed` once the device is revoked.
    pub async fn watch(&self, tx: tokio::sync::mpsc::Sender<StreamEvent>) -> Result<()> {
        let mut delay = Duration::from_secs(1);
        loop {
            let reason = match self.client().open_events().await.map_err(relay_error) {
                Ok(res) => match self.follow(res, &tx, &mut delay).await {
                    Ok(reason) => reason,
                    Err(e) => return Err(e),
                },
                Err(DeviceError::Removed) => return Err(DeviceError::Removed),
                Err(e) => e.to_string(),
            };
            if tx.send(StreamEvent::Disconnected(reason)).await.is_err() {
                return Ok(());
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }

    /// Reads one connection's events; returns why it ended.
    async fn follow(
        &self,
        mut res: reqwest::Response,
        tx: &tokio::sync::mpsc::Sender<StreamEvent>,
        delay: &mut Duration,
    ) -> Result<String> {
        let mut buf = String::new();
        loop {
            let chunk = match tokio::time::timeout(STREAM_SILENCE, res.chunk()).await {
                Err(_) => return Ok("no heartbeat".into()),
                Ok(Err(e)) => return Ok(format!("stream broke: {e}")),
                Ok(Ok(None)) => return Ok("stream ended".into()),
                Ok(Ok(Some(c))) => c,
            };
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let mut name = "";
                let mut data = "";
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        name = v;
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = v;
                    }
                }
                let event = match name {
                    "envelope" => match serde_json::from_str::<Envelope>(data) {
                        Ok(e) => match self.open(&e) {
                            Ok(q) => StreamEvent::Question(Box::new(q)),
                            Err(why) => StreamEvent::Rejected {
                                event_id: e.event_id,
                                reason: why.to_string(),
                            },
                        },
                        Err(_) => continue,
                    },
                    "ready" => {
                        *delay = Duration::from_secs(1);
                        let n = serde_json::from_str::<serde_json::Value>(data)
                            .ok()
                            .and_then(|v| v["envelopes"].as_u64())
                            .unwrap_or(0);
                        StreamEvent::Ready(n as usize)
                    }
                    "withdrawn" => match serde_json::from_str::<serde_json::Value>(data) {
                        Ok(v) => {
                            StreamEvent::Withdrawn(v["event_id"].as_str().unwrap_or("").into())
                        }
                        Err(_) => continue,
                    },
                    "verdict" => match serde_json::from_str::<AnswerResult>(data) {
                        Ok(r) => StreamEvent::Verdict(r),
                        Err(_) => continue,
                    },
                    "heartbeat" => StreamEvent::Heartbeat,
                    "revoked" => return Err(DeviceError::Removed),
                    _ => continue,
                };
                if tx.send(event).await.is_err() {
                    return Ok("stopped".into());
                }
            }
        }
    }

    /// The opened question `interaction_id` from the inbox.
    pub async fn question(&self, interaction_id: &str) -> Result<QuestionView> {
        let event = question_event_id(interaction_id);
        let envelope = self
            .client()
            .envelopes()
            .await
            .map_err(relay_error)?
            .into_iter()
            .find(|e| e.event_id == event)
            .ok_or_else(|| DeviceError::NoSuchQuestion(interaction_id.to_string()))?;
        self.open(&envelope)
    }

    /// The answer payload for `question` (digest and nonce from the sealed question).
    pub fn payload(
        &self,
        question: &QuestionView,
        response_id: &str,
        answer: &Answer,
    ) -> AnswerPayload {
        // A multi_choice takes `choice_ids`, however many were chosen.
        let multi = question.question.kind == Kind::MultiChoice;
        let (choice_id, choice_ids, text) = match answer {
            Answer::Choice(c) if multi => (None, Some(vec![c.clone()]), None),
            Answer::Choice(c) => (Some(c.clone()), None, None),
            Answer::Text(t) => (None, None, Some(t.clone())),
            Answer::Choices(ids, t) => (None, Some(ids.clone()), t.clone()),
        };
        AnswerPayload {
            contract_version: CONTRACT_VERSION.into(),
            response_id: response_id.to_string(),
            interaction_id: question.id.clone(),
            request_digest: question.request_digest.clone(),
            nonce: question.nonce.clone(),
            choice_id,
            choice_ids,
            text,
            installation_id: self.state.installation_id.clone(),
            device_id: self.state.device_id.clone(),
        }
    }

    /// Seals `payload` to the installation key, bound to the question's expiry.
    pub fn seal(&self, payload: &AnswerPayload, expires_at: &str) -> AnswerPost {
        let key_id = seal::key_id(&self.installation_public);
        let event_id = answer_event_id(&payload.response_id);
        let binding = seal::Binding {
            installation_id: &payload.installation_id,
            device_id: &payload.device_id,
            key_id: &key_id,
            event_id: &event_id,
            expires_at,
        };
        let bytes = serde_json::to_vec(payload).expect("a payload serialises");
        let sealed = seal::seal(&self.installation_public, &binding, &bytes)
            .expect("the installation key from the pairing code was checked at load");
        AnswerPost {
            contract_version: CONTRACT_VERSION.into(),
            response_id: payload.response_id.clone(),
            interaction_id: payload.interaction_id.clone(),
            installation_id: payload.installation_id.clone(),
            device_id: payload.device_id.clone(),
            sealed: Some(sealed),
            key_id: Some(key_id),
            expires_at: Some(expires_at.to_string()),
            request_digest: None,
            nonce: None,
            choice_id: None,
            text: None,
            received_at: None,
        }
    }

    /// Answers a question from the inbox; returns the response id the Relay accepted.
    pub async fn answer(
        &self,
        interaction_id: &str,
        answer: &Answer,
        response_id: Option<String>,
    ) -> Result<String> {
        let question = self.question(interaction_id).await?;
        let response_id = response_id.unwrap_or_else(|| format!("dev-{}", crate::model::new_id()));
        let post = self.seal(
            &self.payload(&question, &response_id, answer),
            &question.expires_at,
        );
        self.send(&post).await?;
        Ok(response_id)
    }

    /// Posts an answer; a Relay refusal becomes [`DeviceError::Refused`] with its reason.
    pub async fn send(&self, post: &AnswerPost) -> Result<AnswerResult> {
        match self.client().post_answer(post).await {
            Ok(r) => Ok(r),
            Err(RelayClientError::Refused { code, message, .. }) => {
                Err(DeviceError::Refused { code, message })
            }
            Err(e) => Err(relay_error(e)),
        }
    }

    /// Waits (bounded) until the broker has judged the answer to `interaction_id`; refusals
    /// are errors, and so is a verdict the installation did not sign.
    pub async fn verdict(
        &self,
        response_id: &str,
        interaction_id: &str,
        timeout: Duration,
    ) -> Result<AnswerResult> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // A long-poll: the Relay replies the moment the broker's verdict arrives.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let r = self
                .client()
                .answer_status_wait(response_id, left.min(Duration::from_secs(30)))
                .await
                .map_err(relay_error)?;
            let judged = matches!(r.status.as_str(), "accepted" | "refused");
            if judged
                && !sign::verify_verdict(
                    &self.state.installation_signing_key,
                    &r,
                    &self.state.installation_id,
                    &self.state.device_id,
                    interaction_id,
                )
            {
                return Err(DeviceError::ForgedVerdict(response_id.to_string()));
            }
            match r.status.as_str() {
                "accepted" => return Ok(r),
                "refused" => {
                    return Err(DeviceError::Refused {
                        code: r.code.unwrap_or_else(|| "refused".into()),
                        message: r.message.unwrap_or_else(|| "no reason given".into()),
                    })
                }
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(DeviceError::NoVerdict(response_id.to_string()))
                }
                // Held less than asked (a restart, or a Relay without long-polls).
                _ if left < Duration::from_secs(1) => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                _ => {}
            }
        }
    }
}
