//! Per-user request rate limits: a token bucket per user, shared by all of the user's
//! keys (governor's GCRA), so more keys buy no more requests. Requests over the limit
//! get 429 with `Retry-After`; other users are not affected. Only users that
//! authenticated get a bucket, so the table is bounded by the users in the store.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Counter of the requests refused for their rate limit.
pub const RATE_LIMITED: &str = "sandboxd_rate_limited_total";

/// The limits of every user.
#[derive(Debug)]
pub struct UserLimiter {
    limiter: Option<DefaultKeyedRateLimiter<String>>,
}

impl UserLimiter {
    /// `per_second` sustained with bursts of `burst`; `per_second == 0` turns limits off.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let limiter = NonZeroU32::new(per_second).map(|rate| {
            let burst = NonZeroU32::new(burst.max(per_second)).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        Self { limiter }
    }

    /// Takes one request from the user's bucket; `Err(wait)` when it is empty.
    pub fn check(&self, user_id: &str) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check_key(&user_id.to_owned())
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
    fn zero_turns_limits_off() {
        let limits = UserLimiter::new(0, 0);
        for _ in 0..10_000 {
            assert_eq!(limits.check("a"), Ok(()));
        }
    }
}
