//! A container's limits written to its cgroup directly, when the container runs on this
//! host: a warm sandbox claimed with other limits than its pool's gets them in tens of
//! microseconds instead of an engine update's 10–20 ms. The engine is then told the same
//! limits off the caller's path, so that what it reports agrees. The engine's own
//! cgroup layouts are the ones looked for (cgroupfs and systemd drivers, cgroup v1 and
//! v2); a container whose directory is not found (another host's, a rootless engine's)
//! is updated through the engine as before. What to write is planned here, purely.

use std::path::{Path, PathBuf};

/// Where the cgroup hierarchies are mounted.
pub(crate) const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The CPU period the engine uses with `NanoCpus`, in microseconds.
const CPU_PERIOD_US: i64 = 100_000;

/// Limits as the engine takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub nano_cpus: i64,
    /// Memory, and memory + swap (no swap).
    pub memory_bytes: i64,
    pub pids_limit: i64,
}

/// A container's cgroup directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layout {
    /// cgroup v1: one directory per controller.
    V1 {
        memory: PathBuf,
        cpu: PathBuf,
        pids: PathBuf,
    },
    /// cgroup v2: one directory.
    V2(PathBuf),
}

/// Whether `id` is a container id: only such an id names cgroup directories, so that
/// nothing else may reach a path.
pub(crate) fn is_container_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where the engine's cgroup drivers put a container's directory in the hierarchy at
/// `base`: cgroupfs (`docker/<id>`), then systemd (`system.slice/docker-<id>.scope`).
/// `container_id` must be a container id (`is_container_id`).
pub(crate) fn dirs_under(base: &Path, container_id: &str) -> [PathBuf; 2] {
    [
        base.join("docker").join(container_id),
        base.join("system.slice")
            .join(format!("docker-{container_id}.scope")),
    ]
}

/// The container's cgroup directories under `root`, if the engine made them there.
pub(crate) fn find(root: &Path, container_id: &str) -> Option<Layout> {
    if !is_container_id(container_id) {
        return None;
    }
    let v1 = |controller: &str| {
        dirs_under(&root.join(controller), container_id)
            .into_iter()
            .find(|dir| dir.is_dir())
    };
    if let (Some(memory), Some(cpu), Some(pids)) = (v1("memory"), v1("cpu"), v1("pids")) {
        return Some(Layout::V1 { memory, cpu, pids });
    }
    dirs_under(root, container_id)
        .into_iter()
        .find(|dir| dir.join("memory.max").is_file())
        .map(Layout::V2)
}

/// The files to write, in order, for `limits`. Under v1 the memory + swap limit may
/// never be below the memory limit: raised, it is written first; lowered, last.
/// `current_memory`: the memory limit in force (v1), to know which way it goes.
pub(crate) fn plan(
    layout: &Layout,
    limits: Limits,
    current_memory: Option<i64>,
) -> Vec<(PathBuf, String)> {
    let quota = (i128::from(limits.nano_cpus) * i128::from(CPU_PERIOD_US) / 1_000_000_000) as i64;
    match layout {
        Layout::V1 { memory, cpu, pids } => {
            let mut writes = Vec::new();
            let memory_value = limits.memory_bytes.to_string();
            let limit = (memory.join("memory.limit_in_bytes"), memory_value.clone());
            let with_swap = memory.join("memory.memsw.limit_in_bytes");
            let swap = with_swap.is_file().then_some((with_swap, memory_value));
            let raising = current_memory.is_none_or(|now| limits.memory_bytes > now);
            match (swap, raising) {
                (Some(swap), true) => writes.extend([swap, limit]),
                (Some(swap), false) => writes.extend([limit, swap]),
                (None, _) => writes.push(limit),
            }
            writes.push((cpu.join("cpu.cfs_period_us"), CPU_PERIOD_US.to_string()));
            writes.push((cpu.join("cpu.cfs_quota_us"), quota.to_string()));
            writes.push((pids.join("pids.max"), limits.pids_limit.to_string()));
            writes
        }
        Layout::V2(dir) => vec![
            (dir.join("memory.max"), limits.memory_bytes.to_string()),
            (dir.join("memory.swap.max"), "0".to_owned()),
            (dir.join("cpu.max"), format!("{quota} {CPU_PERIOD_US}")),
            (dir.join("pids.max"), limits.pids_limit.to_string()),
        ],
    }
}

/// Writes `limits` into the container's cgroup; `Ok(false)`: it has none on this host.
/// Blocking (small writes to the kernel's files).
pub(crate) fn write(root: &Path, container_id: &str, limits: Limits) -> std::io::Result<bool> {
    let Some(layout) = find(root, container_id) else {
        return Ok(false);
    };
    let current = match &layout {
        Layout::V1 { memory, .. } => std::fs::read_to_string(memory.join("memory.limit_in_bytes"))
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok()),
        Layout::V2(_) => None,
    };
    for (file, value) in plan(&layout, limits, current) {
        // A file of the v2 layout some kernels lack (no swap accounting) is skipped.
        if file.ends_with("memory.swap.max") && !file.is_file() {
            continue;
        }
        std::fs::write(&file, &value)?;
    }
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ID: &str = "569e79fa26dd0f2ba94876e3c007294e88cc954abbba313e5b92e908e0d4a918";

    fn limits(memory_mb: i64) -> Limits {
        Limits {
            nano_cpus: 500_000_000,
            memory_bytes: memory_mb << 20,
            pids_limit: 64,
        }
    }

    fn v1(root: &Path, swap: bool) -> Layout {
        for controller in ["memory", "cpu", "pids"] {
            std::fs::create_dir_all(root.join(controller).join("docker").join(ID)).unwrap();
        }
        let memory = root.join("memory/docker").join(ID);
        std::fs::write(
            memory.join("memory.limit_in_bytes"),
            (512i64 << 20).to_string(),
        )
        .unwrap();
        if swap {
            std::fs::write(memory.join("memory.memsw.limit_in_bytes"), "0").unwrap();
        }
        find(root, ID).unwrap()
    }

    #[test]
    fn v1_memory_and_swap_are_written_in_the_order_the_kernel_takes() {
        let root = tempfile::tempdir().unwrap();
        let layout = v1(root.path(), true);
        let names = |writes: Vec<(PathBuf, String)>| -> Vec<String> {
            writes
                .iter()
                .map(|(f, v)| format!("{}={v}", f.file_name().unwrap().to_string_lossy()))
                .collect()
        };
        let up = names(plan(&layout, limits(1024), Some(512 << 20)));
        assert_eq!(
            up,
            [
                "memory.memsw.limit_in_bytes=1073741824",
                "memory.limit_in_bytes=1073741824",
                "cpu.cfs_period_us=100000",
                "cpu.cfs_quota_us=50000",
                "pids.max=64"
            ]
        );
        let down = names(plan(&layout, limits(256), Some(512 << 20)));
        assert_eq!(down[0], "memory.limit_in_bytes=268435456");
        assert_eq!(down[1], "memory.memsw.limit_in_bytes=268435456");
        // Without swap accounting, only the memory limit.
        let root = tempfile::tempdir().unwrap();
        let layout = v1(root.path(), false);
        assert_eq!(plan(&layout, limits(256), None).len(), 4);
    }

    #[test]
    fn v2_is_one_directory_and_writes_are_applied() {
        let root = tempfile::tempdir().unwrap();
        let dir = root
            .path()
            .join("system.slice")
            .join(format!("docker-{ID}.scope"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["memory.max", "memory.swap.max", "cpu.max", "pids.max"] {
            std::fs::write(dir.join(file), "max").unwrap();
        }
        assert!(write(root.path(), ID, limits(256)).unwrap());
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.max")).unwrap(),
            "50000 100000"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            "268435456"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.swap.max")).unwrap(),
            "0"
        );
        assert_eq!(std::fs::read_to_string(dir.join("pids.max")).unwrap(), "64");
    }

    #[test]
    fn only_a_container_id_names_a_directory() {
        let root = tempfile::tempdir().unwrap();
        v1(root.path(), true);
        assert!(find(root.path(), "../../etc").is_none());
        assert!(find(root.path(), &ID[..12]).is_none());
        assert!(!write(root.path(), &"a".repeat(64), limits(256)).unwrap());
    }
}
