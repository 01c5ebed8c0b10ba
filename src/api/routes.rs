//! Routing and the handlers of SPEC §4.2 and §4.3.

use std::time::Duration;

use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use serde_json::json;

use super::ApiContext;
use crate::broker::{InteractionFilter, NotificationFilter};
use crate::model::{
    AnswerSubmission, InteractionRequest, NotificationRequest, NotificationStatus, Status,
};
use agentnotify_http::{
    json_response, parse_json, query, query_bool, query_int, query_str, read_body, ApiError,
    ResBody,
};

// Every await in `route` is boxed: hyper keeps one handler future per connection, sized
// for its largest state, so an unboxed router would make every parked long-poll carry the
// state of the biggest route (measured: ~4.4 KiB per connection).

/// Every route this router serves (method, path template); `docs/openapi.yaml` documents
/// exactly these, which a test checks against the running daemon.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/health"),
    ("GET", "/v1/auth/proof"),
    ("GET", "/v1/status"),
    ("POST", "/v1/admin/shutdown"),
    ("POST", "/v1/ui/link"),
    ("POST", "/v1/interactions/request"),
    ("GET", "/v1/interactions"),
    ("GET", "/v1/interactions/{id}"),
    ("GET", "/v1/interactions/{id}/wait"),
    ("POST", "/v1/interactions/{id}/respond"),
    ("POST", "/v1/interactions/{id}/cancel"),
    ("POST", "/v1/interactions/{id}/publish"),
    ("POST", "/v1/relay/poll"),
    ("GET", "/v1/relay/status"),
    ("GET", "/v1/channels/status"),
    ("POST", "/v1/channels/reload"),
    ("POST", "/v1/channels/{id}/test"),
    ("GET", "/v1/relay/devices"),
    ("DELETE", "/v1/relay/devices/{id}"),
    ("POST", "/v1/notifications"),
    ("GET", "/v1/notifications"),
    ("GET", "/v1/notifications/{id}"),
    ("POST", "/v1/notifications/{id}/resolve"),
    ("POST", "/v1/notifications/{id}/dismiss"),
    ("POST", "/v1/events"),
];

/// `GET /v1/auth/proof?nonce=…` (no token): the broker proves it holds the token before a
/// TCP client sends it (SPEC §3.5). The proof binds the client's nonce and this broker's
/// TCP port, so it is useless to a process squatting on another port.
fn proof(ctx: &ApiContext, req: &Request<Incoming>) -> Result<Response<ResBody>, ApiError> {
    let q = query(req)?;
    let nonce = q.get("nonce").map(String::as_str).unwrap_or("");
    let ok = (16..=128).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(ApiError::bad_request(
            "nonce must be 16-128 characters of base64url",
        ));
    }
    let proof = crate::secret::broker_proof(&ctx.token, ctx.port, nonce);
    Ok(json_response(StatusCode::OK, &json!({ "proof": proof })))
}

pub async fn handle(ctx: &ApiContext, req: Request<Incoming>) -> Response<ResBody> {
    match route(ctx, req).await {
        Ok(res) => res,
        Err(e) => e.into_response(),
    }
}

async fn route(ctx: &ApiContext, req: Request<Incoming>) -> Result<Response<ResBody>, ApiError> {
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    if segments == ["health"] {
        return only(&req, Method::GET).map(|_| health());
    }
    if segments.first() == Some(&"ui") {
        return Ok(Box::pin(crate::api::ui::handle(ctx, req)).await);
    }
    if segments.first() != Some(&"v1") {
        return Err(ApiError::not_found(format!(
            "no such route: {}",
            short(&path)
        )));
    }
    if segments[1..] == ["auth", "proof"] {
        only(&req, Method::GET)?;
        return proof(ctx, &req);
    }
    authorize(ctx, &req)?;
    if req.method() == Method::POST {
        ctx.limiter.take().map_err(ApiError::rate_limited)?;
    }
    match segments[1..] {
        ["status"] => {
            only(&req, Method::GET)?;
            Ok(status(ctx))
        }
        ["admin", "shutdown"] => {
            only(&req, Method::POST)?;
            ctx.shutdown_requested.send_replace(true);
            Ok(json_response(
                StatusCode::OK,
                &json!({"shutdown": "when_idle"}),
            ))
        }
        ["ui", "link"] => {
            only(&req, Method::POST)?;
            Ok(crate::api::ui::mint_link(ctx))
        }
        ["interactions"] => {
            only(&req, Method::GET)?;
            Box::pin(list_interactions(ctx, &req)).await
        }
        ["interactions", "request"] => {
            only(&req, Method::POST)?;
            let body = parse_json(&Box::pin(read_body(req)).await?, false)?;
            let request =
                InteractionRequest::from_json(&body).map_err(|e| ApiError::bad_request(e.0))?;
            let (record, created) = Box::pin(ctx.broker.request(request)).await?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(code, &record))
        }
        ["interactions", id] => {
            only(&req, Method::GET)?;
            Ok(json_response(
                StatusCode::OK,
                &Box::pin(ctx.broker.get(id)).await?,
            ))
        }
        ["interactions", id, "wait"] => {
            only(&req, Method::GET)?;
            let q = query(&req)?;
            let secs = query_int(&q, "timeout", 1, 300)?.unwrap_or(60);
            let owner = query_bool(&q, "owner")?.unwrap_or(false);
            // A long-poll parks for minutes: hold nothing of the request while it does
            // (its headers point into hyper's read buffer).
            let id = id.to_string();
            drop(req);
            let record = Box::pin(ctx.broker.wait(&id, Duration::from_secs(secs), owner)).await?;
            Ok(json_response(StatusCode::OK, &record))
        }
        ["interactions", id, "respond"] => {
            only(&req, Method::POST)?;
            let body = parse_json(&Box::pin(read_body(req)).await?, false)?;
            let sub = AnswerSubmission::from_json(&body).map_err(|e| ApiError::bad_request(e.0))?;
            Ok(json_response(
                StatusCode::OK,
                &Box::pin(ctx.broker.respond(id, sub)).await?,
            ))
        }
        ["interactions", id, "cancel"] => {
            only(&req, Method::POST)?;
            Ok(json_response(
                StatusCode::OK,
                &Box::pin(ctx.broker.cancel(id)).await?,
            ))
        }
        ["interactions", id, "publish"] => {
            only(&req, Method::POST)?;
            Box::pin(crate::api::relay_routes::publish(&ctx.relay, id)).await
        }
        ["relay", "poll"] => {
            only(&req, Method::POST)?;
            let body = parse_json(&Box::pin(read_body(req)).await?, true)?;
            Box::pin(crate::api::relay_routes::poll(&ctx.relay, &body)).await
        }
        ["relay", "status"] => {
            only(&req, Method::GET)?;
            Box::pin(crate::api::relay_routes::status(&ctx.relay)).await
        }
        ["channels", "status"] => {
            only(&req, Method::GET)?;
            crate::api::channel_routes::status(&ctx.channels)
        }
        ["channels", "reload"] => {
            only(&req, Method::POST)?;
            empty_object(&Box::pin(read_body(req)).await?)?;
            crate::api::channel_routes::reload(&ctx.channels)
        }
        ["channels", id, "test"] => {
            only(&req, Method::POST)?;
            let id = id.to_string();
            empty_object(&Box::pin(read_body(req)).await?)?;
            Box::pin(crate::api::channel_routes::test(&ctx.channels, &id)).await
        }
        ["relay", "devices"] => {
            only(&req, Method::GET)?;
            Box::pin(crate::api::relay_routes::devices(&ctx.relay)).await
        }
        ["relay", "devices", id] => {
            only(&req, Method::DELETE)?;
            Box::pin(crate::api::relay_routes::revoke(&ctx.relay, id)).await
        }
        ["notifications"] => match *req.method() {
            Method::GET => Box::pin(list_notifications(&req, ctx)).await,
            Method::POST => {
                let body = parse_json(&Box::pin(read_body(req)).await?, false)?;
                let n = NotificationRequest::from_json(&body)
                    .map_err(|e| ApiError::bad_request(e.0))?;
                let (record, created) = Box::pin(ctx.broker.notify(n)).await?;
                let code = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                Ok(json_response(code, &record))
            }
            _ => Err(method_not_allowed("GET, POST")),
        },
        ["events"] => {
            only(&req, Method::POST)?;
            let body = parse_json(&Box::pin(read_body(req)).await?, false)?;
            Box::pin(crate::api::events::handle(&ctx.broker, &body)).await
        }
        ["notifications", id] => {
            only(&req, Method::GET)?;
            Ok(json_response(
                StatusCode::OK,
                &Box::pin(ctx.broker.get_notification(id)).await?,
            ))
        }
        ["notifications", id, action @ ("resolve" | "dismiss")] => {
            only(&req, Method::POST)?;
            let status = if action == "resolve" {
                NotificationStatus::Resolved
            } else {
                NotificationStatus::Dismissed
            };
            Ok(json_response(
                StatusCode::OK,
                &Box::pin(ctx.broker.close_notification(id, status)).await?,
            ))
        }
        _ => Err(ApiError::not_found(format!(
            "no such route: {}",
            short(&path)
        ))),
    }
}

fn only(req: &Request<Incoming>, method: Method) -> Result<(), ApiError> {
    if req.method() == method {
        Ok(())
    } else if method == Method::GET {
        Err(method_not_allowed("GET"))
    } else if method == Method::DELETE {
        Err(method_not_allowed("DELETE"))
    } else {
        Err(method_not_allowed("POST"))
    }
}

fn method_not_allowed(allow: &'static str) -> ApiError {
    ApiError {
        allow: Some(allow),
        ..ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("this route takes {allow} only"),
        )
    }
}

/// Paths are echoed in errors only in part, and never anything that looks like a secret.
fn short(path: &str) -> String {
    path.chars().take(80).collect()
}

fn authorize(ctx: &ApiContext, req: &Request<Incoming>) -> Result<(), ApiError> {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(token) if ctx.token.matches(token) => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token (see `agentnotify token`)",
        )),
    }
}

fn health() -> Response<ResBody> {
    json_response(
        StatusCode::OK,
        &json!({"status": "ok", "version": crate::VERSION, "api": crate::API_VERSION}),
    )
}

/// A body that is empty or a JSON object (its fields are ignored): anything else is refused.
fn empty_object(bytes: &[u8]) -> Result<(), ApiError> {
    match parse_json(bytes, true)? {
        serde_json::Value::Object(_) => Ok(()),
        _ => Err(ApiError::bad_request(
            "request body must be a JSON object (or empty)",
        )),
    }
}

fn status(ctx: &ApiContext) -> Response<ResBody> {
    json_response(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "version": crate::VERSION,
            "api": crate::API_VERSION,
            "pid": std::process::id(),
            "url": ctx.url,
            "started_at": ctx.started_at,
            "pending": ctx.broker.pending_count(),
        }),
    )
}

async fn list_interactions(
    ctx: &ApiContext,
    req: &Request<Incoming>,
) -> Result<Response<ResBody>, ApiError> {
    let q = query(req)?;
    let mut status = match q.get("status").map(|s| s.trim().to_string()) {
        None => None,
        Some(s) => Some(Status::parse(&s).ok_or_else(|| {
            ApiError::bad_request(
                "status must be one of pending, answered, expired, cancelled, superseded",
            )
        })?),
    };
    if query_bool(&q, "pending")? == Some(true) {
        if status.is_some_and(|s| s != Status::Pending) {
            return Err(ApiError::bad_request("pending=true conflicts with status"));
        }
        status = Some(Status::Pending);
    }
    let filter = InteractionFilter {
        status,
        agent: query_str(&q, "agent"),
        project: query_str(&q, "project"),
        session: query_str(&q, "session"),
        limit: query_int(&q, "limit", 1, 500)?.unwrap_or(100) as usize,
    };
    let records = ctx.broker.list(&filter).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "interactions": records }),
    ))
}

async fn list_notifications(
    req: &Request<Incoming>,
    ctx: &ApiContext,
) -> Result<Response<ResBody>, ApiError> {
    let q = query(req)?;
    let status = match q.get("status").map(|s| s.trim().to_string()) {
        None => None,
        Some(s) => Some(NotificationStatus::parse(&s).ok_or_else(|| {
            ApiError::bad_request("status must be one of active, resolved, dismissed")
        })?),
    };
    let filter = NotificationFilter {
        status,
        agent: query_str(&q, "agent"),
        project: query_str(&q, "project"),
        limit: query_int(&q, "limit", 1, 500)?.unwrap_or(100) as usize,
    };
    let records = ctx.broker.list_notifications(&filter).await?;
    Ok(json_response(
        StatusCode::OK,
        &json!({ "notifications": records }),
    ))
}
