//! The sandbox service: each operation checks its input, the caller's access and the
//! sandbox's state, then drives the store and the engine. One file per operation group.

mod create;
mod error;
mod exec;
mod files;
mod lifecycle;
mod loops;
mod tenancy;

use std::sync::Arc;

use sandboxd_core::model::{Principal, Sandbox};
use sandboxd_core::templates::Templates;
use sandboxd_docker::Engine;
use sandboxd_store::Store;

pub use error::ServiceError;
pub use loops::{ReapReport, ReconcileReport};

/// Everything the operations need, shared by every request.
#[derive(Debug, Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    engine: Engine,
    templates: Templates,
    instance_id: String,
}

impl Service {
    pub fn new(store: Store, engine: Engine, templates: Templates, instance_id: String) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                engine,
                templates,
                instance_id,
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    /// The id containers of this installation are labelled with.
    pub fn instance_id(&self) -> &str {
        &self.inner.instance_id
    }

    /// A sandbox the caller may see. Another organization's sandbox is reported exactly
    /// like a missing one, so ids cannot be probed.
    pub async fn sandbox_for(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Sandbox, ServiceError> {
        let id = sandboxd_core::validate::sandbox_id(sandbox_id)?;
        match self.store().sandbox(&id).await? {
            Some(sandbox) if sandbox.organization_id == caller.organization_id => Ok(sandbox),
            _ => Err(ServiceError::NotFound("sandbox")),
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}
