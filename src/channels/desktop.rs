//! Desktop notifications (SPEC §11.6): `org.freedesktop.Notifications` on the session D-Bus,
//! through zbus.
//!
//! `Notify` with app name `agentnotify`, the title as summary, the body (consent applied by
//! `content`), urgency critical for permission questions, and, when the server lists the
//! `actions` capability, the `default` action (a click on the notification opens the web UI
//! with a fresh one-time link) and — with `--answer-buttons` — one action per choice. An
//! `ActionInvoked` signal answers the question (`source: desktop`) only if it comes from the
//! bus name that owns `org.freedesktop.Notifications` at that moment: any other connection
//! on the bus can emit a signal with the same name and arguments. A repeat uses
//! `replaces_id`; a settled question is closed with `CloseNotification`. No session bus →
//! the channel is unavailable (its deliveries are retried like any failure); nothing else
//! breaks.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{Notify, OnceCell};
use zbus::zvariant;

use super::config::Channel;
use super::content::Content;
use super::{ChannelError, Hub};
use crate::broker::outbox::retry_wait;
use crate::model::{AnswerSubmission, Interaction, Status};

const NAME: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";
/// The action key of a click on the notification itself: opens the web UI.
const OPEN: &str = "default";
/// Longest a D-Bus call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// What a shown notification can answer.
struct Shown {
    interaction_id: String,
    request_digest: String,
    choices: Vec<String>,
}

/// One session-bus connection and what was learnt over it.
struct Session {
    conn: zbus::Connection,
    /// The notification server's capabilities, read on the first notification over this
    /// connection instead of before every one (a round trip for an answer that does not
    /// change while the server runs). A new connection starts without them, and a failed
    /// `Notify` forgets them: the server may have gone or been replaced.
    capabilities: Mutex<Option<Vec<String>>>,
}

impl Session {
    /// Whether the server lists `name`, asking it only when not known for this connection.
    async fn has_capability(&self, name: &str) -> Result<bool, String> {
        if let Some(caps) = &*self.capabilities.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(caps.iter().any(|c| c == name));
        }
        let caps: Vec<String> = call(&self.conn, "GetCapabilities", &()).await?;
        let has = caps.iter().any(|c| c == name);
        *self.capabilities.lock().unwrap_or_else(|p| p.into_inner()) = Some(caps);
        Ok(has)
    }

    fn forget_capabilities(&self) {
        *self.capabilities.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The desktop side: one session-bus connection, opened on first use.
#[derive(Default)]
pub struct Desktop {
    conn: OnceCell<Session>,
    /// Why the last connection attempt failed, if it did.
    last_error: Mutex<Option<String>>,
    /// Notification id → what it answers (questions with buttons only).
    shown: Mutex<HashMap<u32, Shown>>,
    /// Notifications shown with the `default` action (a click on the notification itself).
    openable: Mutex<HashSet<u32>>,
    /// Set once something was shown: the listener starts then, not before.
    wanted: Notify,
    listening: AtomicBool,
}

fn unavailable(id: &str, why: impl Into<String>) -> ChannelError {
    ChannelError::Unavailable(id.to_string(), why.into())
}

/// Calls `method` of the notification server, within [`CALL_TIMEOUT`].
async fn call<B, R>(conn: &zbus::Connection, method: &str, body: &B) -> Result<R, String>
where
    B: serde::Serialize + zvariant::DynamicType,
    R: for<'d> zvariant::DynamicDeserialize<'d>,
{
    let reply = tokio::time::timeout(
        CALL_TIMEOUT,
        conn.call_method(Some(NAME), PATH, Some(NAME), method, body),
    )
    .await
    .map_err(|_| format!("{method} timed out"))?
    .map_err(|e| format!("{method} failed: {e}"))?;
    reply
        .body()
        .deserialize::<R>()
        .map_err(|e| format!("{method} answered oddly: {e}"))
}

impl Desktop {
    /// Whether notifications can be shown here, and if not why.
    pub fn availability(&self) -> Result<(), String> {
        if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() {
            return Err("no session D-Bus (DBUS_SESSION_BUS_ADDRESS is not set)".into());
        }
        match &*self.last_error.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) if self.conn.get().is_none() => Err(e.clone()),
            _ => Ok(()),
        }
    }

    async fn connection(&self) -> Result<&Session, String> {
        if let Err(e) = self.availability() {
            if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() {
                return Err(e);
            }
        }
        let conn = self
            .conn
            .get_or_try_init(|| async {
                match tokio::time::timeout(CALL_TIMEOUT, zbus::Connection::session()).await {
                    Ok(Ok(conn)) => Ok(Session {
                        conn,
                        capabilities: Mutex::new(None),
                    }),
                    Ok(Err(e)) => Err(format!("cannot reach the session D-Bus: {e}")),
                    Err(_) => Err("the session D-Bus did not answer".to_string()),
                }
            })
            .await;
        let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        match conn {
            Ok(c) => {
                *last = None;
                Ok(c)
            }
            Err(e) => {
                *last = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Shows (or replaces, with the receipt of an earlier showing) a notification.
    pub async fn show(
        &self,
        c: &Channel,
        content: &Content,
        question: Option<&Interaction>,
        previous: Option<Value>,
    ) -> Result<Option<Value>, ChannelError> {
        let session = self.connection().await.map_err(|e| unavailable(&c.id, e))?;
        let has_actions = session
            .has_capability("actions")
            .await
            .map_err(|e| ChannelError::failed(e, None))?;
        // A choice whose id is the click's own key could be answered by a click on the
        // notification itself: such a question gets no buttons.
        let buttons = match question {
            Some(q)
                if has_actions
                    && c.answer_buttons
                    && !content.choices.is_empty()
                    && content.choices.iter().all(|c| c.id != OPEN) =>
            {
                Some(q)
            }
            _ => None,
        };
        let mut actions: Vec<String> = Vec::new();
        if has_actions {
            actions.push(OPEN.into());
            actions.push("Open agentnotify".into());
        }
        if buttons.is_some() {
            for choice in &content.choices {
                actions.push(choice.id.clone());
                actions.push(choice.label.clone());
            }
        }
        let replaces = previous
            .as_ref()
            .and_then(|r| r["id"].as_u64())
            .and_then(|id| u32::try_from(id).ok())
            .unwrap_or(0);
        let mut hints: HashMap<&str, zvariant::Value<'_>> = HashMap::new();
        hints.insert(
            "urgency",
            zvariant::Value::U8(if content.urgent { 2 } else { 1 }),
        );
        if buttons.is_some() {
            hints.insert("resident", zvariant::Value::Bool(true));
        }
        let id: u32 = call(
            &session.conn,
            "Notify",
            &(
                "agentnotify",
                replaces,
                "",
                content.title.as_str(),
                content.body.as_str(),
                &actions,
                &hints,
                -1i32,
            ),
        )
        .await
        .map_err(|e| {
            session.forget_capabilities();
            ChannelError::failed(e, None)
        })?;
        if let Some(q) = buttons {
            self.shown.lock().unwrap_or_else(|p| p.into_inner()).insert(
                id,
                Shown {
                    interaction_id: q.id.clone(),
                    request_digest: q.request_digest.clone(),
                    choices: content.choices.iter().map(|c| c.id.clone()).collect(),
                },
            );
        }
        if has_actions {
            self.openable
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id);
            if !self.listening.load(Ordering::SeqCst) {
                self.wanted.notify_one();
            }
        }
        Ok(Some(json!({ "id": id })))
    }

    /// Closes what a receipt names (nothing to close without one).
    pub async fn close(&self, receipt: Option<&Value>) -> Result<(), ChannelError> {
        let Some(id) = receipt
            .and_then(|r| r["id"].as_u64())
            .and_then(|id| u32::try_from(id).ok())
        else {
            return Ok(());
        };
        self.shown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.openable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        let session = self
            .connection()
            .await
            .map_err(|e| unavailable("desktop", e))?;
        call::<_, ()>(&session.conn, "CloseNotification", &(id,))
            .await
            .map_err(|e| ChannelError::failed(e, None))
    }

    /// Background task: once a question with buttons was shown, listens for
    /// `ActionInvoked` and answers from it, reconnecting after failures.
    pub async fn listen(&self, hub: &Hub) {
        self.wanted.notified().await;
        self.listening.store(true, Ordering::SeqCst);
        let mut failures = 0;
        loop {
            if let Err(e) = self.listen_once(hub).await {
                failures += 1;
                tracing::warn!(attempts = failures, error = %e, "desktop action listener failed");
                tokio::time::sleep(retry_wait(failures)).await;
            }
        }
    }

    async fn listen_once(&self, hub: &Hub) -> Result<(), String> {
        let conn = &self.connection().await?.conn;
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface(NAME)
            .and_then(|b| b.member("ActionInvoked"))
            .map_err(|e| e.to_string())?
            .build();
        let mut stream = zbus::MessageStream::for_match_rule(rule, conn, Some(64))
            .await
            .map_err(|e| format!("cannot subscribe to ActionInvoked: {e}"))?;
        while let Some(msg) = stream.next().await {
            let Ok(msg) = msg else { continue };
            let sender = msg.header().sender().map(|s| s.to_string());
            let owner = self.owner(conn).await;
            if sender.is_none() || sender != owner {
                tracing::warn!("ActionInvoked from a bus name that does not own {NAME} ignored");
                continue;
            }
            let Ok((id, key)) = msg.body().deserialize::<(u32, String)>() else {
                continue;
            };
            self.on_action(hub, id, &key).await;
        }
        Err("the session D-Bus connection ended".into())
    }

    /// The unique name that owns `org.freedesktop.Notifications` now.
    async fn owner(&self, conn: &zbus::Connection) -> Option<String> {
        let reply = conn
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "GetNameOwner",
                &(NAME,),
            )
            .await
            .ok()?;
        reply.body().deserialize::<String>().ok()
    }

    async fn on_action(&self, hub: &Hub, id: u32, key: &str) {
        if key == OPEN {
            let ours = self
                .openable
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&id);
            if ours {
                hub.open_ui().await;
            }
            return;
        }
        let target = {
            let shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
            shown
                .get(&id)
                .filter(|s| s.choices.iter().any(|c| c == key))
                .map(|s| (s.interaction_id.clone(), s.request_digest.clone()))
        };
        let Some((iid, digest)) = target else {
            return;
        };
        let record = match hub.broker().get(&iid).await {
            Ok(r) if r.status == Status::Pending && r.request_digest == digest => r,
            _ => return,
        };
        let body = json!({
            "response_id": format!("desktop-{id}-{}", crate::model::new_id()),
            "request_digest": record.request_digest,
            "nonce": record.nonce,
            "choice_id": key,
            "source": "desktop",
        });
        let Ok(sub) = AnswerSubmission::from_json(&body) else {
            return;
        };
        match hub.broker().respond(&iid, sub).await {
            Ok(_) => tracing::info!(id = %iid, "answered from the desktop"),
            Err(e) => tracing::info!(id = %iid, error = %e, "desktop answer refused"),
        }
    }
}
