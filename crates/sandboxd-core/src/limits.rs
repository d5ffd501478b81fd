//! Defaults and bounds shared by validation, the engine adapter and the API description.

/// Default number of CPUs of a sandbox.
pub const DEFAULT_CPU: f64 = 1.0;
/// Default memory limit of a sandbox, in MiB (swap is disabled).
pub const DEFAULT_MEMORY_MB: i64 = 512;
/// Default process limit of a sandbox.
pub const DEFAULT_PIDS_LIMIT: i64 = 256;
/// Default idle timeout of a sandbox.
pub const DEFAULT_TIMEOUT_MS: i64 = 300_000;
/// Default working directory of a sandbox.
pub const DEFAULT_WORKDIR: &str = "/home/user";
/// Default timeout of one command.
pub const DEFAULT_EXEC_TIMEOUT_MS: u64 = 60_000;

pub const MIN_CPU: f64 = 0.1;
pub const MAX_CPU: f64 = 64.0;
pub const MIN_MEMORY_MB: i64 = 64;
pub const MAX_MEMORY_MB: i64 = 262_144;
pub const MIN_PIDS_LIMIT: i64 = 16;
pub const MAX_PIDS_LIMIT: i64 = 65_536;
pub const MIN_TIMEOUT_MS: i64 = 10_000;
pub const MAX_TIMEOUT_MS: i64 = 24 * 60 * 60 * 1000;
/// How long a sandbox may stay paused before it is killed, by default and at most.
pub const DEFAULT_PAUSED_TIMEOUT_MS: i64 = 24 * 60 * 60 * 1000;
pub const MIN_PAUSED_TIMEOUT_MS: i64 = 10_000;
pub const MAX_PAUSED_TIMEOUT_MS: i64 = 30 * 24 * 60 * 60 * 1000;
pub const MAX_ENV_VARS_BYTES: usize = 65_536;
pub const MAX_NAME_CHARS: usize = 64;
pub const MAX_IMAGE_CHARS: usize = 255;
pub const MAX_PATH_CHARS: usize = 4096;
pub const MAX_CMD_BYTES: usize = 65_536;
pub const MIN_EXEC_TIMEOUT_MS: u64 = 1_000;
pub const MAX_EXEC_TIMEOUT_MS: u64 = 600_000;
pub const MAX_FILE_MODE: u32 = 0o7777;

/// Each of stdout and stderr of one command is kept up to this many bytes.
pub const MAX_EXEC_OUTPUT_BYTES: usize = 1024 * 1024;
/// Files written or read through the API are capped at this size.
pub const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// The default cap of one streamed transfer (`sandbox.upload` / `sandbox.download`).
pub const DEFAULT_MAX_TRANSFER_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Most entries of one uploaded archive.
pub const MAX_TRANSFER_ENTRIES: u64 = 1_000_000;
/// A transfer whose bytes stop flowing for this long (either side) is cut.
pub const TRANSFER_IDLE_SECS: u64 = 60;

/// How long one streamed transfer may take in all, however its bytes trickle: an hour,
/// and a second more for every 256 KiB the cap allows (4 GiB: about 5.5 hours). A
/// source that sends a byte just inside each idle deadline is cut here.
pub fn transfer_deadline_secs(cap: u64) -> u64 {
    3600 + cap / (256 * 1024)
}
/// A directory listing reads at most this much output from the sandbox.
pub const MAX_LISTING_BYTES: usize = 4 * 1024 * 1024;
/// Grace period between the marker kill and the container restart on exec timeout.
pub const KILL_GRACE_MS: u64 = 2_000;
/// Exit code reported for a command killed by its timeout (as `timeout(1)` does).
pub const TIMEOUT_EXIT_CODE: i64 = 124;
/// Seconds the engine waits between SIGTERM and SIGKILL when a sandbox is killed.
pub const STOP_GRACE_SECS: i32 = 2;
/// A sandbox still `creating` after this long is considered failed by reconcile.
pub const STUCK_CREATING_MS: i64 = 10 * 60 * 1000;
/// Interval of the reaper loop.
pub const REAPER_INTERVAL_MS: u64 = 15_000;
/// Interval of the periodic reconcile loop.
pub const RECONCILE_INTERVAL_MS: u64 = 60_000;

/// Longest wait for a background process, and the default.
pub const MAX_PROCESS_WAIT_MS: u64 = 600_000;
pub const DEFAULT_PROCESS_WAIT_MS: u64 = 30_000;
/// Largest write to a process's standard input.
pub const MAX_PROCESS_WRITE_BYTES: usize = 1024 * 1024;
/// Most ids one access list takes in one request.
pub const MAX_LIST_IDS: usize = 1000;
/// Shortest and longest lifetime of an API key.
pub const MIN_KEY_TTL_MS: i64 = 1_000;
pub const MAX_KEY_TTL_MS: i64 = 10 * 365 * 24 * 60 * 60 * 1000;
/// How long an exposed port stays reachable without a key, by default, at least and at
/// most (`sandbox.exposePort`'s `ttlSeconds`).
pub const DEFAULT_EXPOSE_TTL_SECONDS: u64 = 60 * 60;
pub const MIN_EXPOSE_TTL_SECONDS: u64 = 1;
pub const MAX_EXPOSE_TTL_SECONDS: u64 = 7 * 24 * 60 * 60;
/// Entries of one audit page, by default and at most.
pub const DEFAULT_AUDIT_PAGE: u32 = 100;
pub const MAX_AUDIT_PAGE: u32 = 500;

/// Servers: the SSH port when none is given, the user, the engine socket and the
/// directory sandboxd keeps its files in on the server.
pub const DEFAULT_SSH_PORT: u16 = 22;
pub const DEFAULT_SSH_USER: &str = "root";
pub const DEFAULT_DOCKER_SOCKET: &str = "/var/run/docker.sock";
pub const DEFAULT_REMOTE_DIR: &str = "/var/lib/sandboxd";
/// The longest host name or address of a server.
pub const MAX_ADDRESS_CHARS: usize = 253;
/// The longest private key accepted (an RSA 8192 key in OpenSSH format is under 7 KiB).
pub const MAX_PRIVATE_KEY_BYTES: usize = 16 * 1024;
/// The longest host key line accepted.
pub const MAX_HOST_KEY_BYTES: usize = 8 * 1024;
/// The longest path on a server (socket, directory); sockets must fit a socket address.
pub const MAX_REMOTE_PATH_CHARS: usize = 64;
/// A server's capacity when configured.
pub const MAX_SERVER_CPU: f64 = 4096.0;
pub const MAX_SERVER_MEMORY_MB: i64 = 64 * 1024 * 1024;
/// Most warm members a server's pools keep ready, all templates together.
pub const MAX_SERVER_WARM_MEMBERS: usize = 64;
