//! The reference Relay's handlers, one per route: check the caller and the body, change the
//! store inside one write (one writer at a time, across processes), commit, reply. None of them judges an answer (the broker does).

use agentnotify_http::{json_response, parse_json, query, query_int, read_body, ApiError, ResBody};
use agentnotify_model::{is_id, Timestamp};
use agentnotify_relay_proto::wire::{
    question_event_id, AnswerBatch, AnswerPost, AnswerResult, DeviceInfo, Envelope,
    CONTRACT_VERSION,
};
use hyper::body::Incoming;
use hyper::{header, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use std::time::Duration;

use crate::kv::{Scope, Tree};
use crate::live::{Change, HEARTBEAT};
use crate::store::{
    decode_cursor, encode_cursor, key2, sha256_hex, AnswerRecord, InstallationRecord,
    PairingRecord, RelayServer, StoreFail,
};

/// The longest an envelope may be kept: the longest question TTL (SPEC §2: 3600 s) plus
/// the time an answer may take to arrive (a phone's clock, a slow network).
const MAX_ENVELOPE_LIFETIME: std::time::Duration = std::time::Duration::from_secs(3600 + 600);

pub(crate) type Handled = Result<Response<ResBody>, ApiError>;

pub(crate) fn forbidden(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, code, message)
}

pub(crate) fn conflict(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, message)
}

pub(crate) fn require_json(req: &Request<Incoming>) -> Result<(), ApiError> {
    let ok = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "POST bodies must be JSON (Content-Type: application/json)",
        ))
    }
}

/// Reads a JSON body into `T`; a wrong shape is a 400 naming the problem.
async fn body<T: serde::de::DeserializeOwned>(req: Request<Incoming>) -> Result<T, ApiError> {
    let value = parse_json(&read_body(req).await?, false)?;
    if !value.is_object() {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|e| ApiError::bad_request(format!("request body: {e}")))
}

/// Longest sealed question: a body at its limit (16,384 characters, SPEC §13.1) sealed
/// and base64-encoded, within the 128 KiB request cap.
const SEALED_QUESTION_MAX: usize = 127 * 1024;

fn check_len(name: &str, value: &str, min: usize, max: usize) -> Result<(), ApiError> {
    let n = value.chars().count();
    if n < min || n > max {
        return Err(ApiError::bad_request(format!(
            "{name} must be {min}-{max} characters"
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
struct InstallationBody {
    pairing_token: String,
}

pub(crate) async fn register_installation(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let b: InstallationBody = body(req).await?;
    check_len("pairing_token", &b.pairing_token, 16, 200)?;
    let id = agentnotify_model::new_id();
    let mut w = s.write(Scope::Installation(&id)).await?;
    w.put_json(
        Tree::Installations,
        id.as_bytes(),
        &InstallationRecord {
            id: id.clone(),
            pairing_token_sha256: sha256_hex(b.pairing_token.as_bytes()),
            created_at: Timestamp::now(),
        },
    )
    .await?;
    let token = w.mint_token("installation", &id).await?;
    w.commit(s).await?;
    tracing::info!(installation = %id, "installation registered");
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"installation_id": id, "installation_token": token}),
    ))
}

#[derive(Deserialize)]
struct PairingBody {
    pairing_id: String,
    pairing_token: String,
    expires_at: String,
}

/// The longest a pairing code may live (ten minutes, plus a minute for clocks).
const MAX_PAIRING_LIFETIME: std::time::Duration = std::time::Duration::from_secs(660);

/// `POST /v1/pairings`: the installation announces one single-use pairing code.
pub(crate) async fn register_pairing(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let inst = s.installation(&req).await?;
    let b: PairingBody = body(req).await?;
    check_len("pairing_id", &b.pairing_id, 1, 100)?;
    check_len("pairing_token", &b.pairing_token, 16, 200)?;
    let expires = Timestamp::parse_rfc3339(&b.expires_at)
        .ok_or_else(|| ApiError::bad_request("expires_at must be an RFC 3339 time"))?;
    let now = Timestamp::now();
    if expires <= now || expires > now + MAX_PAIRING_LIFETIME {
        return Err(ApiError::bad_request(
            "expires_at must be in the future and at most 10 minutes away",
        ));
    }
    let key = sha256_hex(b.pairing_token.as_bytes());
    // Relay-wide: codes are keyed by their hash across installations, and pairing is rare.
    let mut w = s.write(Scope::Relay).await?;
    if w.get(Tree::Pairings, key.as_bytes()).await?.is_some() {
        return Err(conflict(
            "pairing_exists",
            "this pairing token is already registered",
        ));
    }
    w.put_json(
        Tree::Pairings,
        key.as_bytes(),
        &PairingRecord {
            installation_id: inst,
            pairing_id: b.pairing_id.clone(),
            expires_at: expires,
            used_by: None,
        },
    )
    .await?;
    w.commit(s).await?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"pairing_id": b.pairing_id, "expires_at": expires.to_rfc3339()}),
    ))
}

#[derive(Deserialize)]
struct DeviceBody {
    installation_id: String,
    pairing_token: String,
    public_key: String,
    #[serde(default)]
    name: Option<String>,
    proof: String,
}

/// `POST /v1/devices`: a phone pairs with a code; the code is used up.
pub(crate) async fn register_device(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let b: DeviceBody = body(req).await?;
    check_len("proof", &b.proof, 1, 200)?;
    let name = b.name.unwrap_or_else(|| "device".into());
    check_len("name", &name, 1, 100)?;
    agentnotify_relay_proto::seal::decode_key(&b.public_key)
        .map_err(|_| ApiError::bad_request("public_key must be 32 bytes of base64url"))?;
    let refused = || {
        forbidden(
            "pairing_refused",
            "unknown pairing code: run `agentnotify relay pair` for a fresh one",
        )
    };
    let key = sha256_hex(b.pairing_token.as_bytes());
    // Checked and used up inside one write: two phones racing with one code get one
    // device, whichever Relay process each reached.
    let mut w = s.write(Scope::Installation(&b.installation_id)).await?;
    let mut pairing: PairingRecord = w
        .get_json(Tree::Pairings, key.as_bytes())
        .await?
        .filter(|p: &PairingRecord| p.installation_id == b.installation_id)
        .ok_or_else(refused)?;
    if pairing.used_by.is_some() {
        return Err(forbidden(
            "pairing_used",
            "this pairing code was already used by another device: run `agentnotify relay pair` for a fresh one",
        ));
    }
    if pairing.expires_at <= Timestamp::now() {
        return Err(forbidden(
            "pairing_expired",
            "this pairing code has expired (codes last 10 minutes): run `agentnotify relay pair` for a fresh one",
        ));
    }
    let device = DeviceInfo {
        device_id: agentnotify_model::new_id(),
        installation_id: pairing.installation_id.clone(),
        name,
        public_key: b.public_key,
        proof: b.proof,
        created_at: Timestamp::now().to_rfc3339(),
        pairing_id: Some(pairing.pairing_id.clone()),
        last_seen_at: None,
    };
    pairing.used_by = Some(device.device_id.clone());
    w.put_json(Tree::Pairings, key.as_bytes(), &pairing).await?;
    w.put_device(&device).await?;
    let token = w.mint_token("device", &device.device_id).await?;
    w.announce(Change::Devices {
        installation: device.installation_id.clone(),
    })
    .await?;
    w.commit(s).await?;
    tracing::info!(device = %device.device_id, installation = %device.installation_id, "device registered");
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"device_id": device.device_id, "device_token": token}),
    ))
}

/// `POST /v1/devices/push-subscription`: the device's `PushSubscription.toJSON()`.
pub(crate) async fn subscribe_push(
    s: &RelayServer,
    req: Request<Incoming>,
    allow_http: bool,
) -> Handled {
    let device = s.device(&req).await?;
    #[derive(Deserialize)]
    struct Body {
        endpoint: String,
        keys: crate::push::SubscriptionKeys,
    }
    let b: Body = body(req).await?;
    let sub = crate::push::Subscription {
        endpoint: b.endpoint,
        keys: b.keys,
    };
    sub.check(allow_http).map_err(ApiError::bad_request)?;
    let mut w = s
        .write(Scope::Installation(&device.installation_id))
        .await?;
    w.put_json(Tree::PushSubscriptions, device.device_id.as_bytes(), &sub)
        .await?;
    w.commit(s).await?;
    tracing::info!(device = %device.device_id, "push subscription stored");
    Ok(json_response(
        StatusCode::CREATED,
        &json!({ "subscribed": true }),
    ))
}

/// `GET /v1/devices/push-subscription`: whether this device gets pushes (and where).
pub(crate) async fn push_subscription(s: &RelayServer, req: &Request<Incoming>) -> Handled {
    let device = s.device(req).await?;
    let sub: Option<crate::push::Subscription> = s
        .get(Tree::PushSubscriptions, device.device_id.as_bytes())
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"subscribed": sub.is_some(), "endpoint": sub.map(|s| s.endpoint)}),
    ))
}

/// `DELETE /v1/devices/push-subscription`.
pub(crate) async fn unsubscribe_push(s: &RelayServer, req: &Request<Incoming>) -> Handled {
    let device = s.device(req).await?;
    let mut w = s
        .write(Scope::Installation(&device.installation_id))
        .await?;
    let removed = w
        .remove(Tree::PushSubscriptions, device.device_id.as_bytes())
        .await?
        .is_some();
    w.commit(s).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "removed": removed }),
    ))
}

/// `DELETE /v1/devices/{id}`: the installation removes a device; its token stops working.
pub(crate) async fn delete_device(
    s: &RelayServer,
    req: &Request<Incoming>,
    device_id: &str,
) -> Handled {
    let inst = s.installation(req).await?;
    let mut w = s.write(Scope::Installation(&inst)).await?;
    let ours = w
        .get_json::<DeviceInfo>(Tree::Devices, device_id.as_bytes())
        .await?
        .is_some_and(|d| d.installation_id == inst);
    let removed = ours && w.remove_device(device_id).await?;
    if removed {
        w.announce(Change::DeviceRemoved {
            device: device_id.to_string(),
        })
        .await?;
        w.announce(Change::Devices {
            installation: inst.clone(),
        })
        .await?;
    }
    w.commit(s).await?;
    if removed {
        tracing::info!(device = %device_id, installation = %inst, "device removed");
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({ "removed": removed }),
    ))
}

pub(crate) async fn list_devices(s: &RelayServer, req: &Request<Incoming>) -> Handled {
    let inst = s.installation(req).await?;
    let devices = s.installation_devices(&inst).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "devices": devices }),
    ))
}

pub(crate) async fn put_envelope(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let inst = s.installation(&req).await?;
    let mut e: Envelope = body(req).await?;
    check_len("event_id", &e.event_id, 1, 200)?;
    check_len("key_id", &e.key_id, 1, 64)?;
    check_len("sealed", &e.sealed, 1, SEALED_QUESTION_MAX)?;
    check_len("signature", e.signature.as_deref().unwrap_or(""), 1, 200)?;
    let expires = Timestamp::parse_rfc3339(&e.expires_at)
        .ok_or_else(|| ApiError::bad_request("expires_at must be an RFC 3339 time"))?;
    if expires <= Timestamp::now() {
        return Err(ApiError::bad_request("expires_at is already past"));
    }
    if expires > Timestamp::now() + MAX_ENVELOPE_LIFETIME {
        return Err(ApiError::bad_request(format!(
            "expires_at must be at most {} minutes from now (the longest question plus the time \
             an answer may take to arrive)",
            MAX_ENVELOPE_LIFETIME.as_secs() / 60
        )));
    }
    let device: DeviceInfo = s
        .get(Tree::Devices, e.device_id.as_bytes())
        .await?
        .filter(|d: &DeviceInfo| d.installation_id == inst)
        .ok_or_else(|| {
            forbidden(
                "unknown_device",
                "device_id is not a device of this installation",
            )
        })?;
    e.installation_id = inst.clone();
    e.stored_at = Some(Timestamp::now().to_rfc3339());
    let mut w = s.write(Scope::Installation(&inst)).await?;
    let replaced = w.put_envelope(&e).await?;
    w.announce(Change::Envelope {
        device: device.device_id.clone(),
        envelope: std::sync::Arc::new(e.clone()),
    })
    .await?;
    w.commit(s).await?;
    let status = if replaced {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(json_response(
        status,
        &json!({"device_id": device.device_id, "event_id": e.event_id, "replaced": replaced}),
    ))
}

/// `DELETE /v1/envelopes/{event_id}`: the desktop settled the question; it leaves every
/// device of the installation at once (SPEC §12.4).
pub(crate) async fn delete_envelope(
    s: &RelayServer,
    req: &Request<Incoming>,
    event_id: &str,
) -> Handled {
    let inst = s.installation(req).await?;
    let q = query(req)?;
    let reason = match q.get("reason").map(String::as_str) {
        None => "settled",
        Some(r @ ("answered" | "cancelled" | "expired" | "superseded" | "settled")) => r,
        Some(_) => {
            return Err(ApiError::bad_request(
                "reason must be answered, cancelled, expired, superseded or settled",
            ))
        }
    };
    let event_id = event_id.replace("%3A", ":").replace("%3a", ":");
    let interaction = event_id
        .strip_prefix("interaction:")
        .filter(|id| is_id(id))
        .ok_or_else(|| {
            ApiError::bad_request("event_id must be interaction:<32 lowercase hex characters>")
        })?
        .to_string();
    let mut w = s.write(Scope::Installation(&inst)).await?;
    let deleted = w.withdraw_question(&inst, &interaction).await?;
    w.put(
        Tree::Withdrawn,
        &key2(&inst, interaction.as_bytes()),
        format!("{reason} {}", Timestamp::now().to_rfc3339()).as_bytes(),
    )
    .await?;
    w.commit(s).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"event_id": event_id, "deleted": deleted}),
    ))
}

pub(crate) async fn list_envelopes(s: &RelayServer, req: &Request<Incoming>) -> Handled {
    let device = s.device(req).await?;
    let out = s.live_envelopes(&device.device_id).await?;
    Ok(json_response(StatusCode::OK, &json!({ "envelopes": out })))
}

/// `GET /v1/envelopes/events`: the device's stream (every current envelope, `ready`, then
/// changes as they happen).
pub(crate) async fn envelope_events(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let device = s.device(&req).await?;
    drop(req);
    // Counted, then subscribed, then the snapshot read (`live::Held`): a change in between
    // is sent twice at worst, never missed.
    let holding = s.held.hold(&device.device_id);
    let changes = s.feed.subscribe();
    let snapshot = s.live_envelopes(&device.device_id).await?;
    let body = crate::live::device_stream(device.device_id, snapshot, changes, HEARTBEAT, holding);
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-store")
        .body(body)
        .expect("static headers are valid"))
}

/// The `wait` query parameter of a long-poll (0–60 s).
fn wait_param(q: &std::collections::HashMap<String, String>) -> Result<Duration, ApiError> {
    Ok(Duration::from_secs(
        query_int(q, "wait", 0, 60)?.unwrap_or(0),
    ))
}

pub(crate) async fn post_answer(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let device = s.device(&req).await?;
    let raw = read_body(req).await?;
    let value = parse_json(&raw, false)?;
    if !value.is_object() {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    }
    let mut a: AnswerPost = serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?;
    if a.contract_version != CONTRACT_VERSION {
        return Err(ApiError::bad_request("contract_version must be \"1\""));
    }
    check_len("response_id", &a.response_id, 1, 128)?;
    if !is_id(&a.interaction_id) {
        return Err(ApiError::bad_request(
            "interaction_id must be 32 lowercase hex characters",
        ));
    }
    match &a.sealed {
        Some(sealed) => {
            check_len("sealed", sealed, 1, 60_000)?;
            let plain = a.request_digest.is_some()
                || a.nonce.is_some()
                || a.choice_id.is_some()
                || a.text.is_some();
            if plain || a.key_id.is_none() || a.expires_at.is_none() {
                return Err(ApiError::bad_request(
                    "a sealed answer carries key_id and expires_at and no plain answer fields",
                ));
            }
        }
        None => {
            if a.request_digest.is_none() || a.nonce.is_none() {
                return Err(ApiError::bad_request(
                    "an unsealed answer needs request_digest and nonce",
                ));
            }
            if a.choice_id.is_some() == a.text.is_some() {
                return Err(ApiError::bad_request(
                    "give exactly one of choice_id or text",
                ));
            }
        }
    }
    if a.device_id != device.device_id {
        return Err(forbidden(
            "wrong_device",
            "device_id is not the device this token belongs to",
        ));
    }
    if a.installation_id != device.installation_id {
        return Err(forbidden(
            "wrong_installation",
            "this device is not paired with that installation",
        ));
    }
    let inst = device.installation_id.clone();
    let body_sha256 = sha256_hex(&raw);
    // One write from the first read to the commit: "first answer wins" is decided here,
    // by the store, whichever process the answers reached.
    let mut w = s.write(Scope::Installation(&inst)).await?;
    let id_key = key2(&inst, a.response_id.as_bytes());
    if let Some(seq) = w.get(Tree::AnswerIds, &id_key).await? {
        let rec: Option<AnswerRecord> = w.get_json(Tree::Answers, &key2(&inst, &seq)).await?;
        let result = rec.as_ref().map(|r| r.result.clone());
        let same = rec.is_some_and(|r| r.body_sha256 == body_sha256);
        let (code, message) = if same {
            ("duplicate_response", "this answer was already received")
        } else {
            (
                "response_id_conflict",
                "another answer already used this response_id",
            )
        };
        let mut res = conflict(code, message).into_response();
        if let Some(result) = result {
            *res.body_mut() = agentnotify_http::full(
                serde_json::to_vec(&json!({"error": message, "code": code, "result": result}))
                    .unwrap_or_default(),
            );
        }
        return Ok(res);
    }
    let interaction_key = key2(&inst, a.interaction_id.as_bytes());
    let withdrawn = w.get(Tree::Withdrawn, &interaction_key).await?;
    let winner = w.get(Tree::Answered, &interaction_key).await?;
    let answered_here = winner.is_some();
    match withdrawn {
        Some(why) if !answered_here && why.starts_with(b"expired") => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "question_expired",
                "the question has expired; the answer was not forwarded",
            ))
        }
        Some(_) if !answered_here => {
            return Err(conflict(
                "question_withdrawn",
                "the question was settled on the desktop (answered elsewhere or cancelled)",
            ))
        }
        _ => {}
    }
    // Checked before the envelope: an answered question's envelope is withdrawn, and
    // "already answered" is the reason the phone should see.
    if let Some(winner) = winner {
        if winner != a.response_id.as_bytes() {
            return Err(conflict(
                "already_answered",
                "this question was already answered",
            ));
        }
    }
    let envelope: Envelope = w
        .get_json(
            Tree::Envelopes,
            &key2(
                &device.device_id,
                question_event_id(&a.interaction_id).as_bytes(),
            ),
        )
        .await?
        .ok_or_else(|| forbidden("not_a_recipient", "this device was not sent that question"))?;
    if Timestamp::parse_rfc3339(&envelope.expires_at).is_none_or(|t| t <= Timestamp::now()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "question_expired",
            "the question has expired; the answer was not forwarded",
        ));
    }
    let seq = w.next_seq().await?;
    let now = Timestamp::now();
    a.received_at = Some(now.to_rfc3339());
    let rec = AnswerRecord {
        seq,
        body_sha256,
        result: AnswerResult::pending(&a.response_id),
        answer: a,
        received: now,
    };
    w.put_json(Tree::Answers, &key2(&inst, &seq.to_be_bytes()), &rec)
        .await?;
    w.put(Tree::AnswerIds, &id_key, &seq.to_be_bytes()).await?;
    w.announce(Change::Answer {
        installation: inst.clone(),
    })
    .await?;
    w.commit(s).await?;
    tracing::info!(installation = %inst, device = %device.device_id, interaction = %rec.answer.interaction_id, "answer received");
    Ok(json_response(StatusCode::CREATED, &rec.result))
}

pub(crate) async fn list_answers(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let inst = s.installation(&req).await?;
    let q = query(&req)?;
    drop(req);
    match q.get("installation_id") {
        Some(asked) if asked == &inst => {}
        Some(_) => {
            return Err(forbidden(
                "wrong_installation",
                "installation_id is not the installation this token belongs to",
            ))
        }
        None => return Err(ApiError::bad_request("installation_id is required")),
    }
    let since = match q.get("since").map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => 0,
        Some(c) => decode_cursor(c).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_cursor",
                "since is not a cursor this relay issued",
            )
        })?,
    };
    let limit = query_int(&q, "limit", 1, 500)?.unwrap_or(100) as usize;
    let wait = wait_param(&q)?;
    let mut feed = s.feed.subscribe();
    let mut batch = answers_after(s, &inst, since, limit).await?;
    if batch.responses.is_empty() && !wait.is_zero() {
        let mut devices_changed = false;
        crate::live::wait_for(&mut feed, wait, |c| match c {
            Change::Answer { installation } => *installation == inst,
            Change::Devices { installation } if *installation == inst => {
                devices_changed = true;
                true
            }
            _ => false,
        })
        .await;
        batch = answers_after(s, &inst, since, limit).await?;
        batch.devices_changed = devices_changed;
    }
    Ok(json_response(StatusCode::OK, &batch))
}

async fn answers_after(
    s: &RelayServer,
    inst: &str,
    since: u64,
    limit: usize,
) -> Result<AnswerBatch, ApiError> {
    let start = key2(inst, &(since.saturating_add(1)).to_be_bytes());
    let end = key2(inst, &u64::MAX.to_be_bytes());
    let mut out = Vec::new();
    let mut last = since;
    for (_, v) in s.kv.range(Tree::Answers, &start, &end, limit).await? {
        let rec: AnswerRecord = serde_json::from_slice(&v).map_err(StoreFail::from)?;
        last = rec.seq;
        out.push(rec.answer);
    }
    Ok(AnswerBatch {
        responses: out,
        cursor: Some(encode_cursor(last)),
        devices_changed: false,
    })
}

#[derive(Deserialize)]
struct ResultsBody {
    results: Vec<AnswerResult>,
}

pub(crate) async fn post_results(s: &RelayServer, req: Request<Incoming>) -> Handled {
    let inst = s.installation(&req).await?;
    let b: ResultsBody = body(req).await?;
    if b.results.len() > 500 {
        return Err(ApiError::bad_request(
            "results must have at most 500 entries",
        ));
    }
    for r in &b.results {
        if !matches!(r.status.as_str(), "accepted" | "refused") {
            return Err(ApiError::bad_request(
                "each result's status must be accepted or refused",
            ));
        }
        check_len("response_id", &r.response_id, 1, 128)?;
    }
    // One write: an accepted answer and the withdrawal of its question from every device
    // become durable together, or not at all.
    let mut w = s.write(Scope::Installation(&inst)).await?;
    let mut updated = 0;
    for r in b.results {
        let Some(seq) = w
            .get(Tree::AnswerIds, &key2(&inst, r.response_id.as_bytes()))
            .await?
        else {
            continue;
        };
        let key = key2(&inst, &seq);
        let Some(mut rec) = w.get_json::<AnswerRecord>(Tree::Answers, &key).await? else {
            continue;
        };
        if r.status == "accepted" {
            let interaction = rec.answer.interaction_id.clone();
            w.put(
                Tree::Answered,
                &key2(&inst, interaction.as_bytes()),
                r.response_id.as_bytes(),
            )
            .await?;
            w.withdraw_question(&inst, &interaction).await?;
        }
        w.announce(Change::Verdict {
            device: rec.answer.device_id.clone(),
            result: std::sync::Arc::new(r.clone()),
        })
        .await?;
        rec.result = r;
        w.put_json(Tree::Answers, &key, &rec).await?;
        updated += 1;
    }
    w.commit(s).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "updated": updated }),
    ))
}

pub(crate) async fn answer_status(
    s: &RelayServer,
    req: Request<Incoming>,
    response_id: &str,
) -> Handled {
    let device = s.device(&req).await?;
    let wait = wait_param(&query(&req)?)?;
    drop(req);
    let mut feed = s.feed.subscribe();
    let result = answer_result(s, &device, response_id).await?;
    if result.status != "pending" || wait.is_zero() {
        return Ok(json_response(StatusCode::OK, &result));
    }
    crate::live::wait_for(&mut feed, wait, |c| {
        matches!(c, Change::Verdict { device: d, result } if *d == device.device_id && result.response_id == response_id)
    })
    .await;
    Ok(json_response(
        StatusCode::OK,
        &answer_result(s, &device, response_id).await?,
    ))
}

async fn answer_result(
    s: &RelayServer,
    device: &DeviceInfo,
    response_id: &str,
) -> Result<AnswerResult, ApiError> {
    let inst = &device.installation_id;
    let not_found = || ApiError::not_found("no answer with that response_id from this device");
    let seq =
        s.kv.get(Tree::AnswerIds, &key2(inst, response_id.as_bytes()))
            .await?
            .ok_or_else(not_found)?;
    let rec: AnswerRecord = s
        .get(Tree::Answers, &key2(inst, &seq))
        .await?
        .ok_or_else(not_found)?;
    if rec.answer.device_id != device.device_id {
        return Err(not_found());
    }
    Ok(rec.result)
}
