//! `server.*`: the remote servers sandboxes run on.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// The servers the caller may use, with their capacity and health.
    ServerAll {
        name: "server.all", method: Get, names: Nothing, forwarded: false,
        tag: "remote-server", errors: [401],
        no_tool(super::ADMINISTRATION),
        request: none,
        response: list(ServerView),
    }

    /// One server.
    ServerOne {
        name: "server.one", method: Get, names: Nothing, forwarded: false,
        tag: "remote-server", errors: [400, 401, 403, 404],
        no_tool(super::ADMINISTRATION),
        request: query(ServerIdBody),
        response: one(ServerView),
    }

    /// Add a remote server (administrators). Give its host key, or let `server.test` learn
    /// and pin it; nothing connects to it before.
    ServerCreate {
        name: "server.create", method: Post, names: Nothing, forwarded: false,
        tag: "remote-server", errors: [400, 401, 403, 409],
        no_tool(super::ADMINISTRATION),
        request: body(CreateServerRequest),
        response: one(ServerView),
    }

    /// Change a server (administrators); its connection is made again at its next use.
    ServerUpdate {
        name: "server.update", method: Post, names: Nothing, forwarded: false,
        tag: "remote-server", errors: [400, 401, 403, 404, 409],
        no_tool(super::ADMINISTRATION),
        request: body(UpdateServerRequest),
        response: one(ServerView),
    }

    /// Remove a server (administrators); refused while sandboxes run on it.
    ServerRemove {
        name: "server.remove", method: Post, names: Nothing, forwarded: false,
        tag: "remote-server", errors: [400, 401, 403, 404, 409],
        no_tool(super::ADMINISTRATION),
        request: body(ServerIdBody),
        response: plain(bool),
    }

    /// Connect to a server once (administrators): learns and pins its host key when none
    /// is pinned, enforces it otherwise, and reports what its engine has. An unreachable
    /// server is an answer with `reachable: false` and why.
    ServerTest {
        name: "server.test", method: Post, names: Nothing, forwarded: false,
        tag: "remote-server", errors: [400, 401, 403, 404],
        no_tool(super::ADMINISTRATION),
        request: body(ServerIdBody),
        response: one(ServerTestResult),
    }
}
