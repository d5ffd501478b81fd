//! One procedure's row of the table: how it is called, where it names its sandbox,
//! whether replicas forward it, its MCP tool or why it has none.

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
