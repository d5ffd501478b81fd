//! The bridge network of `internet` sandboxes, ensured as the reference does, and made
//! one again when concurrent creates made two of the same name (this engine lets them:
//! a container then cannot name its network).

use std::collections::HashMap;

use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::ListNetworksOptionsBuilder;
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
    /// The creates of one process take turns; networks of that name made meanwhile by
    /// another process (a replica, another installation) are reduced to one.
    pub(crate) async fn ensure_bridge(&self, name: &str) -> Result<(), EngineError> {
        let _turn = BRIDGE_TURN.lock().await;
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
            // Ambiguous: two or more of that name.
            Err(e) if status_of(&e) == Some(400) => return self.one_bridge(name).await,
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
            Ok(_) => {}
            Err(e) if status_of(&e) == Some(409) => {}
            Err(e) => return Err(fault(e)),
        }
        self.one_bridge(name).await
    }

    /// Removes every network named `name` but the one with the smallest id (the one
    /// every process racing here keeps); one in use stays, with a warning.
    async fn one_bridge(&self, name: &str) -> Result<(), EngineError> {
        let filters = HashMap::from([("name", vec![name.to_owned()])]);
        let options = ListNetworksOptionsBuilder::default()
            .filters(&filters)
            .build();
        let listed = bounded("list networks", self.docker.list_networks(Some(options)))
            .await?
            .map_err(fault)?;
        let mut ids: Vec<String> = listed
            .into_iter()
            .filter(|n| n.name.as_deref() == Some(name))
            .filter_map(|n| n.id)
            .collect();
        ids.sort();
        for extra in ids.iter().skip(1) {
            match bounded("remove network", self.docker.remove_network(extra)).await? {
                Ok(()) => {}
                Err(e) if status_of(&e) == Some(404) => {}
                Err(e) => {
                    warn!(network = name, id = %extra, error = %sandboxd_core::error::chain(&e), "a second network of this name is in use and stays")
                }
            }
        }
        Ok(())
    }
}

/// One process's creates of bridges take turns.
static BRIDGE_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
