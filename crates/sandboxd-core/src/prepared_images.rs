//! Images prepared for sandboxes. A sandbox's workdir is its user's. When the image has
//! no such directory (every image but the project's own lacks `/home/user`), the engine
//! makes it as root when the container is made, and the agent, without capabilities,
//! cannot make it its user's: each create then asks the engine to unpack a directory
//! entry over it (tens of milliseconds). Once a create has done so, the image is
//! prepared: a copy with the workdir made and owned, every setting kept, named by the
//! image's id, the workdir and the owner, and later creates of that image, workdir and
//! user are made of it.
//!
//! `prepared_name` names it; `worth_preparing` says which creates can gain from one.

use sha2::{Digest, Sha256};

use crate::snapshots::SNAPSHOT_REPOSITORY;

/// The repository of prepared images.
pub const PREPARED_REPOSITORY: &str = "sandboxd-prepared";

/// The name of the image prepared from the image `image_id` for sandboxes of `owner`
/// (`uid`, `gid`) in `workdir`.
pub fn prepared_name(image_id: &str, workdir: &str, owner: (u32, u32)) -> String {
    let digest = Sha256::digest(format!(
        "sandboxd-prepared 1\n{image_id}\n{workdir}\n{}:{}",
        owner.0, owner.1
    ));
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREPARED_REPOSITORY}:{hex}")
}

/// Whether a sandbox of `image` (whose id is `image_id`), run as `owner` in `workdir`,
/// can be made of a prepared image: the owner is not root (root owns what the engine
/// makes), the image is known by its id, and is no snapshot's (made from a sandbox,
/// whose workdir is in it already).
pub fn worth_preparing(image: &str, image_id: &str, workdir: &str, owner: (u32, u32)) -> bool {
    owner.0 != 0
        && !image_id.is_empty()
        && !image.starts_with(&format!("{SNAPSHOT_REPOSITORY}:"))
        && !image.starts_with(&format!("{PREPARED_REPOSITORY}:"))
        && crate::paths::split_file(workdir).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_image_workdir_and_owner() {
        let one = prepared_name("sha256:aa", "/home/user", (1000, 1000));
        assert!(one.starts_with("sandboxd-prepared:"), "{one}");
        assert_eq!(one.len(), "sandboxd-prepared:".len() + 32);
        assert_eq!(one, prepared_name("sha256:aa", "/home/user", (1000, 1000)));
        for other in [
            prepared_name("sha256:bb", "/home/user", (1000, 1000)),
            prepared_name("sha256:aa", "/work", (1000, 1000)),
            prepared_name("sha256:aa", "/home/user", (1001, 1000)),
            prepared_name("sha256:aa", "/home/user", (1000, 1001)),
        ] {
            assert_ne!(one, other);
        }
    }

    #[test]
    fn root_snapshots_and_the_root_directory_are_not_prepared() {
        assert!(worth_preparing(
            "python:3.12-slim",
            "sha256:aa",
            "/home/user",
            (1000, 1000)
        ));
        assert!(!worth_preparing(
            "python:3.12-slim",
            "sha256:aa",
            "/home/user",
            (0, 0)
        ));
        assert!(!worth_preparing(
            "python:3.12-slim",
            "",
            "/home/user",
            (1000, 1000)
        ));
        assert!(!worth_preparing(
            "sandboxd-snapshots:x",
            "sha256:aa",
            "/home/user",
            (1000, 1000)
        ));
        assert!(!worth_preparing(
            "sandboxd-prepared:x",
            "sha256:aa",
            "/home/user",
            (1000, 1000)
        ));
        assert!(!worth_preparing(
            "python:3.12-slim",
            "sha256:aa",
            "/",
            (1000, 1000)
        ));
    }
}
