//! Replicas and duties: what sandboxd does by itself, one pass at a time (the server's
//! loops schedule them). Each pass depends on the sandbox operations (a kill, a revival,
//! the agents' sockets) and on nothing a request brings.
//!
//! `Duties`: the passes (`passes.rs`), the lease renewal (`leases.rs`) and the readings
//! of use kept for `sandbox.metrics` (`usage.rs`). The server's
//! `loops.rs` schedules them.

pub(crate) mod leases;
mod passes;
mod usage;

pub use leases::DEFAULT_LEASE_GRACE;
pub use passes::{ReapReport, ReconcileReport};

use crate::Service;

/// The reaper, reconcile, the agents' bookkeeping and the leases of the dead-man's
/// switch.
#[derive(Debug, Clone)]
pub struct Duties {
    service: Service,
}

impl Duties {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }
}
