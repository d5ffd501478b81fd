//! The engine contract: what the service asks of the container engine of one server. The
//! Docker adapter implements it for a local or a remote engine; tests implement it with
//! a recording double.
//!
//! `Engine` is an async-trait, so that it is held as `Arc<dyn Engine>`: images, the
//! bridge, create, start, kill, destroy and remove, limits, listing by label, deaths,
//! exec, archives, a container's filesystem diff (`container_changes`), a container
//! committed as an image (`Commit`), an image removed, named volumes made and removed
//! (`create_volume`, `remove_volume`), and a container's memory saved to its host's disk
//! and restored (`checkpoint_container`, `restore_container`). The implementation bounds every call in time.

use std::fmt::Debug;
use std::pin::Pin;

use futures_core::Stream;
use sandboxd_core::plan::ContainerPlan;
use sandboxd_core::reconcile::ContainerState;

use crate::{ContainerDeath, EngineError, ExecOutcome, ExecSpec, Reachability, ReadFileError};

/// What an engine's host has: its CPUs (the most one container may be given) and its
/// memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostResources {
    pub cpus: i64,
    pub memory_bytes: i64,
}

/// One sample of a container's resource use, as the engine measures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageSample {
    /// CPU time used since the container started, in nanoseconds.
    pub cpu_ns: u64,
    /// Memory in use, less the page cache the kernel can reclaim, in bytes.
    pub memory_bytes: u64,
    /// The container's memory limit in bytes, when it has one.
    pub memory_limit_bytes: Option<u64>,
    /// Processes and threads running in it.
    pub pids: u64,
}

/// What a snapshot's commit needs: the image to make, the image its container was
/// started from (whose settings the new image keeps), and the labels to give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The reference of the image to make (`sandboxd-snapshots:<id>`).
    pub image: String,
    /// The image the container was started from.
    pub source_image: String,
    /// The snapshot's id and the installation's, on the image's labels.
    pub snapshot_id: String,
    pub instance_id: String,
}

/// What the engine holds of an image: its id, its size and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// The content-addressed id (`sha256:…`).
    pub id: String,
    pub size: i64,
    pub settings: sandboxd_core::template_build::Settings,
}

/// An image made present: what a sandbox of it needs to know of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnsuredImage {
    /// The user it runs as by default (empty: root).
    pub user: String,
    /// Its content-addressed id (`sha256:…`); empty when the engine does not say.
    pub id: String,
}

/// The stream of container deaths an engine reports.
pub type Deaths = Pin<Box<dyn Stream<Item = Result<ContainerDeath, EngineError>> + Send>>;

/// A container engine: images, networks, containers, exec and archives of one server.
/// Every call is bounded in time by the implementation.
#[async_trait::async_trait]
pub trait Engine: Debug + Send + Sync + 'static {
    /// The engine's API version in use, for logs.
    fn api_version(&self) -> String;

    /// The OCI runtimes the engine offers (`runc`, and `runsc`… when installed).
    async fn runtimes(&self) -> Result<Vec<String>, EngineError>;

    /// The CPUs and memory of the engine's host (one question to the engine).
    async fn host(&self) -> Result<HostResources, EngineError>;

    /// How the way to the engine is doing, and why the last attempt failed if it did;
    /// a local engine is always reachable as far as this goes.
    async fn reachability(&self) -> (Reachability, Option<String>) {
        (Reachability::Reachable, None)
    }

    /// Makes the image present (pulling it when missing); returns its configured user
    /// and its id.
    async fn ensure_image(&self, image: &str) -> Result<EnsuredImage, EngineError>;

    /// Makes `target` (once: a present `target` is kept): `image` (best named by its
    /// id) with the directory `workdir` made, owned by `owner`, every setting of the
    /// image kept; missing parents are made as root.
    async fn prepare_image(
        &self,
        image: &str,
        target: &str,
        workdir: &str,
        owner: (u32, u32),
    ) -> Result<(), EngineError> {
        let _ = (image, target, workdir, owner);
        Err(unsupported("prepare images"))
    }

    /// Makes the named bridge network present, with containers unable to reach each
    /// other.
    async fn ensure_bridge(&self, name: &str) -> Result<(), EngineError>;

    /// Creates (does not start) the container of a plan; returns its id.
    async fn create_container(&self, plan: &ContainerPlan) -> Result<String, EngineError>;

    /// Starts a container; one already running is fine.
    async fn start_container(&self, id: &str) -> Result<(), EngineError>;

    /// Sends SIGKILL to every process of a container.
    async fn kill_container(&self, id: &str) -> Result<(), EngineError>;

    /// Stops a container (a short grace, then SIGKILL) and removes it; one that is gone
    /// is fine.
    async fn destroy_container(&self, id: &str) -> Result<(), EngineError>;

    /// Freezes a running container (its processes keep their memory and get no CPU);
    /// one frozen already is fine; one that is not running is `NotRunning`.
    async fn pause_container(&self, id: &str) -> Result<(), EngineError>;

    /// Thaws a frozen container; one running unfrozen is fine; one that stopped is
    /// `NotRunning`.
    async fn unpause_container(&self, id: &str) -> Result<(), EngineError>;

    /// Whether the engine saves and restores containers' memory (`checkpoint_container`):
    /// its checkpoint API is on (Docker's experimental setting) and its runtime can.
    async fn checkpoints(&self) -> bool {
        false
    }

    /// Saves every process of a running container, with its memory, as the checkpoint
    /// `name` on the engine's host (readable by its owner only; it goes with the
    /// container), and stops the container. Fails with the container still running as
    /// it was.
    async fn checkpoint_container(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let _ = (id, name);
        Err(unsupported("save a container's memory"))
    }

    /// Starts a stopped container from its checkpoint `name`: its processes go on where
    /// they were saved. Fails with the container stopped and the checkpoint kept.
    async fn restore_container(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let _ = (id, name);
        Err(unsupported("restore a container's memory"))
    }

    /// Saves every process of a running or frozen container, with its memory, as the
    /// checkpoint `name`, and leaves the container as it was (a snapshot with memory).
    async fn checkpoint_running(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let _ = (id, name);
        Err(unsupported("save a container's memory"))
    }

    /// Moves the memory of the container's checkpoint `name` out of the container, kept
    /// on the engine's host as `kept` until `drop_memory`, and removes the checkpoint;
    /// returns the bytes kept.
    async fn keep_memory(&self, id: &str, name: &str, kept: &str) -> Result<u64, EngineError> {
        let _ = (id, name, kept);
        Err(unsupported("keep a container's memory"))
    }

    /// Gives a created container the checkpoint `name`, which starts it from the memory
    /// kept as `kept` (`restore_container`).
    async fn place_memory(&self, kept: &str, id: &str, name: &str) -> Result<(), EngineError> {
        let _ = (kept, id, name);
        Err(unsupported("restore kept memory"))
    }

    /// Removes the memory kept as `kept`; none there is no error.
    async fn drop_memory(&self, kept: &str) -> Result<(), EngineError> {
        let _ = kept;
        Err(unsupported("keep a container's memory"))
    }

    /// The bytes the container's checkpoint `name` holds on the engine's host.
    async fn checkpoint_bytes(&self, id: &str, name: &str) -> Result<u64, EngineError> {
        let _ = (id, name);
        Err(unsupported("measure a checkpoint"))
    }

    /// Removes the container's checkpoint `name`; none there is no error.
    async fn remove_checkpoint(&self, id: &str, name: &str) -> Result<(), EngineError> {
        let _ = (id, name);
        Err(unsupported("save a container's memory"))
    }

    /// The paths of a container's filesystem that differ from its image's, and how.
    async fn container_changes(
        &self,
        id: &str,
    ) -> Result<Vec<(String, sandboxd_core::api::ChangeKind)>, EngineError>;

    /// Makes an image of a container's filesystem (frozen while it is read) with the
    /// settings of the image it was started from, none of the container's own
    /// environment values, and the snapshot's labels; returns the bytes it adds to the
    /// image under it.
    async fn commit_container(&self, id: &str, commit: &Commit) -> Result<i64, EngineError>;

    /// An image's id, size and settings; `None` when the engine does not hold it. Never
    /// a pull.
    async fn image_facts(&self, image: &str) -> Result<Option<ImageFacts>, EngineError> {
        let _ = image;
        Err(unsupported("read images"))
    }

    /// Unpacks `tar` at `/` of a container, started or not, through the engine itself:
    /// owners and modes as the archive says (a build's copy, made by the host). The
    /// archive streams as it is read.
    async fn unpack_at_root(&self, container: &str, tar: Chunks) -> Result<(), EngineError> {
        let _ = (container, tar);
        Err(unsupported("build images"))
    }

    /// Commits a container's filesystem as `image` with exactly `settings`: nothing of
    /// the container's own configuration (its variables, command, user) is kept.
    async fn commit_as(
        &self,
        container: &str,
        image: &str,
        settings: &sandboxd_core::template_build::Settings,
    ) -> Result<(), EngineError> {
        let _ = (container, image, settings);
        Err(unsupported("build images"))
    }

    /// Removes every container of the build `build_id` (labelled with it): what a build
    /// cut short left.
    async fn remove_build_containers(&self, build_id: &str) -> Result<(), EngineError> {
        let _ = build_id;
        Err(unsupported("build images"))
    }

    /// Gives `image` the further name `target` (`repository:tag`).
    async fn tag_image(&self, image: &str, target: &str) -> Result<(), EngineError> {
        let _ = (image, target);
        Err(unsupported("build images"))
    }

    /// The image as the engine's image archive (`docker save`: its layers, settings and
    /// name), streamed as it is read.
    async fn save_image(&self, image: &str) -> Result<Chunks, EngineError> {
        let _ = image;
        Err(unsupported("carry images"))
    }

    /// Loads an image archive (`docker load`) as it arrives.
    async fn load_image(&self, archive: Chunks) -> Result<(), EngineError> {
        let _ = archive;
        Err(unsupported("carry images"))
    }

    /// The names (`repository:tag`) of the images of `repository`, each with when it
    /// was made (seconds since the epoch).
    async fn images_of(&self, repository: &str) -> Result<Vec<(String, i64)>, EngineError> {
        let _ = repository;
        Err(unsupported("list images"))
    }

    /// Removes an image; one that is gone is fine; one a container still uses is
    /// `Rejected` with status 409.
    async fn remove_image(&self, image: &str) -> Result<(), EngineError>;

    /// Makes a named volume with `labels` (an existing one of that name is kept).
    async fn create_volume(
        &self,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), EngineError>;

    /// Removes a named volume; a missing one is gone already. One a container uses is
    /// `Rejected` with status 409.
    async fn remove_volume(&self, name: &str) -> Result<(), EngineError>;

    /// Removes a container by force, with its anonymous volumes; one that is gone is fine.
    async fn remove_container(&self, id: &str) -> Result<(), EngineError>;

    /// Changes a running container's CPU, memory and PIDs limits.
    async fn update_limits(
        &self,
        id: &str,
        nano_cpus: i64,
        memory_bytes: i64,
        pids_limit: i64,
    ) -> Result<(), EngineError>;

    /// Every container (running or not) labelled as a sandbox of this installation.
    async fn list_sandbox_containers(
        &self,
        instance_id: &str,
    ) -> Result<Vec<ContainerState>, EngineError>;

    /// Whether the container's main process runs; a container that is gone is not.
    async fn is_running(&self, id: &str) -> Result<bool, EngineError>;

    /// The container's resource use now (CPU time, memory, processes).
    async fn usage(&self, id: &str) -> Result<UsageSample, EngineError> {
        let _ = id;
        Err(EngineError::Rejected {
            status: 501,
            message: "this engine does not report resource use".into(),
        })
    }

    /// Every death of a container labelled with `instance`, from now on. The stream ends
    /// when the engine connection does; the caller subscribes again.
    fn container_deaths(&self, instance: &str) -> Deaths;

    /// Runs a command through the engine's exec, killing it at its timeout.
    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecOutcome, EngineError>;

    /// Writes `content` to `dir/name` with `mode`, as `owner` (the sandbox user: what it
    /// may not write is refused).
    async fn put_file(
        &self,
        container: &str,
        dir: &str,
        name: &str,
        content: &[u8],
        mode: u32,
        owner: (u32, u32),
    ) -> Result<(), EngineError>;

    /// Creates (or re-owns) the directory `parent/name` owned by `owner`.
    async fn put_dir(
        &self,
        container: &str,
        parent: &str,
        name: &str,
        owner: (u32, u32),
    ) -> Result<(), EngineError>;

    /// Reads a regular file of at most `max` bytes, as `user` (`uid:gid`).
    async fn read_file(
        &self,
        container: &str,
        path: &str,
        max: usize,
        user: &str,
    ) -> Result<Vec<u8>, ReadFileError>;

    /// Whether `path` is a directory with nothing in it; `None` when it does not exist.
    async fn is_empty_dir(&self, container: &str, path: &str) -> Result<Option<bool>, EngineError>;

    /// Unpacks a tar stream into the directory `dir` (which must exist) as it arrives,
    /// as `user` (`uid:gid`). The archive is taken as it is: owners and names are the
    /// caller's to check. An error of the stream stops the unpacking.
    async fn put_archive(
        &self,
        container: &str,
        dir: &str,
        tar: Chunks,
        user: &str,
    ) -> Result<(), EngineError>;

    /// The tar stream of `path` (a file, or a directory with everything under it), read
    /// as `user` (`uid:gid`), once it has started: a missing path is `NotFound` here.
    async fn get_archive(
        &self,
        container: &str,
        path: &str,
        user: &str,
    ) -> Result<Chunks, EngineError>;
}

/// A stream of bytes between the service and an engine.
pub type Chunks = std::pin::Pin<
    Box<dyn futures_core::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send>,
>;

fn unsupported(what: &str) -> EngineError {
    EngineError::Rejected {
        status: 501,
        message: format!("this engine cannot {what}"),
    }
}
