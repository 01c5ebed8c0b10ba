//! One token bucket shared by every POST route (SPEC §4.1).

use std::sync::Mutex;
use std::time::Instant;

pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    bucket: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    pub fn new(per_second: u32, burst: u32) -> RateLimiter {
        let burst = burst.max(1) as f64;
        RateLimiter {
            per_second: per_second.max(1) as f64,
            burst,
            bucket: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes one token, or says how many whole seconds to wait before retrying.
    pub fn take(&self) -> Result<(), u64> {
        let mut bucket = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let (tokens, last) = *bucket;
        let tokens =
            (tokens + now.duration_since(last).as_secs_f64() * self.per_second).min(self.burst);
        if tokens >= 1.0 {
            *bucket = (tokens - 1.0, now);
            Ok(())
        } else {
            *bucket = (tokens, now);
            let wait = (1.0 - tokens) / self.per_second;
            Err(wait.ceil().max(1.0) as u64)
        }
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
}
