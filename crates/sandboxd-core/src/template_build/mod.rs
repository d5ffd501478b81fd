//! A template users build: their Dockerfile read (`dockerfile.rs`) and checked into a
//! `Recipe` (`recipe.rs`), then run step by step (`steps.rs`): each instruction after
//! `FROM` changes the image's settings and says what it does to the filesystem (a
//! command, files copied to where `copy.rs` puts them, the workdir made). The checks are
//! what keeps a build inside the rules sandboxes live by: it builds on nothing but an
//! image the operator allows, a template or a snapshot (`FROM` is never a pull), it
//! fetches nothing (`ADD` of a URL or an archive, `COPY --from` an image, and every `$`
//! in a source are refused), and it uses only instructions whose effect is understood.
//! Each step runs in a container planned as a sandbox's (`container.rs`), and its image
//! is kept under a key chained from the base (`cache.rs`), so an unchanged step is found
//! again.

mod archive;
mod bodies;
mod cache;
mod container;
mod copy;
mod dockerfile;
mod recipe;
mod record;
mod steps;
mod words;

pub use archive::{ArchiveError, InMemory, IntoBlob, Keep, read_tar};
pub use bodies::{
    Blob, ContextIndex, FileBody, FileBounds, MAX_CONTEXT_FILES, StoredFile, content_digest,
};
pub use cache::{
    CACHE_REPOSITORY, LABEL_BUILD, LABEL_BUILT_BY, TEMPLATE_REPOSITORY, base_key, cache_image,
    image_labels, step_key, template_image,
};
pub use container::{BUILD_PIDS_LIMIT, BuildShape, LABEL_BUILD_INSTANCE, build_container_plan};
pub use copy::{CopyMode, CopyTarget, copy_archive, dirs_archive};
pub use dockerfile::{Instruction, octal_mode, parse};
pub use recipe::{CopySource, Recipe, StartCommand, check, check_file_names};
pub use record::{
    BUILDING, FAILED, LogLine, MAX_LOG_LINE, MAX_LOG_LINES, READY, TemplateBuild, bounded_line,
};
pub use steps::{
    Action, MAX_SETTINGS_BYTES, MAX_WORD_BYTES, RESERVED_LABELS, Settings, Steps, absolute,
    numeric_owner,
};
pub use words::{is_name, words};

/// The most instructions a Dockerfile may hold.
pub const MAX_INSTRUCTIONS: usize = 1000;
/// The largest Dockerfile taken (1 MiB).
pub const MAX_DOCKERFILE_BYTES: usize = 1 << 20;
/// The most files a build's `files` may hold.
pub const MAX_FILES: usize = 10_000;
/// The most bytes a build's `files` may hold, decoded (64 MiB); a larger context comes
/// as a tar stream (`FileBounds::context`).
pub const MAX_FILES_BYTES: u64 = 64 << 20;
/// The largest body of `template.build`: its files base64-encoded, the Dockerfile
/// (≤ 1 MiB) and the JSON around them (88 MiB); E2B's archives of a build's files are
/// held to it too.
pub const MAX_BUILD_BODY_BYTES: usize = 88 * 1024 * 1024;
