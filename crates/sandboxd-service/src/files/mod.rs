//! Files of a sandbox: small reads, writes and listings, and streamed transfers (a
//! file or a tar archive each way). A part of the sandbox service, over the sandbox's
//! channel.

mod changes;
mod content;
mod paths;
pub(crate) mod transfers;

use crate::Service;

/// The `sandbox.writeFile`, `readFile`, `listFiles`, `upload` and `download` operations.
#[derive(Debug, Clone)]
pub struct Files {
    service: Service,
}

impl Files {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }
}
