//! Per-user request rate limits: a token bucket per user, shared by all of the user's
//! keys (governor's GCRA), so more keys buy no more requests. Requests over the limit
//! get 429 with `Retry-After`; other users are not affected. Only users that
//! authenticated get a bucket, so the table is bounded by the users in the store. A
//! preview's traffic through a link or a public port (anyone's) has a bucket of its
//! own per port, never its exposer's: strangers cannot spend a user's limit.
//!
//! `auth::principal` authenticates and takes one token, for REST, MCP and the WebSockets
//! alike; `check_preview` is a preview port's bucket.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Counter of the requests refused for their rate limit.
pub const RATE_LIMITED: &str = "sandboxd_rate_limited_total";

/// Buckets kept before the full ones are let go, at most every `SWEEP_EVERY`.
const MAX_BUCKETS: usize = 10_000;
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// The limits of every user.
#[derive(Debug)]
pub struct UserLimiter {
    limiter: Option<DefaultKeyedRateLimiter<String>>,
    /// When full buckets were last let go (a scan of the table: not at every request).
    swept: std::sync::Mutex<std::time::Instant>,
}

impl UserLimiter {
    /// `per_second` sustained with bursts of `burst`; `per_second == 0` turns limits off.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let limiter = NonZeroU32::new(per_second).map(|rate| {
            let burst = NonZeroU32::new(burst.max(per_second)).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        Self {
            limiter,
            swept: std::sync::Mutex::new(std::time::Instant::now()),
        }
    }

    /// Takes one request from the user's bucket; `Err(wait)` when it is empty.
    pub fn check(&self, user_id: &str) -> Result<(), Duration> {
        self.take(user_id.to_owned())
    }

    /// Takes one request from the bucket of a preview (`port` of `sandbox_id`) that
    /// admits what comes through a link or a public port.
    pub fn check_preview(&self, sandbox_id: &str, port: u16) -> Result<(), Duration> {
        if let Some(limiter) = &self.limiter
            && limiter.len() > MAX_BUCKETS
            && let Ok(mut swept) = self.swept.try_lock()
            && swept.elapsed() >= SWEEP_EVERY
        {
            // Full buckets are as good as none: the previews' come and go.
            limiter.retain_recent();
            *swept = std::time::Instant::now();
        }
        self.take(format!("preview {sandbox_id} {port}"))
    }

    fn take(&self, key: String) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check_key(&key)
            .map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_refusals_with_a_wait_and_other_keys_unaffected() {
        let limits = UserLimiter::new(1, 3);
        for _ in 0..3 {
            assert_eq!(limits.check("a"), Ok(()));
        }
        let wait = limits.check("a").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(limits.check("b"), Ok(()));
    }

    #[test]
    fn a_previews_bucket_is_its_own() {
        let limits = UserLimiter::new(1, 2);
        for _ in 0..2 {
            assert_eq!(limits.check_preview("s", 8000), Ok(()));
        }
        assert!(limits.check_preview("s", 8000).is_err());
        assert_eq!(limits.check("s"), Ok(()), "the exposer's own is untouched");
        assert_eq!(limits.check_preview("s", 8001), Ok(()));
    }

    #[test]
    fn zero_turns_limits_off() {
        let limits = UserLimiter::new(0, 0);
        for _ in 0..10_000 {
            assert_eq!(limits.check("a"), Ok(()));
        }
    }
}
