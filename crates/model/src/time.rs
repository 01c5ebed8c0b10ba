//! Wall-clock timestamps: stored as Unix milliseconds, shown as RFC 3339 UTC.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant with millisecond precision; serialises as `2026-11-30T02:53:05.123Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub fn now() -> Timestamp {
        Timestamp::from_system(SystemTime::now())
    }
    pub fn from_system(t: SystemTime) -> Timestamp {
        Timestamp(t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64)
    }
    pub fn millis(self) -> u64 {
        self.0
    }
    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(d.as_millis() as u64))
    }
    pub fn minus(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(d.as_millis() as u64))
    }
    /// Time from `self` until `later` (zero when `later` is not later).
    pub fn until(self, later: Timestamp) -> Duration {
        Duration::from_millis(later.0.saturating_sub(self.0))
    }
    pub fn to_rfc3339(self) -> String {
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(self.0)).to_string()
    }
    pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
        humantime::parse_rfc3339_weak(s)
            .ok()
            .map(Timestamp::from_system)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 time: {s}")))
    }
}

impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        self.plus(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_rfc3339() {
        let t = Timestamp(1_796_000_000_123);
        let s = t.to_rfc3339();
        assert!(s.ends_with(".123Z"), "{s}");
        assert_eq!(Timestamp::parse_rfc3339(&s), Some(t));
    }
}
