//! What an engine reports of its containers on its own.

/// A container that stopped: its main process ended, whatever ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerDeath {
    pub container_id: String,
    pub sandbox_id: String,
}
