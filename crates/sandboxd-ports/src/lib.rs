//! The values that cross between the service and what it drives (an engine, the agent):
//! defined here, so that neither side depends on the other's crate. The ports
//! themselves (traits for an engine per server, the store, an executor per sandbox)
//! are to join them.
#![forbid(unsafe_code)]

mod events;
mod exec;

pub use events::ContainerDeath;
pub use exec::{ExecOutcome, ExecSpec, OutputStream, OutputTx};
