//! `sandbox.*`: a sandbox's life, its commands and its files.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Create a sandbox: pulls the image if missing, starts a hardened container and
    /// returns the record with `status: running`.
    SandboxCreate {
        name: "sandbox.create", method: Post, names: Nothing, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-create" "Create a sandbox: an isolated, resource-limited Linux container. Give environmentId (from your project's environments) and a template (base, python, node) or an image. Defaults: 1 CPU, 512 MiB, no network (networkMode internet for egress; allowlist with egress.allow for named hosts only), expires after 5 idle minutes (timeoutMs up to 24 h). Returns the sandbox record; use its sandboxId with sandbox-exec, sandbox-writeFile, sandbox-readFile, and sandbox-kill when done.",
        request: body(CreateSandboxRequest),
        response: one(SandboxView),
    }

    /// Give a sandbox another name (being made, running or paused; a paused one stays
    /// paused).
    SandboxRename {
        name: "sandbox.rename", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404, 412],
        tool "sandbox-rename" "Give a sandbox another name (1–64 characters), shown by sandbox-list and sandbox-one.",
        request: body(RenameSandboxRequest),
        response: one(SandboxView),
    }

    /// Run a command through `sh -c`; output is capped at 1 MiB per stream and the whole
    /// process tree is killed on timeout (exit code 124).
    SandboxExec {
        name: "sandbox.exec", method: Post, names: InBody, forwarded: true,
        tag: "sandbox", errors: [400, 401, 404, 412],
        tool "sandbox-exec" "Run a shell command (sh -c) in a running sandbox and wait for it. Returns stdout, stderr, exitCode, timedOut and truncated. The first 16 KiB of each stream are in the reply; when there is more, the reply's more.outputId lets you read the rest with sandbox-outputPage. The server keeps up to 1 MiB per stream (truncated: true when a stream was longer: redirect such output to a file, e.g. cmd > /tmp/out.txt, and read it with sandbox-readFile, which pages up to 10 MiB). timeoutMs 1 s–10 min (default 60 s); on timeout every process of the command is killed and exitCode is 124. Optional cwd (absolute) and env.",
        request: body(ExecRequest),
        response: one(ExecResult),
    }

    /// Write a file (utf8 or base64, ≤ 10 MiB); parent directories are created and the
    /// file is owned by the sandbox user.
    SandboxWriteFile {
        name: "sandbox.writeFile", method: Post, names: InBody, forwarded: true,
        tag: "sandbox", errors: [400, 401, 404, 412, 413],
        tool "sandbox-writeFile" "Write a file in a running sandbox (absolute path; parent directories are created; owned by the sandbox user). content is utf8 text, or base64 with encoding: base64. At most 10 MiB. Optional mode (e.g. 493 for 0o755).",
        request: body(WriteFileRequest),
        response: one(WriteFileResult),
    }

    /// List a directory (default: the workdir), directories first.
    SandboxListFiles {
        name: "sandbox.listFiles", method: Get, names: InQuery, forwarded: true,
        tag: "sandbox", errors: [400, 401, 404, 412],
        tool "sandbox-listFiles" "List a directory of a running sandbox (default: the sandbox's working directory), directories first, with type, size, mode and modification time.",
        request: query(ListFilesQuery),
        response: one(ListFilesResult),
    }

    /// Change the idle timeout of a running sandbox; it then expires that long from now.
    SandboxSetTimeout {
        name: "sandbox.setTimeout", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404, 412],
        tool "sandbox-setTimeout" "Change the idle timeout of a running sandbox (timeoutMs 10 s–24 h); it then expires that long from now unless used again. Every operation on a sandbox also extends it.",
        request: body(SetTimeoutRequest),
        response: one(SandboxView),
    }

    /// Replace the egress list of a running `allowlist` sandbox; new connections see it
    /// within a second.
    SandboxSetEgress {
        name: "sandbox.setEgress", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 403, 404, 412],
        tool "sandbox-setEgress" "Narrow the list of hosts a running `allowlist` sandbox may reach: give the list to keep (entries of the current list only). New connections see it within a second. To reach another host, ask with sandbox-requestEgress: a person approves it.",
        request: body(SetEgressRequest),
        response: one(SandboxView),
    }

    /// List the sandboxes of an environment or of a project, newest first.
    SandboxList {
        name: "sandbox.list", method: Get, names: Nothing, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-list" "List the sandboxes of an environment (environmentId) or of a project (projectId), newest first, with their status and expiry.",
        request: query(ListSandboxesQuery),
        response: list(SandboxView),
    }

    /// One sandbox.
    SandboxOne {
        name: "sandbox.one", method: Get, names: InQuery, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-one" "One sandbox's record: status (creating, running, killed, error), limits, expiry.",
        request: query(SandboxIdQuery),
        response: one(SandboxView),
    }

    /// A running sandbox's resource use now: CPU (percent of one CPU, since the previous
    /// reading or over a quarter second), memory and processes, against its limits; from the
    /// engine's figures for its container.
    SandboxStats {
        name: "sandbox.stats", method: Get, names: InQuery, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404, 412, 503],
        tool "sandbox-stats" "A running sandbox's resource use now: cpuPercent (of one CPU; 200 is two CPUs busy) against cpuLimit, memoryBytes against memoryLimitBytes, pids against pidsLimit. Use it to see whether a command is stuck burning CPU or close to the memory limit.",
        request: query(SandboxIdQuery),
        response: one(crate::api::SandboxStats),
    }

    /// A running sandbox's use over time: a reading every 5 seconds (CPU since the one
    /// before, memory, processes), the last hour of them kept while it runs, oldest
    /// first, from `from` to `to`. A sandbox with no reading yet answers one taken now.
    SandboxMetrics {
        name: "sandbox.metrics", method: Get, names: InQuery, forwarded: true,
        tag: "sandbox", errors: [400, 401, 404, 412, 503],
        tool "sandbox-metrics" "A running sandbox's resource use over time: readings every 5 s (cpuPercent of one CPU, memoryBytes, pids) for the last hour, oldest first; from/to (RFC 3339) narrow it. Use it to see when memory grew or CPU was busy during a long command.",
        request: query(crate::api::SandboxMetricsQuery),
        response: one(crate::api::SandboxMetrics),
    }

    /// What was done in a sandbox, in order, newest last, whichever way it came in (REST,
    /// WebSocket, MCP, the CLI, the SDK, E2B's API, the dashboard): each command with its
    /// exit code, duration and the first and last lines of its output, files written and
    /// read, terminals, ports, and its life (created, paused, resumed, snapshotted, forked,
    /// its timeout, killed), with who asked. Secret values are masked. A command is written
    /// when it starts and again when it ends. Follow the timeline by passing `nextCursor`
    /// back as `cursor`; `latest` reads the newest entries. Each sandbox keeps its newest
    /// entries (`[activity]` bounds), for `[activity] retention` after it ends.
    SandboxActivity {
        name: "sandbox.activity", method: Get, names: InQuery, forwarded: false,
        tag: "sandbox", errors: [400, 401, 403, 404],
        tool "sandbox-activity" "What was done in a sandbox, in order, newest last: every command (its command line, exit code, duration, who asked and the first and last lines of its output), file written or read, terminal, port, and lifecycle change (create, pause, resume, snapshot, fork, timeout, kill). Use it to read back what you ran and what failed. kinds=command narrows it; latest=true gives the newest entries; pass nextCursor back as cursor to read only what came after.",
        request: query(crate::api::ActivityQuery),
        response: one(crate::api::ActivityView),
    }

    /// A terminal session's recording (the `terminalId` of its `terminal` entry in
    /// `sandbox.activity`) as asciicast v2: a header line, then one event a line (output
    /// with its time, resizes, and input when the server records it), the sandbox's
    /// secret values masked, cut with a marker at `[activity] recording_max_mb`. Kept
    /// with the sandbox's timeline.
    SandboxRecording {
        name: "sandbox.recording", method: Get, names: InQuery, forwarded: false,
        tag: "sandbox", errors: [400, 401, 403, 404],
        no_tool(super::REPLAY),
        request: query(crate::api::RecordingQuery),
        response: one(crate::api::RecordingView),
    }

    /// Pause a running sandbox: its processes are frozen with their memory and use no CPU
    /// (nor the organization's CPU quota) until it is resumed; any call that reaches inside
    /// it (exec, files, terminals, processes, contexts, ports) resumes it first. It is
    /// killed when its paused timeout (`pausedTimeoutMs`, from the pause) ends. With
    /// `memory: "disk"` (a sandbox of the `gvisor` tier) its processes are saved to the
    /// host's disk and its container stopped: it holds no memory, and outlives a restart
    /// of the server, the engine or the host; a resume restores the same processes. A
    /// sandbox paused in memory is moved to disk when asked; one paused where asked is
    /// answered as it is. A save the runtime cannot make answers 409 with the sandbox
    /// running as it was.
    SandboxPause {
        name: "sandbox.pause", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404, 409, 412, 503],
        tool "sandbox-pause" "Pause a sandbox you are not using for a while: its processes and memory are kept but use no CPU. Any later call on it (sandbox-exec, files, processes, contexts, ports) resumes it first, so you need not call sandbox-resume. With memory \"disk\" (gvisor sandboxes) its processes are saved to disk and it holds no memory at all. It is killed when its paused timeout (pausedTimeoutMs, default 24 h) ends.",
        request: body(SandboxPauseBody),
        response: one(SandboxView),
    }

    /// Resume a paused sandbox: its processes go on where they were (restored from disk
    /// when it was paused there); its idle timeout starts afresh. Refused (429) when the
    /// organization's CPU quota has no room for it; a restore that fails answers 409 and
    /// leaves it paused on disk, to be retried. A running sandbox is answered as it is.
    SandboxResume {
        name: "sandbox.resume", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404, 409, 412, 429],
        tool "sandbox-resume" "Resume a paused sandbox: its processes go on where they were and its idle timeout starts afresh. Calls on a paused sandbox resume it by themselves; this is for resuming ahead of them.",
        request: body(SandboxIdBody),
        response: one(SandboxView),
    }

    /// Kill a sandbox: the container is stopped (2 s grace) and removed; the record stays
    /// as `killed`.
    SandboxKill {
        name: "sandbox.kill", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-kill" "Kill a sandbox: its container and every process and file in it are gone; the record stays with status killed. Call this when you are done with a sandbox.",
        request: body(SandboxIdBody),
        response: one(SandboxView),
    }

    /// Delete a sandbox record, killing it first if needed.
    SandboxRemove {
        name: "sandbox.remove", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404],
        tool "sandbox-remove" "Delete a sandbox's record, killing it first if it still runs.",
        request: body(SandboxIdBody),
        response: plain(bool),
    }

    /// The templates sandboxes can be made from: the configured ones (`kind:
    /// "configured"`), then the ready ones built in projects the caller sees (`kind:
    /// "built"`, with their project).
    SandboxTemplates {
        name: "sandbox.templates", method: Get, names: Nothing, forwarded: false,
        tag: "sandbox", errors: [401],
        tool "sandbox-templates" "The templates you can create sandboxes from: the configured ones (base, python, node) and those built in your projects, with their images, users and working directories.",
        request: none,
        response: list(TemplateView),
    }

    /// A single-use token for the streaming exec WebSocket of a sandbox, for browsers
    /// (which cannot send `x-api-key` on a WebSocket): connect to
    /// `/sandbox-exec?sandboxId=…&token=…` within a minute.
    SandboxExecToken {
        name: "sandbox.execToken", method: Post, names: InBody, forwarded: false,
        tag: "sandbox", errors: [401, 404],
        no_tool(super::BROWSER_TOKEN),
        request: body(SandboxIdBody),
        response: one(stream::ExecTokenView),
    }
}
