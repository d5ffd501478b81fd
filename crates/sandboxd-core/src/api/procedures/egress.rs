//! `sandbox.requestEgress`, `egress.*` and `sandbox.egressLog`: where a sandbox may connect, and where it did.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// What the egress proxy decided for an `allowlist` sandbox's connections, in the order
    /// the entries were written: when each was decided (allowed, refused with the reason,
    /// or failed), and again when an allowed connection ended, with its bytes each way.
    /// Follow the log by passing `nextCursor` back as `cursor`. The newest 10 000 entries
    /// are kept, until the sandbox is removed.
    SandboxEgressLog {
        name: "sandbox.egressLog", method: Get, names: InQuery, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-egressLog" "What an `allowlist` sandbox's connections through the egress proxy met: each host and port asked for, allowed, refused (with the reason) or failed, and the bytes each way once a connection ended. Read it to see why a download or an API call failed. Pass nextCursor back as cursor to read only what came after.",
        request: query(EgressLogQuery),
        response: one(EgressLogView),
    }

    /// Ask for a running `allowlist` sandbox to reach one more host (an entry as in
    /// `egress.allow`), with a reason for whoever decides: a pending request, or the one
    /// already waiting for the same host. At most 20 wait per sandbox. The sandbox reaches
    /// the host once someone holding `egress:decide` approves it with `egress.decide`.
    SandboxRequestEgress {
        name: "sandbox.requestEgress", method: Post, names: InBody, forwarded: false,
        tag: "egress", errors: [400, 401, 403, 404, 409, 412],
        tool "sandbox-requestEgress" "Ask for an `allowlist` sandbox to reach one more host (a name or `*.` wildcard, optional `:port`), with a reason a person reads. A person with the right to decide approves or denies it; once approved the host is reachable at once. Check with egress-requests (status=all) or sandbox-one (egress.allow).",
        request: body(RequestEgressRequest),
        response: one(EgressRequestView),
    }

    /// Egress requests of the caller's organization, for the sandboxes the caller may read,
    /// newest first: those waiting for a decision (of running sandboxes; the default) or,
    /// with `status=all`, the latest 200.
    EgressRequests {
        name: "egress.requests", method: Get, names: Nothing, forwarded: false,
        tag: "egress", errors: [400, 401, 403, 404],
        tool "egress-requests" "Egress requests of your sandboxes, newest first: those waiting for a decision (default), or status=all for decided ones too (approved or denied).",
        request: query(EgressRequestsQuery),
        response: list(EgressRequestView),
    }

    /// Approve or deny a pending egress request: needs `egress:decide` and the use of the
    /// sandbox, with another key than the one that asked. An approval adds the host to the
    /// running sandbox's list at once (new connections see it).
    EgressDecide {
        name: "egress.decide", method: Post, names: Nothing, forwarded: false,
        tag: "egress", errors: [400, 401, 403, 404, 409, 412],
        no_tool(super::EGRESS_DECISION),
        request: body(DecideEgressRequest),
        response: one(EgressRequestView),
    }
}
