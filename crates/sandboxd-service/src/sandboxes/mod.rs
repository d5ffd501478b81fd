//! The life of a sandbox: create (cold, or claimed from a warm pool), list, extend,
//! pause and resume, kill, remove, read its usage, and start its container again when
//! it died. A part of
//! the sandbox service.

mod create;
mod fork;
mod hibernate;
mod inside;
mod lifecycle;
mod memory;
pub(crate) mod pause;
pub(crate) mod prepared;
pub(crate) mod revive;
mod snapshot;
pub(crate) mod usage;

pub(crate) use create::created_metadata;
pub use revive::Revival;

use crate::Service;

/// The `sandbox.create`, `list`, `setTimeout`, `kill`, `remove`, `pause`, `resume` and
/// `stats` operations, and the revival of a dead container.
#[derive(Debug, Clone)]
pub struct Sandboxes {
    service: Service,
}

impl Sandboxes {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }
}
