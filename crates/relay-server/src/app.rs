//! The phone app (SPEC §12.1), served at `/app/` from the files under `app/`, compiled in.
//!
//! Every reply carries a strict CSP (same origin only, no inline script or style), so the
//! page can talk to nothing but this Relay; content types come from the file's extension,
//! and a file of any other kind is not served.

use agentnotify_http::{full, ApiError, ResBody};
use hyper::{header, Response, StatusCode};
use include_dir::{include_dir, Dir};

static APP: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/app");

/// The stylesheet the phone app shares with the broker's web UI, which serves it too (at
/// `/ui/base.css`): one file for both, kept here with the app's other files.
pub const BASE_CSS: &str = include_str!("../app/base.css");

/// The policy every `/app/` reply carries.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; manifest-src 'self'; worker-src 'self'; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn content_type(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json; charset=utf-8",
        "webmanifest" => "application/manifest+json; charset=utf-8",
        "svg" => "image/svg+xml; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        _ => return None,
    })
}

/// `GET /app`, `/app/` and `/app/<file>`: `rest` is the path after `/app`.
pub(crate) fn serve(rest: &str) -> Result<Response<ResBody>, ApiError> {
    if rest.is_empty() {
        return Ok(Response::builder()
            .status(StatusCode::PERMANENT_REDIRECT)
            .header(header::LOCATION, "/app/")
            .body(full(""))
            .expect("static headers are valid"));
    }
    let file = match rest.strip_prefix('/').unwrap_or(rest) {
        "" => "index.html",
        f => f,
    };
    let not_found = || ApiError::not_found("no such file in the app");
    if file
        .split('/')
        .any(|part| part.is_empty() || part.starts_with('.'))
    {
        return Err(not_found());
    }
    let kind = content_type(file).ok_or_else(not_found)?;
    let body = APP.get_file(file).ok_or_else(not_found)?.contents();
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, kind)
        .header(header::CONTENT_SECURITY_POLICY, CSP)
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("cross-origin-opener-policy", "same-origin")
        .body(full(body))
        .expect("static headers are valid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_only_app_files_of_known_kinds() {
        assert!(serve("/").is_ok());
        assert!(serve("/index.html").is_ok());
        assert_eq!(serve("").unwrap().status(), StatusCode::PERMANENT_REDIRECT);
        for bad in [
            "/../Cargo.toml",
            "/.hidden",
            "/nope.html",
            "//index.html",
            "/index.exe",
        ] {
            assert!(serve(bad).is_err(), "{bad}");
        }
    }
}
