//! A template users build: their Dockerfile read (`dockerfile.rs`) and checked into a
//! `Recipe` (`recipe.rs`) before the engine's builder sees it. The checks are what keeps
//! a build inside the rules sandboxes live by: it builds on nothing but an image the
//! operator allows, a template or a snapshot (`FROM` is never a pull), it fetches nothing
//! (`ADD` of a URL, `COPY --from` an image, and every `$` substitution that could name
//! one are refused), and it uses only instructions whose effect is understood. The
//! engine's builder then reads the same text again, so the reading here follows its
//! rules: continuation lines, comments, parser directives, JSON and shell forms.

mod dockerfile;
mod recipe;

pub use dockerfile::{Instruction, parse};
pub use recipe::{CopySource, Recipe, StartCommand, check, check_file_names};

/// The largest Dockerfile taken (1 MiB).
pub const MAX_DOCKERFILE_BYTES: usize = 1 << 20;
/// The most files a build's `files` may hold.
pub const MAX_FILES: usize = 10_000;
/// The most bytes a build's `files` may hold, decoded (64 MiB); a larger context comes
/// as a tar stream.
pub const MAX_FILES_BYTES: u64 = 64 << 20;
