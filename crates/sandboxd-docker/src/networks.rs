//! The bridge network of `internet` sandboxes, ensured as the reference does.

use std::collections::HashMap;

use bollard::models::NetworkCreateRequest;
use sandboxd_core::plan::{ICC_OPTION, LABEL_SANDBOX};
use tracing::warn;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, fault, status_of};

/// Whether a network keeps its containers from reaching each other.
pub(crate) fn isolated(network: &bollard::models::NetworkInspect) -> bool {
    network
        .options
        .as_ref()
        .and_then(|o| o.get(ICC_OPTION))
        .is_some_and(|v| v == "false")
}

impl DockerEngine {
    /// Makes sure the bridge `name` exists with inter-container traffic disabled: a
    /// correct network is reused, an unused one that allows such traffic is recreated,
    /// one in use is kept with a warning, and a concurrent create (409) is tolerated.
    pub(crate) async fn ensure_bridge(&self, name: &str) -> Result<(), EngineError> {
        match bounded("inspect network", self.docker.inspect_network(name, None)).await? {
            Ok(existing) => {
                if isolated(&existing) {
                    return Ok(());
                }
                if existing.containers.as_ref().is_some_and(|c| !c.is_empty()) {
                    warn!(
                        network = name,
                        "network allows inter-container traffic but is in use; it is recreated once unused"
                    );
                    return Ok(());
                }
                bounded("remove network", self.docker.remove_network(name))
                    .await?
                    .or_else(|e| {
                        if status_of(&e) == Some(404) {
                            Ok(())
                        } else {
                            Err(fault(e))
                        }
                    })?;
            }
            Err(e) if status_of(&e) == Some(404) => {}
            Err(e) => return Err(fault(e)),
        }
        let request = NetworkCreateRequest {
            name: name.to_owned(),
            driver: Some("bridge".into()),
            internal: Some(false),
            options: Some(HashMap::from([(ICC_OPTION.to_owned(), "false".to_owned())])),
            labels: Some(HashMap::from([(
                LABEL_SANDBOX.to_owned(),
                "true".to_owned(),
            )])),
            ..Default::default()
        };
        match bounded("create network", self.docker.create_network(request)).await? {
            Ok(_) => Ok(()),
            Err(e) if status_of(&e) == Some(409) => Ok(()),
            Err(e) => Err(fault(e)),
        }
    }
}
