//! `sandbox.exposePort`, `sandbox.ports` and `sandbox.unexposePort`: ports exposed as preview URLs.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Expose a port of a running sandbox as a preview URL: private (the URL carries a
    /// signed link that expires) or public (anyone with the URL). Exposing a port again
    /// replaces its earlier exposure and ends that one's links. A key or a dashboard
    /// session reaches any port of a sandbox it may use without exposing it.
    SandboxExposePort {
        name: "sandbox.exposePort", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404, 409, 412],
        tool "sandbox-exposePort" "Make a port of a running sandbox reachable in a browser: an app listening on 127.0.0.1:<port> inside it gets a preview URL. Private by default (the URL carries a signed link that expires after ttlSeconds, default 1 h); public: true lets anyone with the URL in. Returns the url to hand to a person.",
        request: body(ExposePortRequest),
        response: one(ExposedPortView),
    }

    /// The exposed ports of a sandbox, with their URLs.
    SandboxPorts {
        name: "sandbox.ports", method: Get, names: InQuery, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-ports" "The exposed ports of a sandbox, with their preview URLs and expiry.",
        request: query(SandboxIdQuery),
        response: list(ExposedPortView),
    }

    /// End a port's exposure: its links and public access stop at once.
    SandboxUnexposePort {
        name: "sandbox.unexposePort", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-unexposePort" "End a port's exposure: its preview links and public access stop at once.",
        request: body(PortRequest),
        response: one(UnexposedView),
    }
}
