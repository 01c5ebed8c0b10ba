//! One-time login links and browser sessions of the web UI, kept in the daemon's memory only.
//!
//! A link token is minted by a bearer-authenticated client (`agentnotify ui`), works once and
//! only within [`LINK_TTL`]; redeeming it creates a session whose id travels in an HttpOnly,
//! SameSite=Strict cookie. Secrets are compared in constant time and never printed: a restart
//! of the daemon ends every session, which is the intended, safe failure.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::secret::{constant_time_eq, random_b64url, Secret};

/// How long a one-time link stays valid.
pub const LINK_TTL: Duration = Duration::from_secs(120);
/// How long a browser session lasts after login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Unredeemed links kept at once; the oldest is dropped beyond this.
const MAX_LINKS: usize = 32;
/// Sessions kept at once; the oldest is dropped beyond this.
const MAX_SESSIONS: usize = 64;

/// The name of the session cookie.
pub const COOKIE_NAME: &str = "an_session";

/// Link tokens and sessions, each with its deadline.
pub struct Sessions {
    link_ttl: Duration,
    session_ttl: Duration,
    links: Mutex<Vec<(Secret, Instant)>>,
    sessions: Mutex<Vec<(Secret, Instant)>>,
}

impl Default for Sessions {
    fn default() -> Sessions {
        Sessions::with_ttls(LINK_TTL, SESSION_TTL)
    }
}

impl Sessions {
    /// Lifetimes are injectable so tests need not sleep.
    pub fn with_ttls(link_ttl: Duration, session_ttl: Duration) -> Sessions {
        Sessions {
            link_ttl,
            session_ttl,
            links: Mutex::new(Vec::new()),
            sessions: Mutex::new(Vec::new()),
        }
    }

    pub fn link_ttl(&self) -> Duration {
        self.link_ttl
    }

    pub fn session_ttl(&self) -> Duration {
        self.session_ttl
    }

    /// Mints a one-time link token (32 random bytes).
    pub fn mint_link(&self, now: Instant) -> Secret {
        let token = Secret::new(random_b64url(32));
        insert_bounded(
            &self.links,
            token.clone(),
            now + self.link_ttl,
            now,
            MAX_LINKS,
        );
        token
    }

    /// Redeems a link token: valid once, before its deadline. On success returns a new
    /// session id.
    pub fn redeem_link(&self, presented: &str, now: Instant) -> Option<Secret> {
        if !take_match(&self.links, presented, now) {
            return None;
        }
        let session = Secret::new(random_b64url(32));
        insert_bounded(
            &self.sessions,
            session.clone(),
            now + self.session_ttl,
            now,
            MAX_SESSIONS,
        );
        Some(session)
    }

    /// True when `presented` is a live session id.
    pub fn is_session(&self, presented: &str, now: Instant) -> bool {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|(_, deadline)| *deadline > now);
        // Every entry is compared, so the time taken does not tell which one matched.
        sessions.iter().fold(false, |found, (s, _)| {
            found | constant_time_eq(s.expose().as_bytes(), presented.as_bytes())
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn insert_bounded(
    list: &Mutex<Vec<(Secret, Instant)>>,
    secret: Secret,
    deadline: Instant,
    now: Instant,
    max: usize,
) {
    let mut list = lock(list);
    list.retain(|(_, d)| *d > now);
    while list.len() >= max {
        list.remove(0);
    }
    list.push((secret, deadline));
}

/// Removes and reports a live entry equal to `presented`, comparing with every entry.
fn take_match(list: &Mutex<Vec<(Secret, Instant)>>, presented: &str, now: Instant) -> bool {
    let mut list = lock(list);
    list.retain(|(_, d)| *d > now);
    let mut found = None;
    for (i, (s, _)) in list.iter().enumerate() {
        if constant_time_eq(s.expose().as_bytes(), presented.as_bytes()) {
            found = Some(i);
        }
    }
    match found {
        Some(i) => {
            list.remove(i);
            true
        }
        None => false,
    }
}

/// The session id from a `Cookie` header, if it carries ours.
pub fn cookie_value(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim())
}

/// The `Set-Cookie` value that starts a session.
pub fn set_cookie(session: &Secret, ttl: Duration) -> String {
    format!(
        "{COOKIE_NAME}={}; HttpOnly; SameSite=Strict; Path=/ui; Max-Age={}",
        session.expose(),
        ttl.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_works_once() {
        let s = Sessions::default();
        let now = Instant::now();
        let link = s.mint_link(now);
        let session = s.redeem_link(link.expose(), now).expect("first use works");
        assert!(s.is_session(session.expose(), now));
        assert!(
            s.redeem_link(link.expose(), now).is_none(),
            "second use fails"
        );
    }

    #[test]
    fn a_link_expires_after_its_ttl() {
        let s = Sessions::default();
        let now = Instant::now();
        let link = s.mint_link(now);
        let later = now + LINK_TTL + Duration::from_millis(1);
        assert!(s.redeem_link(link.expose(), later).is_none());
        let fresh = s.mint_link(now);
        let just_in_time = now + LINK_TTL - Duration::from_millis(1);
        assert!(s.redeem_link(fresh.expose(), just_in_time).is_some());
    }

    #[test]
    fn the_link_ttl_is_at_most_two_minutes() {
        assert!(LINK_TTL <= Duration::from_secs(120));
    }

    #[test]
    fn a_session_expires() {
        let s = Sessions::with_ttls(Duration::from_secs(5), Duration::from_secs(60));
        let now = Instant::now();
        let link = s.mint_link(now);
        let session = s.redeem_link(link.expose(), now).unwrap();
        assert!(s.is_session(session.expose(), now + Duration::from_secs(59)));
        assert!(!s.is_session(session.expose(), now + Duration::from_secs(61)));
    }

    #[test]
    fn wrong_or_empty_values_are_refused() {
        let s = Sessions::default();
        let now = Instant::now();
        let link = s.mint_link(now);
        assert!(s.redeem_link("", now).is_none());
        assert!(s.redeem_link(&link.expose()[1..], now).is_none());
        assert!(!s.is_session("", now));
        assert!(!s.is_session(link.expose(), now), "a link is not a session");
    }

    #[test]
    fn old_links_are_dropped_beyond_the_bound() {
        let s = Sessions::default();
        let now = Instant::now();
        let first = s.mint_link(now);
        for _ in 0..MAX_LINKS {
            s.mint_link(now);
        }
        assert!(s.redeem_link(first.expose(), now).is_none());
    }

    #[test]
    fn cookie_parsing_finds_ours() {
        assert_eq!(cookie_value("a=1; an_session=xyz; b=2"), Some("xyz"));
        assert_eq!(cookie_value("an_sessionx=1"), None);
        assert_eq!(cookie_value(""), None);
        let c = set_cookie(&Secret::new("v"), SESSION_TTL);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Path=/ui"));
    }
}
