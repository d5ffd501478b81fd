//! The egress log's pure parts: what one decision of the proxy records, the allowance
//! that bounds how fast a sandbox may add to the log and to the audit log, and how a
//! host a program named is shown (it is the sandbox's text: bounded and printable).
//!
//! `EgressRecord` and `Decision`. `Allowance` is a token bucket counting what it holds
//! back; `QueueShares` is each organization's share of the log writer's queue.

use std::fmt;

/// What became of one connection a program asked the proxy for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Allowed and connected.
    Allowed,
    /// Refused by the list or the address rules.
    Refused,
    /// Allowed, but the host did not answer.
    Failed,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "allowed" => Some(Self::Allowed),
            "refused" => Some(Self::Refused),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a sandbox's egress log. An allowed connection's entry is written when
/// it is decided and again when it ends, with its bytes; each write gives it a new
/// `position`, so a reader following the log by position sees it at both times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRecord {
    pub entry_id: String,
    pub sandbox_id: String,
    /// Where the entry stands in the log: set by the store on each write.
    pub position: String,
    /// When it was decided, epoch ms.
    pub at: i64,
    /// The host as the program named it (see [`shown_host`]).
    pub host: String,
    pub port: u16,
    pub decision: Decision,
    /// Why it was refused or failed.
    pub reason: Option<String>,
    /// The address connected to.
    pub address: Option<String>,
    /// Bytes sent to the host.
    pub bytes_out: u64,
    /// Bytes received from the host.
    pub bytes_in: u64,
    /// When the connection ended, epoch ms; `None` while open (or never connected).
    pub ended_at: Option<i64>,
    /// Decisions of this sandbox not written before this one, over its allowance.
    pub unlogged: u64,
}

/// Entries one sandbox keeps in its log: older ones are dropped as new ones come.
pub const KEPT_PER_SANDBOX: u32 = 10_000;

/// The longest host text kept.
pub const MAX_SHOWN_HOST: usize = 253;

/// A host text from the sandbox as the log keeps it: at most [`MAX_SHOWN_HOST`]
/// characters, anything but printable ASCII replaced with `?`.
pub fn shown_host(text: &str) -> String {
    text.chars()
        .take(MAX_SHOWN_HOST)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

/// Whether `text` can be a position in the log (the store's ordered ids): a cursor a
/// caller passes back.
pub fn is_position(text: &str) -> bool {
    (1..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// How much a sandbox may write in a span of time: `burst` at once, refilled at
/// `per_second`. What is over it is counted, and the count handed to the next write
/// that is allowed, so what was left out is still known.
#[derive(Debug, Clone)]
pub struct Allowance {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last_ms: i64,
    held: u64,
}

impl Allowance {
    pub fn new(per_second: f64, burst: f64, now_ms: i64) -> Self {
        Self {
            per_second,
            burst,
            tokens: burst,
            last_ms: now_ms,
            held: 0,
        }
    }

    /// `Some(n)` when a write is allowed now, `n` being how many were held back since
    /// the last allowed one; `None` when it is over the allowance (and counted).
    pub fn take(&mut self, now_ms: i64) -> Option<u64> {
        let elapsed = (now_ms - self.last_ms).max(0) as f64 / 1000.0;
        self.last_ms = self.last_ms.max(now_ms);
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Some(std::mem::take(&mut self.held))
        } else {
            self.held = self.held.saturating_add(1);
            None
        }
    }
}

/// Entries of one organization the writer's queue holds at once: the rest of the
/// queue stays for the others, however many sandboxes one organization floods from.
pub const QUEUED_PER_ORGANIZATION: usize = 1024;

/// How much of the writer's queue each organization holds now (pure bookkeeping; an
/// organization holding none is forgotten).
#[derive(Debug, Default)]
pub struct QueueShares {
    held: std::collections::HashMap<String, usize>,
}

impl QueueShares {
    /// Counts one more entry of `organization_id`, unless it holds its share already.
    pub fn take(&mut self, organization_id: &str) -> bool {
        let held = self.held.entry(organization_id.to_owned()).or_default();
        if *held >= QUEUED_PER_ORGANIZATION {
            return false;
        }
        *held += 1;
        true
    }

    /// One entry of `organization_id` left the queue.
    pub fn give_back(&mut self, organization_id: &str) {
        if let Some(held) = self.held.get_mut(organization_id) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                self.held.remove(organization_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allowance_lets_a_burst_through_then_counts_what_it_holds_back() {
        let mut allowance = Allowance::new(2.0, 3.0, 0);
        assert_eq!(allowance.take(0), Some(0));
        assert_eq!(allowance.take(0), Some(0));
        assert_eq!(allowance.take(0), Some(0));
        assert_eq!(allowance.take(0), None);
        assert_eq!(allowance.take(100), None);
        // Half a second refills one.
        assert_eq!(allowance.take(500), Some(2));
        assert_eq!(allowance.take(500), None);
        // A long pause refills no more than the burst.
        for _ in 0..3 {
            assert!(allowance.take(60_000).is_some());
        }
        assert_eq!(allowance.take(60_000), None);
        // A clock that goes back refills nothing.
        assert_eq!(allowance.take(1_000), None);
        assert_eq!(allowance.take(60_500), Some(2));
    }

    #[test]
    fn hosts_are_shown_bounded_and_printable() {
        assert_eq!(shown_host("pypi.org"), "pypi.org");
        assert_eq!(shown_host("a b\u{1b}[31m\u{e9}"), "a?b?[31m?");
        assert_eq!(shown_host(&"x".repeat(1000)).len(), MAX_SHOWN_HOST);
    }

    #[test]
    fn positions_are_checked() {
        assert!(is_position("0001764806400000-000000000001-AbCd1234"));
        assert!(!is_position(""));
        assert!(!is_position("1' OR 1=1"));
        assert!(!is_position(&"1".repeat(65)));
    }

    #[test]
    fn decisions_read_back() {
        for decision in [Decision::Allowed, Decision::Refused, Decision::Failed] {
            assert_eq!(Decision::parse(decision.as_str()), Some(decision));
        }
        assert_eq!(Decision::parse("maybe"), None);
    }

    #[test]
    fn one_organization_holds_no_more_than_its_share_of_the_queue() {
        let mut shares = QueueShares::default();
        for _ in 0..QUEUED_PER_ORGANIZATION {
            assert!(shares.take("flooding"));
        }
        assert!(!shares.take("flooding"));
        assert!(
            shares.take("quiet"),
            "another organization's entry is queued"
        );
        shares.give_back("flooding");
        assert!(shares.take("flooding"));
        for _ in 0..QUEUED_PER_ORGANIZATION {
            shares.give_back("flooding");
        }
        shares.give_back("quiet");
        assert!(shares.held.is_empty(), "forgotten when they hold none");
    }
}
