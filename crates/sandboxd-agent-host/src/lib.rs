//! The host side of the in-sandbox agent: per-sandbox sockets sandboxd listens on, the
//! connection the agent makes to one, and the operations run over it. Everything the
//! agent sends is untrusted: frames are bounded, messages parsed strictly, waits timed.
//!
//! It speaks the exec values of `sandboxd-contracts` (one `ExecSpec` for both adapters),
//! not the engine adapter's, and is the agent adapter of the sandbox channel contract
//! (`channel.rs`).
#![forbid(unsafe_code)]

mod channel;
mod conn;
mod contract;
mod handover;
mod hub;
mod ops;
mod port;
mod routes;
mod static_elf;
mod transfer;

pub use conn::{AgentConn, AgentError, ByteStream};
pub use handover::{AGENT_KEY_FILE, KeyHandover};
pub use hub::{AgentHub, RekeyError};
pub use ops::{FileOpError, Following, PtySession};
pub use port::{PortError, PortStream};
pub use static_elf::is_static_elf;
pub use transfer::{AgentDownload, TransferError, Upload, UploadShape};
