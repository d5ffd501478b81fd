//! `sandbox.context*`: interpreter contexts whose state persists between runs (the agent's).

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Start an interpreter context in a sandbox: Python (the image needs `python3`;
    /// with IPython, results in every format), JavaScript (`node`) or bash. Its state
    /// persists between `sandbox.contextRun` calls.
    SandboxContextCreate {
        name: "sandbox.contextCreate", method: Post, names: InBody, forwarded: true,
        tag: "context", errors: [400, 401, 404, 412, 503],
        tool "sandbox-contextCreate" "Start an interpreter context in a running sandbox: language python (the default; the image needs python3), javascript (node) or bash. Variables, imports and functions persist between sandbox-contextRun calls, as in a notebook.",
        request: body(ContextCreateRequest),
        response: one(ContextView),
    }

    /// Run code in a context: captured stdout and stderr, what it displayed and the final
    /// expression's value in every format it has (pictures, charts, tables), or the
    /// exception; at the timeout the run is interrupted and the context kept.
    SandboxContextRun {
        name: "sandbox.contextRun", method: Post, names: InBody, forwarded: true,
        tag: "context", errors: [400, 401, 404, 409, 412, 503],
        tool "sandbox-contextRun" "Run code in a context from sandbox-contextCreate. Returns captured stdout and stderr, result (the text of a final expression's value), results (what it displayed, such as a figure, then the final value, each by MIME type: image/png in base64, text/html, chart and table data) and error (exception name, value, traceback). At timeoutMs (default 60 s) the run is interrupted and the context keeps its state.",
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
