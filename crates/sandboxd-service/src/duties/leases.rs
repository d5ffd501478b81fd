//! The dead-man's switch, sandboxd's side. Each sandbox's main process ends it when its
//! lease runs out (`sandboxd-agent`'s supervisor); a pass here renews the lease of every
//! sandbox whose agent this replica holds, to its expiry plus a grace, so that a sandbox
//! outlives a control plane that is gone or cut off by its idle timeout and the grace at
//! most. The reaper stays the normal way a sandbox ends: the lease only runs out when
//! nothing renews it.
//!
//! `lease_once` runs every third of the grace; a warm pool member's lease is the grace.

use std::time::Duration;

use sandboxd_core::model::SandboxStatus;

use super::Duties;
use crate::now_ms;

/// The grace when the operator sets none.
pub const DEFAULT_LEASE_GRACE: Duration = Duration::from_secs(60);

/// How long a sandbox may live, told at `now`: until its expiry, plus the grace.
pub(crate) fn lease_of(expires_at: Option<i64>, now: i64, grace: Duration) -> Duration {
    let left = expires_at.map_or(0, |at| at.saturating_sub(now).max(0));
    Duration::from_millis(left as u64) + grace
}

impl crate::Service {
    /// How long a sandbox outlives its expiry when sandboxd is gone.
    pub(crate) fn lease_grace(&self) -> Duration {
        self.inner
            .options
            .lease_grace
            .unwrap_or(DEFAULT_LEASE_GRACE)
    }
}

impl Duties {
    /// How long a sandbox outlives its expiry when sandboxd is gone.
    pub fn lease_grace(&self) -> Duration {
        self.service.lease_grace()
    }

    /// How often the lease pass runs: a third of the grace, a second at least, so a
    /// pass or two may be missed before any lease runs out.
    pub fn lease_interval(&self) -> Duration {
        (self.lease_grace() / 3).max(Duration::from_secs(1))
    }

    /// One pass: every sandbox whose agent is connected here is told its lease (a warm
    /// pool member, which has no expiry yet: the grace). How many were told.
    pub async fn lease_once(&self) -> usize {
        let grace = self.lease_grace();
        let members = self.service.pools().members();
        let now = now_ms();
        let mut leases = Vec::new();
        for sandbox_id in self.service.agents().listened() {
            let Some(conn) = self.service.agent_channel(&sandbox_id) else {
                continue;
            };
            let lease = if members.contains(&sandbox_id) {
                grace
            } else {
                match self.service.store().sandbox(&sandbox_id).await {
                    Ok(Some(row)) if row.status == SandboxStatus::Running => {
                        lease_of(row.expires_at, now, grace)
                    }
                    _ => continue,
                }
            };
            leases.push(async move { conn.lease(lease).await.is_ok() });
        }
        // At once: an agent that is slow to answer holds up no other sandbox's lease.
        futures_util::future::join_all(leases)
            .await
            .into_iter()
            .filter(|told| *told)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_runs_to_the_expiry_and_the_grace() {
        let grace = Duration::from_secs(60);
        assert_eq!(
            lease_of(Some(10_000), 4_000, grace),
            Duration::from_secs(66)
        );
        assert_eq!(
            lease_of(Some(1_000), 4_000, grace),
            grace,
            "expired: the grace"
        );
        assert_eq!(lease_of(None, 4_000, grace), grace);
    }
}
