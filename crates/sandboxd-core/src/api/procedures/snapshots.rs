//! `sandbox.snapshot`, `sandbox.fork` and `snapshot.*`.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Snapshot a running or paused sandbox's filesystem: an image on the server it runs
    /// on (the sandbox is frozen while it is read), counted against the organization's
    /// snapshot quota. It keeps the files, the user and the workdir; none of the sandbox's
    /// environment variables. `sandbox.create {snapshotId}` starts sandboxes from it.
    SandboxSnapshot {
        name: "sandbox.snapshot", method: Post, names: InBody, forwarded: false,
        tag: "snapshot", errors: [400, 401, 404, 409, 412, 429],
        tool "sandbox-snapshot" "Snapshot a sandbox's files (the sandbox is frozen for the moment it takes). Start new sandboxes from it with sandbox-create {snapshotId}: they get the files, the user and the working directory, not the environment variables; with memory: true (a gvisor sandbox) its running processes too, which continue in each. Optional name.",
        request: body(SnapshotRequest),
        response: one(SnapshotView),
    }

    /// Fork a running or paused sandbox into `count` new ones, from a fresh snapshot of
    /// it: each has its files, its limits, network and labels, and an id and timeout of
    /// its own. Processes and memory are not carried, nor environment variables (give
    /// `envVars`) or egress credentials. All or nothing. The snapshot is kept and listed
    /// like any other.
    SandboxFork {
        name: "sandbox.fork", method: Post, names: InBody, forwarded: false,
        tag: "snapshot", errors: [400, 401, 404, 409, 412, 429],
        tool "sandbox-fork" "Fork a sandbox into count (1–20, default 1) new sandboxes that start with a copy of its files, its limits and network: use it to try several approaches from the same state. Environment variables are not carried (give envVars); with memory: true (a gvisor sandbox) each fork continues its running processes from one instant, else they are not carried. Returns the snapshot taken and the new sandboxes.",
        request: body(ForkRequest),
        response: one(ForkResult),
    }

    /// The organization's snapshots in projects the caller sees, newest first.
    SnapshotAll {
        name: "snapshot.all", method: Get, names: Nothing, forwarded: false,
        tag: "snapshot", errors: [401, 403],
        tool "snapshot-all" "Your snapshots, newest first, with their sizes and the sandboxes they were taken of.",
        request: none,
        response: list(SnapshotView),
    }

    /// One snapshot.
    SnapshotOne {
        name: "snapshot.one", method: Get, names: Nothing, forwarded: false,
        tag: "snapshot", errors: [400, 401, 404],
        tool "snapshot-one" "One snapshot, by snapshotId.",
        request: query(SnapshotIdQuery),
        response: one(SnapshotView),
    }

    /// Remove a snapshot and its image. Refused (409) while sandboxes made from it are
    /// running or paused.
    SnapshotRemove {
        name: "snapshot.remove", method: Post, names: Nothing, forwarded: false,
        tag: "snapshot", errors: [400, 401, 404, 409],
        tool "snapshot-remove" "Remove a snapshot you no longer need (snapshots count against your organization's quota). Refused while sandboxes made from it are running or paused.",
        request: body(SnapshotIdBody),
        response: plain(bool),
    }
}
