//! Per-organization quotas: how much one organization may hold at once, so that one
//! tenant cannot take the whole host. Checked where the resource is taken, inside the
//! store's write transaction, so concurrent requests cannot overrun them together.
//!
//! The admission decisions: `admit_sandbox`; `admit_resume` (a paused sandbox holds
//! memory, not CPU); `admit_snapshot` (how many snapshots and the bytes they add, a size
//! of `0` while it is not known yet); `admit_volume` (how many volumes and the sizes they
//! reserve); `admit_key`.

/// The limits of each organization (`[quotas]` of the configuration; a key left out
/// keeps its default).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Quotas {
    /// Sandboxes being created or running.
    pub running_sandboxes: u32,
    /// CPUs reserved by those sandboxes, in all.
    pub cpu: f64,
    /// Memory reserved by those sandboxes, in all (MiB).
    pub memory_mb: i64,
    /// Usable (neither revoked nor expired) API keys per user.
    pub keys_per_user: u32,
    /// Snapshots kept.
    pub snapshots: u32,
    /// Bytes those snapshots add to their images, in all (MiB).
    pub snapshot_mb: i64,
    /// Volumes kept.
    pub volumes: u32,
    /// The sizes those volumes reserve, in all (MiB).
    pub volume_mb: i64,
    /// Memory of its sandboxes paused to disk, in all (MiB).
    pub hibernated_mb: i64,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            running_sandboxes: 200,
            cpu: 200.0,
            memory_mb: 400 * 1024,
            keys_per_user: 100,
            snapshots: 100,
            snapshot_mb: 50 * 1024,
            volumes: 100,
            volume_mb: 500 * 1024,
            hibernated_mb: 100 * 1024,
        }
    }
}

impl Quotas {
    /// The quotas as configured, or what is wrong with them.
    pub fn checked(self) -> Result<Self, &'static str> {
        if self.running_sandboxes == 0 || self.keys_per_user == 0 {
            return Err("quotas.running_sandboxes and quotas.keys_per_user must be at least 1");
        }
        if !(self.cpu.is_finite() && self.cpu >= 0.1) || self.memory_mb < 64 {
            return Err("quotas.cpu must be at least 0.1 and quotas.memory_mb at least 64");
        }
        Ok(Self {
            snapshot_mb: self.snapshot_mb.max(0),
            volume_mb: self.volume_mb.max(0),
            hibernated_mb: self.hibernated_mb.max(0),
            ..self
        })
    }
}

impl Quotas {
    /// No limit at all (benchmarks and tests that fill a store on purpose).
    pub fn unlimited() -> Self {
        Self {
            running_sandboxes: u32::MAX,
            cpu: f64::MAX / 2000.0,
            memory_mb: i64::MAX,
            keys_per_user: u32::MAX,
            snapshots: u32::MAX,
            snapshot_mb: i64::MAX / (1024 * 1024),
            volumes: u32::MAX,
            volume_mb: i64::MAX,
            hibernated_mb: i64::MAX / (1024 * 1024),
        }
    }
}

/// What an organization holds now.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    pub sandboxes: i64,
    pub cpu: f64,
    pub memory_mb: i64,
}

/// A quota that a request would exceed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuotaExceeded {
    #[error("the organization's quota of {limit} running sandboxes is reached")]
    Sandboxes { limit: u32 },
    #[error(
        "the organization's quota of {limit} CPUs would be exceeded ({used} in use, {asked} asked)"
    )]
    Cpu { limit: f64, used: f64, asked: f64 },
    #[error(
        "the organization's quota of {limit} MiB of memory would be exceeded ({used} MiB in use, {asked} MiB asked)"
    )]
    Memory { limit: i64, used: i64, asked: i64 },
    #[error("the quota of {limit} keys per user is reached; revoke keys no longer used")]
    Keys { limit: u32 },
    #[error(
        "the organization's quota of {limit} snapshots is reached; remove snapshots no longer used"
    )]
    Snapshots { limit: u32 },
    #[error(
        "the organization's quota of {limit} MiB of snapshots would be exceeded ({used} MiB kept, {asked} MiB more)"
    )]
    SnapshotBytes { limit: i64, used: i64, asked: i64 },
    #[error(
        "the organization's quota of {limit} volumes is reached; remove volumes no longer used"
    )]
    Volumes { limit: u32 },
    #[error(
        "the organization's quota of {limit} MiB of volumes would be exceeded ({used} MiB reserved, {asked} MiB asked)"
    )]
    VolumeSize { limit: i64, used: i64, asked: i64 },
    #[error("the organization runs {limit} template builds, its most at once; wait for one to end")]
    Builds { limit: i64 },
    #[error(
        "the organization has asked for {limit} builds through E2B's API whose steps have not come; start them or wait an hour"
    )]
    WaitingBuilds { limit: i64 },
    #[error(
        "the organization keeps {limit} MiB of build contexts, its most ({used} MiB kept); build from them or wait for them to expire"
    )]
    Contexts { limit: i64, used: i64 },
    #[error(
        "the organization's quota of {limit} MiB of sandboxes paused to disk would be exceeded ({used} MiB on disk, {asked} MiB more); resume or kill some"
    )]
    Hibernated { limit: i64, used: i64, asked: i64 },
}

impl Quotas {
    /// Whether a new sandbox of `cpu` and `memory_mb` fits beside `usage`.
    pub fn admit_sandbox(
        &self,
        usage: Usage,
        cpu: f64,
        memory_mb: i64,
    ) -> Result<(), QuotaExceeded> {
        if usage.sandboxes >= i64::from(self.running_sandboxes) {
            return Err(QuotaExceeded::Sandboxes {
                limit: self.running_sandboxes,
            });
        }
        self.admit_resume(usage, cpu)?;
        if usage.memory_mb.saturating_add(memory_mb) > self.memory_mb {
            return Err(QuotaExceeded::Memory {
                limit: self.memory_mb,
                used: usage.memory_mb,
                asked: memory_mb,
            });
        }
        Ok(())
    }

    /// Whether a paused sandbox of `cpu` may run again beside `usage` (which already
    /// counts it and its memory; a paused sandbox holds no CPU).
    pub fn admit_resume(&self, usage: Usage, cpu: f64) -> Result<(), QuotaExceeded> {
        // Compared in thousandths, so sums of fractions do not trip over rounding.
        let milli = |value: f64| (value * 1000.0).round() as i64;
        if milli(usage.cpu) + milli(cpu) > milli(self.cpu) {
            return Err(QuotaExceeded::Cpu {
                limit: self.cpu,
                used: usage.cpu,
                asked: cpu,
            });
        }
        Ok(())
    }

    /// Whether an organization whose sandboxes paused to disk hold `used` bytes may
    /// save `more` bytes of another's memory.
    pub fn admit_hibernation(&self, used: i64, more: i64) -> Result<(), QuotaExceeded> {
        let mib = |b: i64| (b.max(0) + 1024 * 1024 - 1) / (1024 * 1024);
        if used.max(0).saturating_add(more.max(0)) > self.hibernated_mb.saturating_mul(1024 * 1024)
        {
            return Err(QuotaExceeded::Hibernated {
                limit: self.hibernated_mb,
                used: mib(used),
                asked: mib(more),
            });
        }
        Ok(())
    }

    /// Whether an organization keeping `count` snapshots of `bytes` in all may keep one
    /// more of `more` bytes (`0` when its size is not known yet).
    pub fn admit_snapshot(&self, count: i64, bytes: i64, more: i64) -> Result<(), QuotaExceeded> {
        if count >= i64::from(self.snapshots) {
            return Err(QuotaExceeded::Snapshots {
                limit: self.snapshots,
            });
        }
        let mib = |b: i64| (b.max(0) + 1024 * 1024 - 1) / (1024 * 1024);
        if bytes.saturating_add(more) > self.snapshot_mb.saturating_mul(1024 * 1024) {
            return Err(QuotaExceeded::SnapshotBytes {
                limit: self.snapshot_mb,
                used: mib(bytes),
                asked: mib(more),
            });
        }
        Ok(())
    }

    /// Whether an organization keeping `count` volumes reserving `mb` in all may make one
    /// more reserving `more`.
    pub fn admit_volume(&self, count: i64, mb: i64, more: i64) -> Result<(), QuotaExceeded> {
        if count >= i64::from(self.volumes) {
            return Err(QuotaExceeded::Volumes {
                limit: self.volumes,
            });
        }
        if mb.saturating_add(more) > self.volume_mb {
            return Err(QuotaExceeded::VolumeSize {
                limit: self.volume_mb,
                used: mb,
                asked: more,
            });
        }
        Ok(())
    }

    /// Whether a user holding `keys` usable keys may get one more.
    pub fn admit_key(&self, keys: i64) -> Result<(), QuotaExceeded> {
        if keys >= i64::from(self.keys_per_user) {
            return Err(QuotaExceeded::Keys {
                limit: self.keys_per_user,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas() -> Quotas {
        Quotas {
            running_sandboxes: 2,
            cpu: 1.5,
            memory_mb: 1024,
            keys_per_user: 1,
            snapshots: 2,
            snapshot_mb: 10,
            volumes: 2,
            volume_mb: 100,
            hibernated_mb: 10,
        }
    }

    #[test]
    fn memory_on_disk_fits_until_its_bytes_are_reached() {
        let q = quotas();
        let mib = 1024 * 1024;
        assert_eq!(q.admit_hibernation(4 * mib, 6 * mib), Ok(()));
        assert_eq!(
            q.admit_hibernation(4 * mib, 6 * mib + 1)
                .unwrap_err()
                .to_string(),
            "the organization's quota of 10 MiB of sandboxes paused to disk would be exceeded (4 MiB on disk, 7 MiB more); resume or kill some"
        );
        assert_eq!(
            q.admit_hibernation(-5, -5),
            Ok(()),
            "odd figures count as none"
        );
    }

    #[test]
    fn snapshots_fit_until_their_count_or_bytes_are_reached() {
        let q = quotas();
        let mib = 1024 * 1024;
        assert_eq!(q.admit_snapshot(1, 4 * mib, 6 * mib), Ok(()));
        assert!(matches!(
            q.admit_snapshot(2, 0, 0),
            Err(QuotaExceeded::Snapshots { limit: 2 })
        ));
        let error = q.admit_snapshot(1, 4 * mib, 6 * mib + 1).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the organization's quota of 10 MiB of snapshots would be exceeded (4 MiB kept, 7 MiB more)"
        );
    }

    #[test]
    fn volumes_fit_until_their_count_or_sizes_are_reached() {
        let q = quotas();
        assert_eq!(q.admit_volume(1, 40, 60), Ok(()));
        assert!(matches!(
            q.admit_volume(2, 0, 1),
            Err(QuotaExceeded::Volumes { limit: 2 })
        ));
        assert_eq!(
            q.admit_volume(1, 40, 61).unwrap_err().to_string(),
            "the organization's quota of 100 MiB of volumes would be exceeded (40 MiB reserved, 61 MiB asked)"
        );
    }

    #[test]
    fn sandboxes_fit_until_a_limit_is_reached() {
        let q = quotas();
        let usage = Usage {
            sandboxes: 1,
            cpu: 1.0,
            memory_mb: 512,
        };
        assert_eq!(q.admit_sandbox(usage, 0.5, 512), Ok(()));
        assert!(matches!(
            q.admit_sandbox(usage, 0.6, 512),
            Err(QuotaExceeded::Cpu { .. })
        ));
        assert!(matches!(
            q.admit_sandbox(usage, 0.5, 513),
            Err(QuotaExceeded::Memory { .. })
        ));
        let full = Usage {
            sandboxes: 2,
            ..usage
        };
        let error = q.admit_sandbox(full, 0.1, 64).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the organization's quota of 2 running sandboxes is reached"
        );
        // Three tenths add up to the limit exactly.
        let tenths = Quotas { cpu: 0.3, ..q };
        let used = Usage {
            sandboxes: 0,
            cpu: 0.1 + 0.1,
            memory_mb: 0,
        };
        assert_eq!(tenths.admit_sandbox(used, 0.1, 64), Ok(()));
    }

    #[test]
    fn keys_fit_until_the_limit() {
        assert_eq!(quotas().admit_key(0), Ok(()));
        assert!(quotas().admit_key(1).is_err());
    }
}
