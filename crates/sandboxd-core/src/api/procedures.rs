//! The one list of the API's procedures: how each is called, where it names its
//! sandbox, whether a replica passes it to the replica holding that sandbox's agent, and
//! its MCP tool (or why it has none). The REST routes and the OpenAPI document are
//! checked against it, replica forwarding and MCP read it, clients call by it.

/// The HTTP method of a procedure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Arguments in the query string.
    Get,
    /// Arguments in a JSON body (or, for an upload, the query string and a raw body).
    Post,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
        }
    }
}

/// Where a request names the sandbox it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// No single sandbox (a listing, an administrative call).
    Nothing,
    /// `?sandboxId=`; the body, when there is one, is a stream.
    InQuery,
    /// `"sandboxId"` in the JSON body.
    InBody,
}

/// The MCP tool of a procedure, or why it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Named(&'static str),
    Without(&'static str),
}

/// One procedure of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Procedure {
    /// `sandbox.exec`: the REST path is `/api/<name>`, except for the probes.
    pub name: &'static str,
    pub path: &'static str,
    pub method: Method,
    pub names: Names,
    /// Served by the replica that holds the sandbox's agent: a replica that does not
    /// passes the request on (REST and MCP alike).
    pub forwarded: bool,
    pub tool: Tool,
}

const ADMINISTRATION: &str = "administration: kept out of an agent's tools, so an agent's key never manages keys, members, \
     organizations or servers through them";
const BINARY_STREAM: &str = "a raw byte stream, which MCP does not carry: sandbox-writeFile and sandbox-readFile move files \
     (base64 for binary), and long content is read page by page";
const BROWSER_TOKEN: &str = "a single-use token for a browser's WebSocket: MCP clients authenticate every call with their key";
const EGRESS_DECISION: &str = "a person's decision: an agent asks with sandbox-requestEgress and is never the one to approve \
     (a request is decided with another key than the one that asked)";
const PROBE: &str = "a probe for load balancers and operators, not a tool";

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

use Method::{Get, Post};
use Names::{InBody, InQuery, Nothing};
use Tool::{Named, Without};

/// Every procedure of the REST API.
#[rustfmt::skip]
pub const PROCEDURES: &[Procedure] = &[
    // Sandboxes.
    procedure("sandbox.create", "/api/sandbox.create", Post, Nothing, false, Named("sandbox-create")),
    procedure("sandbox.exec", "/api/sandbox.exec", Post, InBody, true, Named("sandbox-exec")),
    procedure("sandbox.writeFile", "/api/sandbox.writeFile", Post, InBody, true, Named("sandbox-writeFile")),
    procedure("sandbox.readFile", "/api/sandbox.readFile", Get, InQuery, true, Named("sandbox-readFile")),
    procedure("sandbox.listFiles", "/api/sandbox.listFiles", Get, InQuery, true, Named("sandbox-listFiles")),
    procedure("sandbox.upload", "/api/sandbox.upload", Post, InQuery, true, Without(BINARY_STREAM)),
    procedure("sandbox.download", "/api/sandbox.download", Get, InQuery, true, Without(BINARY_STREAM)),
    procedure("sandbox.setTimeout", "/api/sandbox.setTimeout", Post, InBody, false, Named("sandbox-setTimeout")),
    procedure("sandbox.setEgress", "/api/sandbox.setEgress", Post, InBody, false, Named("sandbox-setEgress")),
    procedure("sandbox.egressLog", "/api/sandbox.egressLog", Get, InQuery, false, Named("sandbox-egressLog")),
    procedure("sandbox.requestEgress", "/api/sandbox.requestEgress", Post, InBody, false, Named("sandbox-requestEgress")),
    procedure("egress.requests", "/api/egress.requests", Get, Nothing, false, Named("egress-requests")),
    procedure("egress.decide", "/api/egress.decide", Post, Nothing, false, Without(EGRESS_DECISION)),
    procedure("sandbox.list", "/api/sandbox.list", Get, Nothing, false, Named("sandbox-list")),
    procedure("sandbox.one", "/api/sandbox.one", Get, InQuery, false, Named("sandbox-one")),
    procedure("sandbox.stats", "/api/sandbox.stats", Get, InQuery, false, Named("sandbox-stats")),
    procedure("sandbox.pause", "/api/sandbox.pause", Post, InBody, false, Named("sandbox-pause")),
    procedure("sandbox.resume", "/api/sandbox.resume", Post, InBody, false, Named("sandbox-resume")),
    procedure("sandbox.changes", "/api/sandbox.changes", Get, InQuery, false, Named("sandbox-changes")),
    procedure("sandbox.snapshot", "/api/sandbox.snapshot", Post, InBody, false, Named("sandbox-snapshot")),
    procedure("sandbox.fork", "/api/sandbox.fork", Post, InBody, false, Named("sandbox-fork")),
    procedure("sandbox.kill", "/api/sandbox.kill", Post, InBody, false, Named("sandbox-kill")),
    procedure("sandbox.remove", "/api/sandbox.remove", Post, InBody, false, Named("sandbox-remove")),
    procedure("sandbox.templates", "/api/sandbox.templates", Get, Nothing, false, Named("sandbox-templates")),
    procedure("sandbox.execToken", "/api/sandbox.execToken", Post, InBody, false, Without(BROWSER_TOKEN)),
    // Snapshots.
    procedure("snapshot.all", "/api/snapshot.all", Get, Nothing, false, Named("snapshot-all")),
    procedure("snapshot.one", "/api/snapshot.one", Get, Nothing, false, Named("snapshot-one")),
    procedure("snapshot.remove", "/api/snapshot.remove", Post, Nothing, false, Named("snapshot-remove")),
    // Volumes.
    procedure("volume.create", "/api/volume.create", Post, Nothing, false, Named("volume-create")),
    procedure("volume.all", "/api/volume.all", Get, Nothing, false, Named("volume-all")),
    procedure("volume.one", "/api/volume.one", Get, Nothing, false, Named("volume-one")),
    procedure("volume.remove", "/api/volume.remove", Post, Nothing, false, Named("volume-remove")),
    // Ports exposed as preview URLs.
    procedure("sandbox.exposePort", "/api/sandbox.exposePort", Post, InBody, false, Named("sandbox-exposePort")),
    procedure("sandbox.ports", "/api/sandbox.ports", Get, InQuery, false, Named("sandbox-ports")),
    procedure("sandbox.unexposePort", "/api/sandbox.unexposePort", Post, InBody, false, Named("sandbox-unexposePort")),
    // Background processes and interpreter contexts (the agent's).
    procedure("sandbox.processStart", "/api/sandbox.processStart", Post, InBody, true, Named("sandbox-processStart")),
    procedure("sandbox.processList", "/api/sandbox.processList", Get, InQuery, true, Named("sandbox-processList")),
    procedure("sandbox.processWait", "/api/sandbox.processWait", Post, InBody, true, Named("sandbox-processWait")),
    procedure("sandbox.processSignal", "/api/sandbox.processSignal", Post, InBody, true, Named("sandbox-processSignal")),
    procedure("sandbox.processWrite", "/api/sandbox.processWrite", Post, InBody, true, Named("sandbox-processWrite")),
    procedure("sandbox.processOutput", "/api/sandbox.processOutput", Get, InQuery, true, Named("sandbox-processOutput")),
    procedure("sandbox.contextCreate", "/api/sandbox.contextCreate", Post, InBody, true, Named("sandbox-contextCreate")),
    procedure("sandbox.contextRun", "/api/sandbox.contextRun", Post, InBody, true, Named("sandbox-contextRun")),
    procedure("sandbox.contextRemove", "/api/sandbox.contextRemove", Post, InBody, true, Named("sandbox-contextRemove")),
    // Projects and environments.
    procedure("project.all", "/api/project.all", Get, Nothing, false, Named("project-all")),
    procedure("project.create", "/api/project.create", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("environment.create", "/api/environment.create", Post, Nothing, false, Without(ADMINISTRATION)),
    // Organizations, members, keys, audit.
    procedure("organization.all", "/api/organization.all", Get, Nothing, false, Without(ADMINISTRATION)),
    procedure("organization.create", "/api/organization.create", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("member.all", "/api/member.all", Get, Nothing, false, Without(ADMINISTRATION)),
    procedure("member.create", "/api/member.create", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("member.update", "/api/member.update", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("member.remove", "/api/member.remove", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("apiKey.all", "/api/apiKey.all", Get, Nothing, false, Without(ADMINISTRATION)),
    procedure("apiKey.create", "/api/apiKey.create", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("apiKey.current", "/api/apiKey.current", Get, Nothing, false, Without(ADMINISTRATION)),
    procedure("apiKey.revoke", "/api/apiKey.revoke", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("audit.list", "/api/audit.list", Get, Nothing, false, Without(ADMINISTRATION)),
    // Remote servers.
    procedure("server.all", "/api/server.all", Get, Nothing, false, Without(ADMINISTRATION)),
    procedure("server.one", "/api/server.one", Get, Nothing, false, Without(ADMINISTRATION)),
    procedure("server.create", "/api/server.create", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("server.update", "/api/server.update", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("server.remove", "/api/server.remove", Post, Nothing, false, Without(ADMINISTRATION)),
    procedure("server.test", "/api/server.test", Post, Nothing, false, Without(ADMINISTRATION)),
    // Probes.
    procedure("health", "/health", Get, Nothing, false, Without(PROBE)),
    procedure("ready", "/ready", Get, Nothing, false, Without(PROBE)),
];

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
                    reason == BINARY_STREAM || reason == BROWSER_TOKEN,
                    "{} has no tool: {reason}",
                    p.name
                );
            }
        }
    }
}
