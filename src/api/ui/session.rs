//! One-time login links and browser sessions of the web UI, kept in the daemon's memory only.
//!
//! A link token is minted by a bearer-authenticated client (`agentnotify ui`), works once and
//! only within [`LINK_TTL`]. It travels in the link's fragment, which a browser never sends
//! to a server; the page posts it back once and receives a session token that it keeps in
//! `sessionStorage` (scoped to its origin, port included) and sends in the
//! [`SESSION_HEADER`] of every call. No cookie is set or read: cookies ignore ports, so any
//! other server on 127.0.0.1 would receive one, and any could toss one. A session is bound to
//! the `Host` it was started on. Secrets are compared in constant time and never printed; a
//! restart of the daemon ends every session, which is the intended, safe failure.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::secret::{constant_time_eq, random_b64url, Secret};

/// How long a one-time link stays valid.
pub const LINK_TTL: Duration = Duration::from_secs(120);
/// How long a browser session lasts after sign-in (a working day; it was 12 h with cookies).
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// Unredeemed links kept at once; the oldest is dropped beyond this.
const MAX_LINKS: usize = 32;
/// Sessions kept at once; the oldest is dropped beyond this.
const MAX_SESSIONS: usize = 64;

/// The request header that carries the session token.
pub const SESSION_HEADER: &str = "x-agentnotify-session";

/// A live session: its token, its deadline, and the `Host` it belongs to.
struct Session {
    token: Secret,
    deadline: Instant,
    host: String,
}

/// Link tokens and sessions, each with its deadline.
pub struct Sessions {
    link_ttl: Duration,
    session_ttl: Duration,
    links: Mutex<Vec<(Secret, Instant)>>,
    sessions: Mutex<Vec<Session>>,
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
        let mut links = lock(&self.links);
        links.retain(|(_, d)| *d > now);
        while links.len() >= MAX_LINKS {
            links.remove(0);
        }
        links.push((token.clone(), now + self.link_ttl));
        token
    }

    /// Redeems a link token: valid once, before its deadline. On success returns a new
    /// session token, bound to `host`.
    pub fn redeem_link(&self, presented: &str, host: &str, now: Instant) -> Option<Secret> {
        if !take_match(&self.links, presented, now) {
            return None;
        }
        let token = Secret::new(random_b64url(32));
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.deadline > now);
        while sessions.len() >= MAX_SESSIONS {
            sessions.remove(0);
        }
        sessions.push(Session {
            token: token.clone(),
            deadline: now + self.session_ttl,
            host: host.to_string(),
        });
        Some(token)
    }

    /// When the session `presented` ends, if it is live and was started on `host`.
    pub fn session_deadline(&self, presented: &str, host: &str, now: Instant) -> Option<Instant> {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.deadline > now);
        // Every entry is compared, so the time taken does not tell which one matched.
        let mut found = None;
        for s in sessions.iter() {
            if constant_time_eq(s.token.expose().as_bytes(), presented.as_bytes()) {
                found = Some(s);
            }
        }
        found.filter(|s| s.host == host).map(|s| s.deadline)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "127.0.0.1:47821";

    #[test]
    fn a_link_works_once() {
        let s = Sessions::default();
        let now = Instant::now();
        let link = s.mint_link(now);
        let session = s
            .redeem_link(link.expose(), HOST, now)
            .expect("first use works");
        assert!(s.session_deadline(session.expose(), HOST, now).is_some());
        assert!(
            s.redeem_link(link.expose(), HOST, now).is_none(),
            "second use fails"
        );
    }

    #[test]
    fn a_link_expires_after_its_ttl() {
        let s = Sessions::default();
        let now = Instant::now();
        let link = s.mint_link(now);
        let later = now + LINK_TTL + Duration::from_millis(1);
        assert!(s.redeem_link(link.expose(), HOST, later).is_none());
        let fresh = s.mint_link(now);
        let just_in_time = now + LINK_TTL - Duration::from_millis(1);
        assert!(s.redeem_link(fresh.expose(), HOST, just_in_time).is_some());
    }

    #[test]
    fn the_link_ttl_is_at_most_two_minutes_and_a_session_at_most_eight_hours() {
        assert!(LINK_TTL <= Duration::from_secs(120));
        assert!(SESSION_TTL <= Duration::from_secs(8 * 3600));
    }

    #[test]
    fn a_session_expires() {
        let s = Sessions::with_ttls(Duration::from_secs(5), Duration::from_secs(60));
        let now = Instant::now();
        let link = s.mint_link(now);
        let session = s.redeem_link(link.expose(), HOST, now).unwrap();
        let deadline = s
            .session_deadline(session.expose(), HOST, now + Duration::from_secs(59))
            .unwrap();
        assert_eq!(deadline, now + Duration::from_secs(60));
        assert!(s
            .session_deadline(session.expose(), HOST, now + Duration::from_secs(61))
            .is_none());
    }

    #[test]
    fn a_session_works_only_on_its_own_host() {
        let s = Sessions::default();
        let now = Instant::now();
        let session = s.redeem_link(s.mint_link(now).expose(), HOST, now).unwrap();
        for other in ["localhost:47821", "127.0.0.1:47822", "[::1]:47821", ""] {
            assert!(s.session_deadline(session.expose(), other, now).is_none());
        }
    }

    #[test]
    fn wrong_or_empty_values_are_refused() {
        let s = Sessions::default();
        let now = Instant::now();
        let link = s.mint_link(now);
        assert!(s.redeem_link("", HOST, now).is_none());
        assert!(s.redeem_link(&link.expose()[1..], HOST, now).is_none());
        assert!(s.session_deadline("", HOST, now).is_none());
        assert!(
            s.session_deadline(link.expose(), HOST, now).is_none(),
            "a link is not a session"
        );
    }

    #[test]
    fn old_links_are_dropped_beyond_the_bound() {
        let s = Sessions::default();
        let now = Instant::now();
        let first = s.mint_link(now);
        for _ in 0..MAX_LINKS {
            s.mint_link(now);
        }
        assert!(s.redeem_link(first.expose(), HOST, now).is_none());
    }
}
