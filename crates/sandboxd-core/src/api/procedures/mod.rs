//! The one list of the API's procedures: how each is called, where it names its
//! sandbox, whether a replica passes it to the replica holding that sandbox's agent, and
//! its MCP tool (or why it has none). The REST routes and the OpenAPI document are
//! checked against it, replica forwarding and MCP read it, clients call by it.
//!
//! `PROCEDURES` holds every row: each definition's, and six written out here, the
//! procedures whose handler is written by hand (`HANDWRITTEN`, with the reason for each).
//! `each_defined!` lists the defined ones; `<group>.rs` holds the definitions by
//! resource.

mod access;
mod changes;
mod contexts;
mod egress;
mod ports;
mod processes;
mod projects;
mod sandboxes;
mod servers;
mod snapshots;
mod templates;
mod volumes;
pub use super::definition::NoArguments;
pub use access::*;
pub use changes::*;
pub use contexts::*;
pub use egress::*;
pub use ports::*;
pub use processes::*;
pub use projects::*;
pub use sandboxes::*;
pub use servers::*;
pub use snapshots::*;
pub use templates::*;
pub use volumes::*;

pub use super::row::{Method, Names, Procedure, Tool};

pub const ADMINISTRATION: &str = "administration: kept out of an agent's tools, so an agent's key never manages keys, members, \
     organizations or servers through them";
pub const BINARY_STREAM: &str = "a raw byte stream, which MCP does not carry: sandbox-writeFile and sandbox-readFile move files \
     (base64 for binary), and long content is read page by page";
pub const CONTEXT_STREAM: &str = "a raw byte stream, which MCP does not carry: template-build takes a build's files \
     (up to 64 MiB) in `files`";
pub const BROWSER_TOKEN: &str = "a single-use token for a browser's WebSocket: MCP clients authenticate every call with their key";
pub const EGRESS_DECISION: &str = "a person's decision: an agent asks with sandbox-requestEgress and is never the one to approve \
     (a request is decided with another key than the one that asked)";
pub const LIVE_STREAM: &str =
    "a live stream, which an MCP call's one answer is not: template-buildLog pages the same lines";
pub const REPLAY: &str = "a replay for people (up to megabytes of a terminal's output with its timing): the dashboard plays it \
     and `sandboxd recording` writes it to a file; an agent reads what it ran with sandbox-activity";
pub const PROBE: &str = "a probe for load balancers and operators, not a tool";

/// The procedures whose REST handler is written by hand (in the server's `routes/`), and
/// why: each is a row of the table with no definition.
pub const HANDWRITTEN: &[(Procedure, &str)] = &[
    (
        READ_FILE,
        "its answer is encoded by hand, the content written once (a 10 MiB file is not copied into a JSON string)",
    ),
    (UPLOAD, "a raw byte stream in, of any length"),
    (DOWNLOAD, "a raw byte stream out, of any length"),
    (CONTEXT, "a tar stream in, of up to a GiB, read as it comes"),
    (
        BUILD_LOG_STREAM,
        "server-sent events, which the procedure table's JSON answers are not",
    ),
    (HEALTH, "a probe: no key, and it cannot fail"),
    (READY, "a probe: no key, and 503 with what is not ready"),
];

#[rustfmt::skip]
const READ_FILE: Procedure = procedure("sandbox.readFile", "/api/sandbox.readFile", Get, InQuery, true, Named("sandbox-readFile"));
#[rustfmt::skip]
const UPLOAD: Procedure = procedure("sandbox.upload", "/api/sandbox.upload", Post, InQuery, true, Without(BINARY_STREAM));
#[rustfmt::skip]
const DOWNLOAD: Procedure = procedure("sandbox.download", "/api/sandbox.download", Get, InQuery, true, Without(BINARY_STREAM));
#[rustfmt::skip]
const CONTEXT: Procedure = procedure("template.context", "/api/template.context", Post, Nothing, false, Without(CONTEXT_STREAM));
#[rustfmt::skip]
const BUILD_LOG_STREAM: Procedure = procedure("template.buildLogStream", "/api/template.buildLogStream", Get, Nothing, false, Without(LIVE_STREAM));
const HEALTH: Procedure = procedure("health", "/health", Get, Nothing, false, Without(PROBE));
const READY: Procedure = procedure("ready", "/ready", Get, Nothing, false, Without(PROBE));

const fn procedure(
    name: &'static str,
    path: &'static str,
    method: Method,
    names: Names,
    forwarded: bool,
    tool: Tool,
) -> Procedure {
    Procedure {
        name,
        path,
        method,
        names,
        forwarded,
        tool,
    }
}

use super::definition::Definition;
use Method::{Get, Post};
use Names::{InQuery, Nothing};
use Tool::{Named, Without};

/// Calls `$visit!` with the type of every procedure defined (`define!`): the one list a
/// new procedure's definition is added to. The server routes and serves each, the table
/// below holds each one's row.
#[macro_export]
macro_rules! each_defined {
    ($visit:ident) => {
        $visit!(
            // Sandboxes.
            $crate::api::procedures::SandboxCreate,
            $crate::api::procedures::SandboxRename,
            $crate::api::procedures::SandboxExec,
            $crate::api::procedures::SandboxWriteFile,
            $crate::api::procedures::SandboxListFiles,
            $crate::api::procedures::SandboxSetTimeout,
            $crate::api::procedures::SandboxSetEgress,
            $crate::api::procedures::SandboxEgressLog,
            $crate::api::procedures::SandboxRequestEgress,
            $crate::api::procedures::EgressRequests,
            $crate::api::procedures::EgressDecide,
            $crate::api::procedures::SandboxList,
            $crate::api::procedures::SandboxOne,
            $crate::api::procedures::SandboxStats,
            $crate::api::procedures::SandboxMetrics,
            $crate::api::procedures::SandboxActivity,
            $crate::api::procedures::SandboxRecording,
            $crate::api::procedures::SandboxPause,
            $crate::api::procedures::SandboxResume,
            $crate::api::procedures::SandboxChanges,
            $crate::api::procedures::SandboxSnapshot,
            $crate::api::procedures::SandboxFork,
            $crate::api::procedures::SandboxKill,
            $crate::api::procedures::SandboxRemove,
            $crate::api::procedures::SandboxTemplates,
            $crate::api::procedures::SandboxExecToken,
            // Snapshots.
            $crate::api::procedures::SnapshotAll,
            $crate::api::procedures::SnapshotOne,
            $crate::api::procedures::SnapshotRemove,
            // Templates users build.
            $crate::api::procedures::TemplateBuild,
            $crate::api::procedures::TemplateBuildLog,
            $crate::api::procedures::TemplateAll,
            $crate::api::procedures::TemplateOne,
            $crate::api::procedures::TemplateRemove,
            // Volumes.
            $crate::api::procedures::VolumeCreate,
            $crate::api::procedures::VolumeAll,
            $crate::api::procedures::VolumeOne,
            $crate::api::procedures::VolumeRemove,
            // Ports exposed as preview URLs.
            $crate::api::procedures::SandboxExposePort,
            $crate::api::procedures::SandboxPorts,
            $crate::api::procedures::SandboxUnexposePort,
            // Background processes and interpreter contexts (the agent's).
            $crate::api::procedures::SandboxProcessStart,
            $crate::api::procedures::SandboxProcessList,
            $crate::api::procedures::SandboxProcessWait,
            $crate::api::procedures::SandboxProcessSignal,
            $crate::api::procedures::SandboxProcessWrite,
            $crate::api::procedures::SandboxProcessOutput,
            $crate::api::procedures::SandboxContextCreate,
            $crate::api::procedures::SandboxContextRun,
            $crate::api::procedures::SandboxContextRemove,
            // Projects and environments.
            $crate::api::procedures::ProjectAll,
            $crate::api::procedures::ProjectCreate,
            $crate::api::procedures::EnvironmentCreate,
            // Organizations, members, keys, audit.
            $crate::api::procedures::OrganizationAll,
            $crate::api::procedures::OrganizationCreate,
            $crate::api::procedures::MemberAll,
            $crate::api::procedures::MemberCreate,
            $crate::api::procedures::MemberUpdate,
            $crate::api::procedures::MemberRemove,
            $crate::api::procedures::ApiKeyAll,
            $crate::api::procedures::ApiKeyCreate,
            $crate::api::procedures::ApiKeyCurrent,
            $crate::api::procedures::ApiKeyRevoke,
            $crate::api::procedures::AuditList,
            // Remote servers.
            $crate::api::procedures::ServerAll,
            $crate::api::procedures::ServerOne,
            $crate::api::procedures::ServerCreate,
            $crate::api::procedures::ServerUpdate,
            $crate::api::procedures::ServerRemove,
            $crate::api::procedures::ServerTest,
        )
    };
}

/// Every procedure of the REST API: the defined ones and the handwritten ones.
pub const PROCEDURES: &[Procedure] = {
    macro_rules! rows {
        ($($procedure:ty),* $(,)?) => {
            &[
                $(<$procedure as Definition>::PROCEDURE,)*
                READ_FILE,
                UPLOAD,
                DOWNLOAD,
                CONTEXT,
                BUILD_LOG_STREAM,
                HEALTH,
                READY,
            ]
        };
    }
    crate::each_defined!(rows)
};

/// The procedure served at `path`.
pub fn at_path(path: &str) -> Option<&'static Procedure> {
    PROCEDURES.iter().find(|p| p.path == path)
}

/// The procedure called `name`.
pub fn named(name: &str) -> Option<&'static Procedure> {
    PROCEDURES.iter().find(|p| p.name == name)
}

/// The procedure whose MCP tool is `tool`.
pub fn of_tool(tool: &str) -> Option<&'static Procedure> {
    PROCEDURES
        .iter()
        .find(|p| matches!(p.tool, Tool::Named(name) if name == tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_tools_are_unique_and_agree() {
        let mut seen = std::collections::BTreeSet::new();
        for p in PROCEDURES {
            assert!(seen.insert(p.name), "{} twice", p.name);
            assert!(seen.insert(p.path), "{} twice", p.path);
            if p.path.starts_with("/api/") {
                assert_eq!(p.path, format!("/api/{}", p.name));
            }
            if let Tool::Named(tool) = p.tool {
                assert!(seen.insert(tool), "{tool} twice");
                assert_eq!(
                    tool,
                    p.name.replacen('.', "-", 1),
                    "tools are named as the reference"
                );
            }
            // A forwarded request must say which sandbox it is for.
            assert!(!p.forwarded || p.names != Names::Nothing, "{}", p.name);
        }
        assert_eq!(
            at_path("/api/sandbox.exec").map(|p| p.name),
            Some("sandbox.exec")
        );
        assert_eq!(named("sandbox.kill").map(|p| p.forwarded), Some(false));
        assert_eq!(
            of_tool("sandbox-contextRemove").map(|p| p.name),
            Some("sandbox.contextRemove")
        );
        assert_eq!(at_path("/api/sandbox.nothing"), None);
    }

    #[test]
    fn every_sandbox_procedure_an_agent_uses_has_a_tool() {
        for p in PROCEDURES.iter().filter(|p| p.name.starts_with("sandbox.")) {
            if let Tool::Without(reason) = p.tool {
                assert!(
                    reason == BINARY_STREAM || reason == BROWSER_TOKEN || reason == REPLAY,
                    "{} has no tool: {reason}",
                    p.name
                );
            }
        }
    }
}
