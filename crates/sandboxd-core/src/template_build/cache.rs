//! The build cache's keys and the images' names. Each step's image is kept under a tag
//! made of a chain of hashes: the organization and the base image's id, then each
//! instruction's text and, for a copy, the names, places and contents of what it
//! copies. One organization's steps are never another's cache (what a `RUN` fetched or
//! made is its own, and a hit would tell another who built what). An unchanged Dockerfile on
//! an unchanged base finds every step's image; a changed file changes its copy's key and
//! every key after it.

use sha2::{Digest, Sha256};

use super::bodies::hex;
use super::copy::CopyTarget;
use super::dockerfile::Instruction;

/// The repository of the cache's images.
pub const CACHE_REPOSITORY: &str = "sandboxd-build-cache";
/// The repository of built templates' images.
pub const TEMPLATE_REPOSITORY: &str = "sandboxd-templates";
/// The label a build's containers carry (the build's id).
pub const LABEL_BUILD: &str = "sandboxd.build";

/// The key the chain starts from: the organization, the base image's id, and what the
/// steps run under (`runs_in`: their network and runtime; a `RUN` may make another
/// image without the internet or under gVisor).
pub fn base_key(organization_id: &str, image_id: &str, runs_in: &str) -> String {
    hex(Sha256::digest(format!(
        "sandboxd-build 1\n{organization_id}\n{image_id}\n{runs_in}"
    )))
}

/// The label a built image carries: the organization that built it. The engine finds
/// an image by a prefix of its id too: an image with this label is used under its own
/// names only (`sandboxd-templates:…`, `sandboxd-build-cache:…`), which only a
/// template's name reaches.
pub const LABEL_BUILT_BY: &str = "sandboxd.builtBy";

/// The labels a step's image is committed with: the build's own, none of sandboxd's
/// (the engine's commit would carry the step container's, the base's among them: each
/// is written empty), and the organization that built it.
pub fn image_labels(
    kept: &std::collections::BTreeMap<String, String>,
    organization_id: &str,
) -> std::collections::BTreeMap<String, String> {
    let mut labels: std::collections::BTreeMap<String, String> = kept
        .iter()
        .filter(|(name, _)| !name.starts_with(super::RESERVED_LABELS))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for name in [
        crate::snapshots::LABEL_SNAPSHOT,
        LABEL_BUILD,
        super::LABEL_BUILD_INSTANCE,
        crate::plan::LABEL_POOL,
        crate::plan::LABEL_SANDBOX,
        crate::plan::LABEL_SANDBOX_ID,
        crate::plan::LABEL_PROJECT_ID,
        crate::plan::LABEL_ENVIRONMENT_ID,
        crate::plan::LABEL_INSTANCE,
    ] {
        labels.insert(name.to_owned(), String::new());
    }
    labels.insert(LABEL_BUILT_BY.to_owned(), organization_id.to_owned());
    labels
}

/// The key after `instruction`, from the one before it; `copied` are a copy's targets
/// with the digests of their contents.
pub fn step_key(
    previous: &str,
    instruction: &Instruction,
    copied: &[(&CopyTarget, &str)],
) -> String {
    let mut hash = Sha256::new();
    hash.update(previous.as_bytes());
    hash.update(b"\n");
    hash.update(instruction.keyword.as_bytes());
    hash.update(b" ");
    hash.update(instruction.args.as_bytes());
    for (target, digest) in copied {
        hash.update(b"\n");
        hash.update(target.file.as_bytes());
        hash.update(b"\0");
        hash.update(target.path.as_bytes());
        hash.update(b"\0");
        hash.update(digest.as_bytes());
    }
    hex(hash.finalize())
}

/// The cache's image of a key.
pub fn cache_image(key: &str) -> String {
    format!("{CACHE_REPOSITORY}:{key}")
}

/// The image of a built template's version.
pub fn template_image(build_id: &str) -> String {
    format!("{TEMPLATE_REPOSITORY}:{}", build_id.to_ascii_lowercase())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::content_digest;
    use super::*;

    #[test]
    fn a_changed_file_changes_its_key_and_nothing_before() {
        let copy = Instruction {
            line: 2,
            keyword: "COPY".into(),
            args: "a /a".into(),
        };
        let target = CopyTarget {
            file: "a".into(),
            path: "/a".into(),
            base: "/".into(),
        };
        let base = base_key("org", "sha256:1", "isolated");
        let one = step_key(&base, &copy, &[(&target, &content_digest(b"1"))]);
        let two = step_key(&base, &copy, &[(&target, &content_digest(b"2"))]);
        assert_ne!(one, two);
        assert_eq!(
            one,
            step_key(&base, &copy, &[(&target, &content_digest(b"1"))])
        );
        assert_ne!(base, base_key("org", "sha256:2", "isolated"));
        assert_ne!(base, base_key("other", "sha256:1", "isolated"));
        assert_ne!(base, base_key("org", "sha256:1", "internet"));
        assert_eq!(cache_image(&one).len(), CACHE_REPOSITORY.len() + 65);
    }
}
