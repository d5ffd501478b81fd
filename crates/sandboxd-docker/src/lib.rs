//! The Docker engine adapter of sandboxd: turns core plans into engine calls through
//! bollard. One module per engine resource; every call has a timeout.
#![forbid(unsafe_code)]

mod archive;
mod containers;
mod engine;
mod error;
mod events;
mod exec;
mod images;
mod networks;

pub use archive::ReadFileError;
pub use engine::Engine;
pub use error::EngineError;
pub use events::ContainerDeath;
pub use exec::{ExecOutcome, ExecSpec, OutputStream, OutputTx};
