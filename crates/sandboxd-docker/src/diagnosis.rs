//! What `sandboxd doctor` asks the engine: its version, its init and runtimes, its
//! clock, whether images and the sandbox network are there.
//!
//! Whether an image is present or its registry has it, and the state of the sandbox
//! network.

use std::time::Duration;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, fault, message_of, status_of};

/// How long a registry may take to say whether it has an image.
const REGISTRY_PROBE: Duration = Duration::from_secs(10);

/// The engine's facts doctor reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineFacts {
    /// The engine's own version (`28.2.2`).
    pub version: String,
    /// The newest API version the engine speaks.
    pub api_version: String,
    /// The API version sandboxd speaks to it (negotiated).
    pub negotiated_api_version: String,
    pub operating_system: String,
    /// The engine's init (`docker-init`) and its version; `None` when it has none.
    pub init: Option<String>,
    pub runtimes: Vec<String>,
    pub default_runtime: String,
    /// The engine host's clock, as it reports it (RFC 3339).
    pub system_time: Option<String>,
    /// Where the engine keeps images and containers (on its host).
    pub root_dir: Option<String>,
    /// Whether containers keep running while the engine itself restarts.
    pub live_restore: bool,
}

/// Whether an image can be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageAvailability {
    Present,
    /// Absent, but its registry knows it: the first sandbox pulls it.
    Pullable,
    /// Absent, and the registry did not say it has it (why).
    Missing(String),
}

/// The state of a bridge network sandboxd makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkState {
    /// Not made yet: the first `internet` sandbox makes it.
    Absent,
    /// Made, with traffic between containers off.
    Isolated,
    /// Made, but it lets containers reach each other.
    Open,
}

impl DockerEngine {
    /// The engine's version, init, runtimes and clock.
    pub async fn facts(&self) -> Result<EngineFacts, EngineError> {
        let version = bounded("version", self.docker.version())
            .await?
            .map_err(fault)?;
        let info = bounded("info", self.docker.info()).await?.map_err(fault)?;
        let init = info
            .init_commit
            .and_then(|c| c.id)
            .filter(|id| !id.is_empty() && id != "N/A")
            .map(|id| {
                let binary = info.init_binary.clone().unwrap_or_else(|| "init".into());
                format!("{binary} ({id})")
            });
        let mut runtimes: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
        runtimes.sort();
        Ok(EngineFacts {
            version: version.version.unwrap_or_default(),
            api_version: version.api_version.unwrap_or_default(),
            negotiated_api_version: self.api_version(),
            operating_system: info.operating_system.unwrap_or_default(),
            init,
            runtimes,
            default_runtime: info.default_runtime.unwrap_or_default(),
            system_time: info.system_time,
            root_dir: info.docker_root_dir,
            live_restore: info.live_restore_enabled.unwrap_or(false),
        })
    }

    /// Whether `image` is present, or else whether its registry has it.
    pub async fn image_availability(&self, image: &str) -> Result<ImageAvailability, EngineError> {
        match bounded("inspect image", self.docker.inspect_image(image)).await? {
            Ok(_) => return Ok(ImageAvailability::Present),
            Err(e) if status_of(&e) == Some(404) => {}
            Err(e) if status_of(&e) == Some(400) => {
                return Ok(ImageAvailability::Missing(message_of(&e)));
            }
            Err(e) => return Err(fault(e)),
        }
        let probe = self.docker.inspect_registry_image(image, None);
        Ok(match tokio::time::timeout(REGISTRY_PROBE, probe).await {
            Ok(Ok(_)) => ImageAvailability::Pullable,
            Ok(Err(e)) => ImageAvailability::Missing(message_of(&e)),
            Err(_) => ImageAvailability::Missing(format!(
                "its registry did not answer within {}s",
                REGISTRY_PROBE.as_secs()
            )),
        })
    }

    /// The state of the bridge network `name`.
    pub async fn network_state(&self, name: &str) -> Result<NetworkState, EngineError> {
        match bounded("inspect network", self.docker.inspect_network(name, None)).await? {
            Ok(network) if crate::networks::isolated(&network) => Ok(NetworkState::Isolated),
            Ok(_) => Ok(NetworkState::Open),
            Err(e) if status_of(&e) == Some(404) => Ok(NetworkState::Absent),
            Err(e) => Err(fault(e)),
        }
    }
}
