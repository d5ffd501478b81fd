//! `sandbox.context*`: interpreter contexts whose state persists between runs (the agent's).

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Start a Python interpreter context in a sandbox (the image needs `python3`). Its
    /// state persists between `sandbox.contextRun` calls.
    SandboxContextCreate {
        name: "sandbox.contextCreate", method: Post, names: InBody, forwarded: true,
        tag: "context", errors: [400, 401, 404, 412, 503],
        tool "sandbox-contextCreate" "Start a Python interpreter context in a running sandbox (the image needs python3). Variables, imports and functions persist between sandbox-contextRun calls, as in a notebook.",
        request: body(ContextCreateRequest),
        response: one(ContextView),
    }

    /// Run code in a context: captured stdout and stderr, the final expression's value, or
    /// the exception; at the timeout the run is interrupted and the context kept.
    SandboxContextRun {
        name: "sandbox.contextRun", method: Post, names: InBody, forwarded: true,
        tag: "context", errors: [400, 401, 404, 409, 412, 503],
        tool "sandbox-contextRun" "Run Python code in a context from sandbox-contextCreate. Returns captured stdout and stderr, result (repr of a final expression) and error (exception name, value, traceback). At timeoutMs (default 60 s) the run is interrupted and the context keeps its state.",
        request: body(ContextRunRequest),
        response: one(ContextRunResult),
    }

    /// End a context.
    SandboxContextRemove {
        name: "sandbox.contextRemove", method: Post, names: InBody, forwarded: true,
        tag: "context", errors: [401, 404, 503],
        tool "sandbox-contextRemove" "End an interpreter context from sandbox-contextCreate: its interpreter stops and its state is gone.",
        request: body(ContextIdBody),
        response: plain(bool),
    }
}
