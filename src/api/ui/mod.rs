//! The local web UI (SPEC §9): a page at `/ui/` that lists pending questions live and
//! answers them through the same broker rule as every other surface, with `source: web`.
//!
//! Access is not open to every local process: a bearer-authenticated client mints a one-time
//! link (`POST /v1/ui/link`) whose secret sits in the URL fragment; the page trades it for a
//! session token (`POST /ui/api/session`) bound to its `Host`, keeps it in `sessionStorage`
//! and sends it as a header — no cookie, which every port of 127.0.0.1 would share. Every
//! `/ui` response refuses a non-loopback `Host` (421, against DNS rebinding) and carries a
//! strict CSP; state-changing calls also need the `X-Agentnotify-UI` header and a same-origin
//! `Origin` (403), which a cross-site form or script cannot produce. The nonce never reaches
//! the page: the server fills it in from the broker's record.

pub mod assets;
pub mod events;
pub mod session;
pub mod view;

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::api::ApiContext;
use crate::broker::{BrokerError, InteractionFilter};
use crate::model::interaction::AnswerRefusal;
use crate::model::render::render_visible;
use crate::model::{AnswerSubmission, Interaction, Status, Timestamp};
use agentnotify_http::{full, json_response, parse_json, read_body, ApiError, ResBody};
use events::StreamCounter;
use session::Sessions;
use view::InteractionView;

/// The header every state-changing call from the page must carry.
pub const UI_HEADER: &str = "x-agentnotify-ui";
/// The Content-Security-Policy of every `/ui` response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; \
frame-ancestors 'none'";
/// Most event streams open at once (a person has a few tabs, not hundreds).
const MAX_STREAMS: usize = 64;
/// Most pending questions and history entries the page lists.
const PENDING_LIMIT: usize = 200;
const HISTORY_LIMIT: usize = 50;

/// The web UI's share of the daemon: sessions, the port `Host` must name, open streams.
pub struct UiState {
    pub sessions: Sessions,
    port: u16,
    streams: Arc<StreamCounter>,
    heartbeat: Duration,
}

impl UiState {
    pub fn new(port: u16) -> UiState {
        UiState::with_sessions(port, Sessions::default())
    }

    pub fn with_sessions(port: u16, sessions: Sessions) -> UiState {
        UiState {
            sessions,
            port,
            streams: Arc::new(StreamCounter::default()),
            heartbeat: events::HEARTBEAT,
        }
    }

    /// Event streams open now: a page is watching, so an on-demand broker stays up.
    pub fn open_streams(&self) -> usize {
        self.streams.open()
    }

    /// When the last event stream closed (counts as activity for the idle exit).
    pub fn last_stream_closed(&self) -> Option<Timestamp> {
        self.streams.last_closed()
    }
}

/// `POST /v1/ui/link` (bearer-authenticated): a one-time login link for the page.
pub fn mint_link(ctx: &ApiContext) -> Response<ResBody> {
    let url = link_url(ctx);
    json_response(
        StatusCode::OK,
        &json!({"url": url, "expires_in": ctx.ui.sessions.link_ttl().as_secs()}),
    )
}

/// A fresh one-time login link.
pub fn link_url(ctx: &ApiContext) -> String {
    let token = ctx.ui.sessions.mint_link(Instant::now());
    tracing::info!("web UI login link issued");
    // In the fragment: a browser never sends it to a server, not even ours.
    format!("{}/ui/#t={}", ctx.url, token.expose())
}

/// Serves every path under `/ui`.
pub async fn handle(ctx: &ApiContext, req: Request<Incoming>) -> Response<ResBody> {
    let mut res = match route(ctx, req).await {
        Ok(res) => res,
        Err(e) => e.into_response(),
    };
    secure(res.headers_mut());
    res
}

/// Headers that keep the page from being framed, sniffed, leaked or mixed with other code.
fn secure(h: &mut HeaderMap) {
    let pairs = [
        ("content-security-policy", CSP),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
    ];
    for (name, value) in pairs {
        h.insert(name, HeaderValue::from_static(value));
    }
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
}

async fn route(ctx: &ApiContext, req: Request<Incoming>) -> Result<Response<ResBody>, ApiError> {
    let host = check_host(ctx, &req)?;
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if let Some(rest) = path.strip_prefix("/ui/api/") {
        return api(ctx, req, &host, rest).await;
    }
    match path.as_str() {
        "/ui" => {
            only(&method, Method::GET)?;
            Ok(redirect("/ui/"))
        }
        _ => {
            let name = path.strip_prefix("/ui/").unwrap_or("-");
            let asset = assets::get(name).ok_or_else(|| ApiError::not_found("no such page"))?;
            only(&method, Method::GET)?;
            let mut res = Response::new(full(asset.body));
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            );
            Ok(res)
        }
    }
}

/// Only `127.0.0.1`, `localhost` or `[::1]` on our own port: a page on another name that
/// resolves here (DNS rebinding) gets 421 and nothing else.
fn check_host(ctx: &ApiContext, req: &Request<Incoming>) -> Result<String, ApiError> {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let port = ctx.ui.port.to_string();
    let ok = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|name| host.strip_prefix(name).and_then(|r| r.strip_prefix(':')) == Some(&port));
    if ok {
        Ok(host)
    } else {
        Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            format!(
                "the web UI answers only at http://127.0.0.1:{port}/ui/ (Host must be a loopback name with this port)"
            ),
        ))
    }
}

fn only(method: &Method, want: Method) -> Result<(), ApiError> {
    if *method == want {
        return Ok(());
    }
    let allow = if want == Method::GET { "GET" } else { "POST" };
    Err(ApiError {
        allow: Some(allow),
        ..ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("this route takes {allow} only"),
        )
    })
}

fn redirect(location: &'static str) -> Response<ResBody> {
    let mut res = Response::new(full(""));
    *res.status_mut() = StatusCode::SEE_OTHER;
    res.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    res
}

/// When the session named in the request's header ends, if it is live on this `host`.
/// Cookies are never read: another server on 127.0.0.1 could have set one.
fn session_of(ctx: &ApiContext, req: &Request<Incoming>, host: &str) -> Option<Instant> {
    let presented = req.headers().get(session::SESSION_HEADER)?.to_str().ok()?;
    ctx.ui
        .sessions
        .session_deadline(presented, host, Instant::now())
}

/// `POST /ui/api/session` with `{"link": "…"}` from the page: redeems a one-time link
/// and returns a session token for this `Host`.
async fn sign_in(
    ctx: &ApiContext,
    req: Request<Incoming>,
    host: &str,
) -> Result<Response<ResBody>, ApiError> {
    same_origin(&req, host)?;
    ctx.limiter.take().map_err(ApiError::rate_limited)?;
    let body = parse_json(&read_body(req).await?, false)?;
    let link = match body.get("link") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(ApiError::bad_request(
                "link: required, the one-time secret from the link's #t= fragment",
            ))
        }
    };
    let Some(session) = ctx.ui.sessions.redeem_link(&link, host, Instant::now()) else {
        tracing::info!("web UI login refused: link unknown, used or expired");
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "link_expired",
            "This link has expired or was already used: each link works once, within 2 minutes. \
             Run `agentnotify ui` in a terminal for a fresh one.",
        ));
    };
    tracing::info!("web UI session started");
    Ok(json_response(
        StatusCode::OK,
        &json!({"session": session.expose(), "expires_in": ctx.ui.sessions.session_ttl().as_secs()}),
    ))
}

/// The page's JSON API: needs the session header; writes need the same-origin proofs too.
async fn api(
    ctx: &ApiContext,
    req: Request<Incoming>,
    host: &str,
    rest: &str,
) -> Result<Response<ResBody>, ApiError> {
    let method = req.method().clone();
    if rest.trim_end_matches('/') == "session" {
        only(&method, Method::POST)?;
        return sign_in(ctx, req, host).await;
    }
    let Some(until) = session_of(ctx, &req, host) else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "no_session",
            "not signed in: run `agentnotify ui` for a one-time login link",
        ));
    };
    if method == Method::POST {
        same_origin(&req, host)?;
        ctx.limiter.take().map_err(ApiError::rate_limited)?;
    }
    let segments: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    match segments[..] {
        ["interactions"] => {
            only(&method, Method::GET)?;
            list(ctx).await
        }
        ["events"] => {
            only(&method, Method::GET)?;
            events(ctx, until)
        }
        ["interactions", id, "respond"] => {
            only(&method, Method::POST)?;
            let body = parse_json(&read_body(req).await?, false)?;
            respond(ctx, id, &body).await
        }
        ["interactions", id, "cancel"] => {
            only(&method, Method::POST)?;
            withdraw(ctx, id).await
        }
        _ => Err(ApiError::not_found("no such web UI route")),
    }
}

/// A write must come from our own page: the custom header (which a cross-site form cannot
/// send, and a cross-site script cannot without a CORS preflight we never grant) and an
/// `Origin` naming exactly this host.
fn same_origin(req: &Request<Incoming>, host: &str) -> Result<(), ApiError> {
    let forbidden = |why: &str| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("refused: {why}; the web UI only accepts changes from its own page"),
        )
    };
    let h = req.headers();
    if h.get(UI_HEADER).and_then(|v| v.to_str().ok()) != Some("1") {
        return Err(forbidden("the X-Agentnotify-UI header is missing"));
    }
    let origin = h.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if origin.map(str::to_ascii_lowercase) != Some(format!("http://{host}")) {
        return Err(forbidden("the Origin is missing or not this page's"));
    }
    if let Some(site) = h.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if site != "same-origin" {
            return Err(forbidden("the request is not same-origin"));
        }
    }
    Ok(())
}

/// `GET /ui/api/interactions`: pending questions and recent history, newest first.
async fn list(ctx: &ApiContext) -> Result<Response<ResBody>, ApiError> {
    let pending = ctx
        .broker
        .list(&InteractionFilter {
            status: Some(Status::Pending),
            limit: PENDING_LIMIT,
            ..Default::default()
        })
        .await?;
    let recent = ctx
        .broker
        .list(&InteractionFilter {
            limit: PENDING_LIMIT + HISTORY_LIMIT,
            ..Default::default()
        })
        .await?;
    let history: Vec<InteractionView> = recent
        .iter()
        .filter(|i| i.status.is_terminal())
        .take(HISTORY_LIMIT)
        .map(InteractionView::from)
        .collect();
    let pending: Vec<InteractionView> = pending.iter().map(InteractionView::from).collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "pending": pending,
            "history": history,
            "server_time": Timestamp::now(),
        }),
    ))
}

/// The event stream ends with the session (`until`): the page then finds it signed out.
fn events(ctx: &ApiContext, until: Instant) -> Result<Response<ResBody>, ApiError> {
    if ctx.ui.streams.open() >= MAX_STREAMS {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            "too many web UI pages are open; close some tabs",
        ));
    }
    let body = events::stream(
        ctx.broker.subscribe(),
        Arc::clone(&ctx.ui.streams),
        ctx.ui.heartbeat,
        tokio::time::Instant::from_std(until),
    );
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(res)
}

/// `POST /ui/api/interactions/{id}/respond` with `{request_digest, response_id, choice_id|choice_ids|text}`.
/// Only those fields are taken from the page; the nonce comes from the broker's record and
/// the source is always `web`, then SPEC §3.3 decides as for any other surface.
async fn respond(ctx: &ApiContext, id: &str, body: &Value) -> Result<Response<ResBody>, ApiError> {
    let Value::Object(fields) = body else {
        return Err(ApiError::bad_request("request body must be a JSON object"));
    };
    let record = ctx.broker.get(id).await?;
    let mut sub = Map::new();
    for name in [
        "response_id",
        "request_digest",
        "choice_id",
        "choice_ids",
        "text",
    ] {
        if let Some(v) = fields.get(name) {
            sub.insert(name.to_string(), v.clone());
        }
    }
    sub.insert("nonce".into(), Value::String(record.nonce.clone()));
    sub.insert("source".into(), Value::String("web".into()));
    let sub =
        AnswerSubmission::from_json(&Value::Object(sub)).map_err(|e| ApiError::bad_request(e.0))?;
    match ctx.broker.respond(id, sub).await {
        Ok(record) => Ok(json_response(
            StatusCode::OK,
            &json!({"interaction": InteractionView::from(&record)}),
        )),
        Err(BrokerError::Refused(why)) => Err(refusal(ctx, id, why).await),
        Err(e) => Err(e.into()),
    }
}

/// `POST /ui/api/interactions/{id}/cancel`: withdraws a pending question.
async fn withdraw(ctx: &ApiContext, id: &str) -> Result<Response<ResBody>, ApiError> {
    let before = ctx.broker.get(id).await?;
    if before.status != Status::Pending {
        return Err(ended(&before));
    }
    let record = ctx.broker.cancel(id).await?;
    if record.status != Status::Cancelled {
        return Err(ended(&record));
    }
    tracing::info!(id, source = "web", "interaction withdrawn from the web UI");
    Ok(json_response(
        StatusCode::OK,
        &json!({"interaction": InteractionView::from(&record)}),
    ))
}

/// A refused answer, told in the page's words: a stale page learns what happened instead of
/// having its answer applied to something else.
async fn refusal(ctx: &ApiContext, id: &str, why: AnswerRefusal) -> ApiError {
    match why {
        AnswerRefusal::AlreadyAnswered | AnswerRefusal::NotPending(_) => {
            match ctx.broker.get(id).await {
                Ok(record) => ended(&record),
                Err(e) => e.into(),
            }
        }
        AnswerRefusal::DigestMismatch => ApiError::new(
            StatusCode::BAD_REQUEST,
            "digest_mismatch",
            "This question changed since the page showed it; reload and answer again.",
        ),
        other => BrokerError::Refused(other).into(),
    }
}

/// The accepted answer in words, "“Deny”" or "“Lint”, “Other text”", rendered for display.
fn recorded_answer(record: &Interaction) -> String {
    let Some(r) = &record.response else {
        return "no answer".into();
    };
    let label = |id: &String| {
        let label = record
            .question
            .choices
            .iter()
            .find(|c| &c.id == id)
            .map_or(id, |c| &c.label);
        format!("“{}”", render_visible(label))
    };
    let mut parts: Vec<String> = r.choice_id.iter().map(label).collect();
    parts.extend(r.choice_ids.iter().flatten().map(label));
    parts.extend(r.text.iter().map(|t| format!("“{}”", render_visible(t))));
    parts.join(", ")
}

/// The error for acting on a question that is no longer pending.
fn ended(record: &Interaction) -> ApiError {
    let (status, code, message) = match record.status {
        Status::Answered => {
            let by = record
                .response
                .as_ref()
                .map(|r| format!(" (from {})", render_visible(&r.source)))
                .unwrap_or_default();
            (
                StatusCode::CONFLICT,
                "already_answered",
                format!(
                    "This question was already answered elsewhere{by}: {}.",
                    recorded_answer(record)
                ),
            )
        }
        Status::Expired => (
            StatusCode::BAD_REQUEST,
            "not_pending",
            "This question expired before your answer arrived.".into(),
        ),
        Status::Cancelled => (
            StatusCode::BAD_REQUEST,
            "not_pending",
            "This question was withdrawn; the agent is no longer waiting for it.".into(),
        ),
        Status::Superseded => (
            StatusCode::BAD_REQUEST,
            "not_pending",
            "This question changed: the agent asked a newer version of it. Reload to see it."
                .into(),
        ),
        Status::Pending => (
            StatusCode::CONFLICT,
            "conflict",
            "This question is still pending; try again.".into(),
        ),
    };
    ApiError::new(status, code, message)
}
