//! `volume.*`: an organization's named storage, mounted into sandboxes.

#[allow(unused_imports)]
use crate::api::*;

crate::define! {
    /// Make a volume: named storage of the organization that outlives its sandboxes, on one
    /// server (the local engine unless `serverId` names one). `sandbox.create {volumes}`
    /// mounts it; a sandbox that does runs on its server. `sizeMb` is reserved against the
    /// organization's volume quota (the local engine does not cap a volume at it).
    VolumeCreate {
        name: "volume.create", method: Post, names: Nothing, forwarded: false,
        tag: "volume", errors: [400, 401, 403, 404, 409, 429],
        tool "volume-create" "Make a volume: named storage that outlives sandboxes. Mount it with sandbox-create {volumes: [{volumeId, path, readOnly?}]}; what one sandbox writes there the next one reads. name: 1–64 letters, digits, `.`, `_`, `-`. Optional sizeMb (reserved against your quota), projectId, serverId.",
        request: body(CreateVolumeRequest),
        response: one(VolumeView),
    }

    /// The organization's volumes in projects the caller sees, by name, each with the
    /// sandboxes that mount it.
    VolumeAll {
        name: "volume.all", method: Get, names: Nothing, forwarded: false,
        tag: "volume", errors: [401, 403],
        tool "volume-all" "Your volumes, by name, with the sandboxes that mount each.",
        request: none,
        response: list(VolumeView),
    }

    /// One volume, with the sandboxes that mount it.
    VolumeOne {
        name: "volume.one", method: Get, names: Nothing, forwarded: false,
        tag: "volume", errors: [400, 401, 404],
        tool "volume-one" "One volume, by volumeId.",
        request: query(VolumeIdQuery),
        response: one(VolumeView),
    }

    /// Remove a volume and everything in it. Refused (409) while a sandbox being created,
    /// running or paused mounts it.
    VolumeRemove {
        name: "volume.remove", method: Post, names: Nothing, forwarded: false,
        tag: "volume", errors: [400, 401, 404, 409],
        tool "volume-remove" "Remove a volume and everything in it. Refused while a running or paused sandbox mounts it.",
        request: body(VolumeIdBody),
        response: plain(bool),
    }
}
