//! The values that cross between the service and what it drives (an engine, the agent):
//! what a command is and did, what an engine reports, and why an engine operation
//! failed. Defined here, so that neither side depends on the other's crate. The ports
//! themselves (traits for an engine per server, the store, an executor per sandbox)
//! are to join them.
#![forbid(unsafe_code)]

mod errors;
mod events;
mod exec;

pub use errors::{EngineError, ReadFileError};
pub use events::ContainerDeath;
pub use exec::{ExecOutcome, ExecSpec, OutputStream, OutputTx};
