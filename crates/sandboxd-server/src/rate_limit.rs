//! Per-key request rate limits: a token bucket per API key (governor's GCRA). Requests
//! over the limit get 429 with `Retry-After`; other keys are not affected. Only keys
//! that authenticated get a bucket, so the table is bounded by the keys in the store.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// The limits of every key.
#[derive(Debug)]
pub struct KeyLimiter {
    limiter: Option<DefaultKeyedRateLimiter<String>>,
}

impl KeyLimiter {
    /// `per_second` sustained with bursts of `burst`; `per_second == 0` turns limits off.
    pub fn new(per_second: u32, burst: u32) -> Self {
        let limiter = NonZeroU32::new(per_second).map(|rate| {
            let burst = NonZeroU32::new(burst.max(per_second)).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        Self { limiter }
    }

    /// Takes one request from the key's bucket; `Err(wait)` when it is empty.
    pub fn check(&self, key_id: &str) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter
            .check_key(&key_id.to_owned())
            .map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_refusals_with_a_wait_and_other_keys_unaffected() {
        let limits = KeyLimiter::new(1, 3);
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
        let limits = KeyLimiter::new(0, 0);
        for _ in 0..10_000 {
            assert_eq!(limits.check("a"), Ok(()));
        }
    }
}
