//! Files of a sandbox: small reads, writes and listings, and streamed transfers (a
//! file or a tar archive each way). A part of the sandbox service, over the sandbox's
//! channel.

mod changes;
mod content;
mod paths;
pub(crate) mod transfers;

use sandboxd_core::activity::{ActivityEntry, FileActivity, MAX_LINE_CHARS, MAX_TEXT_CHARS, shown};
use sandboxd_core::model::{Principal, Sandbox};

use crate::activity::by;
use crate::{Service, ServiceError};

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

impl Files {
    /// Notes what a file operation did on the sandbox's timeline: its path (and where
    /// it went), masked and cut, and its `outcome` (see [`outcome`]).
    pub(crate) async fn note(
        &self,
        caller: &Principal,
        sandbox: &Sandbox,
        action: &str,
        (path, to): (&str, Option<&str>),
        outcome: Result<Option<u64>, String>,
    ) {
        let Some(masker) = self.service.activity().masker(sandbox, &[]).await else {
            return;
        };
        let (bytes, error) = match outcome {
            Ok(bytes) => (bytes, None),
            Err(error) => (None, Some(shown(&masker.mask(&error), MAX_LINE_CHARS))),
        };
        let file = FileActivity {
            path: shown(&masker.mask(path), MAX_TEXT_CHARS),
            to: to.map(|to| shown(&masker.mask(to), MAX_TEXT_CHARS)),
            bytes,
            error,
        };
        self.service
            .timeline()
            .note(sandbox, ActivityEntry::file(action, by(caller), file));
    }
}

/// What a file operation's entry keeps of its result: the bytes it moved (as `bytes`
/// reads them), or why it failed.
pub(crate) fn outcome<T>(
    done: &Result<T, ServiceError>,
    bytes: impl FnOnce(&T) -> Option<u64>,
) -> Result<Option<u64>, String> {
    match done {
        Ok(value) => Ok(bytes(value)),
        Err(error) => Err(error.to_string()),
    }
}
