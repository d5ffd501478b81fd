//! The engine's event stream, narrowed to what sandboxd acts on: a sandbox container of
//! this installation whose main process ended.
//!
//! The server's `loops.rs` follows it, and the service revives the container.

use std::collections::HashMap;

use bollard::query_parameters::{EventsOptionsBuilder, InspectContainerOptions};
use futures_util::{Stream, StreamExt as _};
use sandboxd_core::plan::{LABEL_INSTANCE, LABEL_SANDBOX_ID};

pub use sandboxd_contracts::ContainerDeath;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, fault, status_of};

impl DockerEngine {
    /// Every `die` of a container labelled with `instance`, as the engine reports it,
    /// from now on. The stream ends when the engine connection does; the caller
    /// subscribes again (events missed meanwhile are reconcile's).
    pub(crate) fn container_deaths(
        &self,
        instance: &str,
    ) -> impl Stream<Item = Result<ContainerDeath, EngineError>> + Send + 'static {
        let label = format!("{LABEL_INSTANCE}={instance}");
        let filters = HashMap::from([
            ("type", vec!["container"]),
            ("event", vec!["die"]),
            ("label", vec![label.as_str()]),
        ]);
        let options = EventsOptionsBuilder::default().filters(&filters).build();
        self.docker.events(Some(options)).filter_map(|event| async {
            let event = match event {
                Ok(event) => event,
                Err(error) => return Some(Err(fault(error))),
            };
            let actor = event.actor?;
            let sandbox_id = actor.attributes?.remove(LABEL_SANDBOX_ID)?;
            Some(Ok(ContainerDeath {
                container_id: actor.id?,
                sandbox_id,
            }))
        })
    }

    /// Whether the container's main process runs; a container that is gone is not.
    pub(crate) async fn is_running(&self, id: &str) -> Result<bool, EngineError> {
        match bounded(
            "inspect container",
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>),
        )
        .await?
        {
            Ok(inspect) => Ok(inspect.state.and_then(|s| s.running).unwrap_or(false)),
            Err(e) if status_of(&e) == Some(404) => Ok(false),
            Err(e) => Err(fault(e)),
        }
    }
}
