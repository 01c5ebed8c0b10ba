//! Token buckets: one shared by every POST route of the broker (SPEC §4.1), and one per
//! client address for the reference Relay, which faces the network.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// How many client addresses the per-address limiter remembers before forgetting the idle.
const MAX_TRACKED_ADDRESSES: usize = 10_000;

/// A bucket of tokens refilled at `per_second` up to `burst`.
#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Clone, Copy)]
struct Rate {
    per_second: f64,
    burst: f64,
}

impl Rate {
    fn new(per_second: u32, burst: u32) -> Rate {
        Rate {
            per_second: per_second.max(1) as f64,
            burst: burst.max(1) as f64,
        }
    }

    fn full(&self, now: Instant) -> Bucket {
        Bucket {
            tokens: self.burst,
            last: now,
        }
    }

    /// Takes one token from `bucket`, or says how many whole seconds to wait.
    fn take(&self, bucket: &mut Bucket, now: Instant) -> Result<(), u64> {
        let tokens = (bucket.tokens
            + now.duration_since(bucket.last).as_secs_f64() * self.per_second)
            .min(self.burst);
        *bucket = Bucket { tokens, last: now };
        if tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - tokens) / self.per_second;
            Err(wait.ceil().max(1.0) as u64)
        }
    }

    /// Whether `bucket` would be full by `now` (forgetting it loses nothing).
    fn refilled(&self, bucket: &Bucket, now: Instant) -> bool {
        bucket.tokens + now.duration_since(bucket.last).as_secs_f64() * self.per_second
            >= self.burst
    }
}

/// One bucket for everyone.
pub struct RateLimiter {
    rate: Rate,
    bucket: Mutex<Bucket>,
}

impl RateLimiter {
    pub fn new(per_second: u32, burst: u32) -> RateLimiter {
        let rate = Rate::new(per_second, burst);
        RateLimiter {
            rate,
            bucket: Mutex::new(rate.full(Instant::now())),
        }
    }

    /// Takes one token, or says how many whole seconds to wait before retrying.
    pub fn take(&self) -> Result<(), u64> {
        let mut bucket = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        self.rate.take(&mut bucket, Instant::now())
    }
}

/// One bucket per client address.
pub struct PerAddressLimiter {
    rate: Rate,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl PerAddressLimiter {
    pub fn new(per_second: u32, burst: u32) -> PerAddressLimiter {
        PerAddressLimiter {
            rate: Rate::new(per_second, burst),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one of `addr`'s tokens, or says how many whole seconds it must wait.
    pub fn take(&self, addr: IpAddr) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if buckets.len() >= MAX_TRACKED_ADDRESSES && !buckets.contains_key(&addr) {
            buckets.retain(|_, b| !self.rate.refilled(b, now));
            if buckets.len() >= MAX_TRACKED_ADDRESSES / 2 {
                // Mostly busy addresses: start over rather than scan again for every new
                // one (forgetting a bucket only refills it).
                buckets.clear();
            }
        }
        let bucket = buckets.entry(addr).or_insert_with(|| self.rate.full(now));
        self.rate.take(bucket, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_burst_then_refuses_with_a_wait() {
        let limiter = RateLimiter::new(1, 3);
        assert!(limiter.take().is_ok());
        assert!(limiter.take().is_ok());
        assert!(limiter.take().is_ok());
        assert_eq!(limiter.take(), Err(1));
    }

    #[test]
    fn each_address_has_its_own_bucket() {
        let limiter = PerAddressLimiter::new(1, 2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(limiter.take(a).is_ok());
        assert!(limiter.take(a).is_ok());
        assert_eq!(limiter.take(a), Err(1));
        assert!(limiter.take(b).is_ok(), "another client is not held back");
    }

    #[test]
    fn the_table_of_addresses_stays_bounded() {
        let limiter = PerAddressLimiter::new(1, 1);
        for i in 0..MAX_TRACKED_ADDRESSES as u32 {
            // Each address spends its only token: all of them are busy.
            let _ = limiter.take(IpAddr::from(i.to_be_bytes()));
        }
        let full = limiter.buckets.lock().unwrap().len();
        assert_eq!(full, MAX_TRACKED_ADDRESSES);
        assert!(limiter.take("10.0.0.1".parse().unwrap()).is_ok());
        assert!(limiter.buckets.lock().unwrap().len() < MAX_TRACKED_ADDRESSES / 2);
    }
}
