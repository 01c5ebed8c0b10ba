//! The page's static files, compiled into the binary: no build step, nothing fetched from
//! anywhere else (the CSP allows only this origin).

/// One static file.
pub struct Asset {
    pub body: &'static str,
    pub content_type: &'static str,
}

/// The asset served at `/ui/<name>` (`""` is the page itself).
pub fn get(name: &str) -> Option<Asset> {
    let (body, content_type) = match name {
        "" | "index.html" => (
            include_str!("assets/index.html"),
            "text/html; charset=utf-8",
        ),
        "app.js" => (
            include_str!("assets/app.js"),
            "text/javascript; charset=utf-8",
        ),
        "base.css" => (agentnotify_relay::BASE_CSS, "text/css; charset=utf-8"),
        "app.css" => (include_str!("assets/app.css"), "text/css; charset=utf-8"),
        "icon.svg" => (include_str!("assets/icon.svg"), "image/svg+xml"),
        _ => return None,
    };
    Some(Asset { body, content_type })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_from_elsewhere_and_has_no_inline_code() {
        let html = get("").unwrap().body;
        for bad in [
            "http://", "https://", "//cdn", " style=", "onclick", "<style",
        ] {
            assert!(!html.contains(bad), "index.html contains {bad:?}");
        }
        // Scripts only by src.
        assert!(html.matches("<script").count() == html.matches("<script src=").count());
        for name in ["app.js", "base.css", "app.css"] {
            let body = get(name).unwrap().body;
            assert!(
                !body.contains("http://") && !body.contains("https://"),
                "{name}"
            );
            assert!(!body.contains("@import"), "{name}");
        }
        assert!(!get("app.js").unwrap().body.contains("innerHTML"));
        assert!(get("../secret").is_none());
    }
}
