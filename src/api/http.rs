//! HTTP plumbing shared by the handlers: bodies, JSON replies, errors, query strings.

use std::collections::HashMap;
use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{header, Request, Response, StatusCode};
use serde::Serialize;
use serde_json::Value;

use crate::broker::BrokerError;
use crate::model::interaction::AnswerRefusal;

/// Response body type of every route (boxed so streaming routes fit too).
pub type ResBody = BoxBody<Bytes, Infallible>;

/// Request bodies larger than this are refused with 413 (SPEC §4.1).
pub const MAX_BODY: usize = 128 * 1024;

/// An error reply: `{"error": "<message>", "code": "<code>"}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
    /// For 405: the methods the route takes (the `Allow` header).
    pub allow: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            allow: None,
        }
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    /// 429 `rate_limited` with `Retry-After: secs`.
    pub fn rate_limited(secs: u64) -> ApiError {
        ApiError {
            retry_after: Some(secs),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests; retry after {secs} s"),
            )
        }
    }

    pub fn into_response(self) -> Response<ResBody> {
        let body = serde_json::json!({"error": self.message, "code": self.code});
        let mut res = json_response(self.status, &body);
        if let Some(methods) = self.allow {
            res.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(methods));
        }
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        res
    }
}

impl From<BrokerError> for ApiError {
    fn from(e: BrokerError) -> ApiError {
        match e {
            BrokerError::Invalid(msg) => ApiError::bad_request(msg.0),
            BrokerError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
            BrokerError::Refused(why) => {
                let status = match why {
                    AnswerRefusal::AlreadyAnswered => StatusCode::CONFLICT,
                    _ => StatusCode::BAD_REQUEST,
                };
                ApiError::new(status, why.code(), why.to_string())
            }
            BrokerError::RelayUnavailable => {
                ApiError::new(StatusCode::BAD_REQUEST, "relay_unavailable", e.to_string())
            }
            BrokerError::Store(err) => {
                tracing::error!(error = %err, "storage failure");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the broker could not store the change; nothing was changed",
                )
            }
        }
    }
}

pub fn full(bytes: impl Into<Bytes>) -> ResBody {
    Full::new(bytes.into()).boxed()
}

pub fn json_response<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Response<ResBody> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    let mut res = Response::new(full(bytes));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    res.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    res
}

/// Reads the whole body, refusing more than [`MAX_BODY`] bytes with 413.
pub async fn read_body(req: Request<Incoming>) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body must be at most {} bytes", MAX_BODY),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large())
        }
        Err(_) => Err(ApiError::bad_request("the request body could not be read")),
    }
}

/// Parses a JSON body; an empty body counts as `{}` only where `allow_empty`.
pub fn parse_json(bytes: &[u8], allow_empty: bool) -> Result<Value, ApiError> {
    if allow_empty && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("request body is not valid JSON: {e}")))
}

/// Query parameters; a name given twice is refused rather than guessed at.
pub fn query(req: &Request<Incoming>) -> Result<HashMap<String, String>, ApiError> {
    let mut out = HashMap::new();
    for (k, v) in form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
        if out.insert(k.to_string(), v.into_owned()).is_some() {
            return Err(ApiError::bad_request(format!(
                "{k} is given more than once"
            )));
        }
    }
    Ok(out)
}

/// An optional whole-number query parameter within `min..=max`; present but empty is an
/// error, not "absent".
pub fn query_int(
    q: &HashMap<String, String>,
    name: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ApiError> {
    match q.get(name).map(|s| s.trim()) {
        None => Ok(None),
        Some(s) => match s.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::bad_request(format!(
                "{name} must be a whole number from {min} to {max}"
            ))),
        },
    }
}

/// An optional boolean query parameter: `true` or `false`.
pub fn query_bool(q: &HashMap<String, String>, name: &str) -> Result<Option<bool>, ApiError> {
    match q.get(name).map(|s| s.trim()) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(ApiError::bad_request(format!(
            "{name} must be true or false"
        ))),
    }
}

pub fn query_str(q: &HashMap<String, String>, name: &str) -> Option<String> {
    q.get(name)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}
