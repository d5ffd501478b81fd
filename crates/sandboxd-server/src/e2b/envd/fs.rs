//! The calls of one caller on one sandbox's paths, shared by the filesystem calls and
//! the watchers: a path's entry as E2B's daemon describes it (a link as what it leads
//! to), the service's file operations.

use sandboxd_contracts::{PathEntry, PathKind};
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::filesystem::{self as wire, EntryInfo, Found, Kind};

use super::Envd;
use super::rpc::RpcError;
use crate::AppState;
use crate::service::ServiceError;
use crate::time::rfc3339;

/// The calls of one caller on one sandbox.
pub(super) struct Fs<'a> {
    pub state: &'a AppState,
    pub who: &'a Envd,
}

fn kind_of(kind: PathKind) -> Kind {
    match kind {
        PathKind::File => Kind::File,
        PathKind::Directory => Kind::Directory,
        PathKind::Symlink => Kind::Symlink,
        PathKind::Other => Kind::Other,
    }
}

fn found(entry: PathEntry) -> Found {
    Found {
        kind: kind_of(entry.kind),
        size: entry.size,
        mode: entry.mode,
        modified_ms: entry.modified_ms,
        owner: entry.owner.unwrap_or_else(|| entry.uid.to_string()),
        group: entry.group.unwrap_or_else(|| entry.gid.to_string()),
        link_target: entry.link_target,
        metadata: entry.metadata,
    }
}

pub(super) fn not_found(path: &str) -> RpcError {
    RpcError::new(Code::NotFound, format!("path '{path}' does not exist"))
}

impl Fs<'_> {
    pub fn files(&self) -> sandboxd_service::Files {
        self.state.service.files()
    }

    pub async fn stat(&self, path: &str) -> Result<PathEntry, RpcError> {
        match self
            .files()
            .stat(&self.who.caller, &self.who.sandbox_id, path)
            .await
        {
            Err(ServiceError::NotFound("path")) => Err(not_found(path)),
            other => Ok(other?),
        }
    }

    /// What the daemon says of a path: a link as what it leads to (its type, size and
    /// mode), with where it leads.
    pub async fn described(&self, path: &str, entry: PathEntry) -> Result<EntryInfo, RpcError> {
        let mut seen = found(entry);
        if seen.kind == Kind::Symlink
            && let Some(target) = seen.link_target.clone()
            && target.starts_with('/')
            && let Ok(leads_to) = self.stat(&target).await
        {
            let leads_to = found(leads_to);
            seen.kind = leads_to.kind;
            seen.size = leads_to.size;
            seen.mode = leads_to.mode;
        }
        Ok(wire::entry_info(path, seen, rfc3339))
    }

    pub async fn entry(&self, path: &str) -> Result<EntryInfo, RpcError> {
        let entry = self.stat(path).await?;
        self.described(path, entry).await
    }
}
