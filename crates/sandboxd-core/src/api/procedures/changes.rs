//! `sandbox.changes`: what a sandbox changed in its filesystem.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// The files a sandbox added, changed and removed since its image (or the snapshot it
    /// started from), by path: under its user's areas (its workdir, `/tmp`, `/var/tmp`),
    /// or everywhere with `all`; with each one's type and size now. At most 10,000
    /// entries. A paused sandbox is resumed first.
    SandboxChanges {
        name: "sandbox.changes", method: Get, names: InQuery, forwarded: false,
        tag: "sandbox", errors: [400, 401, 404, 412],
        tool "sandbox-changes" "List the files a sandbox added, changed and removed since it started from its template or snapshot: under its workdir, /tmp and /var/tmp (all: true for the whole filesystem), each with its type and size. Use it to see or hand back what work was done.",
        request: query(ChangesQuery),
        response: one(ChangesResult),
    }
}
