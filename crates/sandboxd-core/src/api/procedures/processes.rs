//! `sandbox.process*`: background processes in a sandbox (the agent's).

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Start a background process (`sh -c cmd`) and get its handle at once. It outlives
    /// the request and any client, and dies with the sandbox; the last MiB of each stream
    /// is kept for `sandbox.processOutput`.
    SandboxProcessStart {
        name: "sandbox.processStart", method: Post, names: InBody, forwarded: true,
        tag: "process", errors: [400, 401, 404, 412, 503],
        tool "sandbox-processStart" "Start a long-running command (sh -c) in the background of a running sandbox, e.g. a server or a build, and get its processId at once. It keeps running after this call; read its output with sandbox-processOutput, wait for it with sandbox-processWait, stop it with sandbox-processSignal. Set stdin: true to write to it with sandbox-processWrite.",
        request: body(ProcessStartRequest),
        response: one(ProcessView),
    }

    /// The background processes of a sandbox, oldest first.
    SandboxProcessList {
        name: "sandbox.processList", method: Get, names: InQuery, forwarded: true,
        tag: "process", errors: [401, 404, 412, 503],
        tool "sandbox-processList" "The background processes of a sandbox with their status and exit codes.",
        request: query(ProcessListQuery),
        response: list(ProcessView),
    }

    /// Wait for a process to end, up to `timeoutMs` (default 30 s, max 10 min); returns its
    /// state either way.
    SandboxProcessWait {
        name: "sandbox.processWait", method: Post, names: InBody, forwarded: true,
        tag: "process", errors: [400, 401, 404, 412, 503],
        tool "sandbox-processWait" "Wait up to timeoutMs (default 30 s, max 10 min) for a background process to end; returns its status and exitCode (status running if it has not ended yet).",
        request: body(ProcessWaitRequest),
        response: one(ProcessView),
    }

    /// Send a signal to a process's whole process group.
    SandboxProcessSignal {
        name: "sandbox.processSignal", method: Post, names: InBody, forwarded: true,
        tag: "process", errors: [400, 401, 404, 412, 503],
        tool "sandbox-processSignal" "Send a signal (TERM by default, KILL, INT, HUP, QUIT, USR1, USR2) to a background process and everything it started.",
        request: body(ProcessSignalRequest),
        response: one(ProcessView),
    }

    /// Write to a process's standard input (started with `stdin: true`); `close: true`
    /// closes it after.
    SandboxProcessWrite {
        name: "sandbox.processWrite", method: Post, names: InBody, forwarded: true,
        tag: "process", errors: [400, 401, 404, 409, 412, 503],
        tool "sandbox-processWrite" "Write data to the standard input of a background process started with stdin: true; close: true closes its input after (it then reads end of file).",
        request: body(ProcessWriteRequest),
        response: one(ProcessWriteResult),
    }

    /// Read up to 1 MiB of a process's output from `offset`. Pass the returned `end` as the
    /// next `offset` to follow the output; after a disconnect nothing within the last MiB
    /// is lost.
    SandboxProcessOutput {
        name: "sandbox.processOutput", method: Get, names: InQuery, forwarded: true,
        tag: "process", errors: [400, 401, 404, 412, 503],
        tool "sandbox-processOutput" "Read up to 1 MiB of a background process's stdout or stderr from a byte offset (start at 0). The reply's end is the offset to pass next time to continue: page through long output this way. start is later than asked when older output was dropped (the last MiB of each stream is kept).",
        request: query(ProcessOutputQuery),
        response: one(ProcessOutputResult),
    }
}
