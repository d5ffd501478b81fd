//! The supervisor: the container's main process, PID 1 of the sandbox. As PID 1 it
//! receives no signal sent from inside the sandbox (the kernel drops those it has no
//! handler for, `SIGKILL` and `SIGSTOP` included), so no command can stop it (`kill -9
//! -1` kills everything else); it restarts the worker whenever the worker ends, and
//! reaps every orphan the sandbox's commands leave behind.
//!
//! It exits on one condition only, its dead-man's switch: the sandbox lives as long as
//! its lease, which sandboxd renews over the worker's connection (the worker passes
//! each lease on through its standard output, a socket only the supervisor reads; the
//! first lease comes in [`LEASE_VAR`]). When a lease runs out with no newer one,
//! sandboxd is gone or cut off and nothing else would end the sandbox: the supervisor
//! exits, and the kernel ends every process of the container with it.
//!
//! The supervisor reads the agent key once from its file and hands it to each worker it
//! starts over a socket pair. A worker given a new key (a sandbox restored from another's
//! checkpoint) passes it on the same way as a lease, and later workers get that one.

use std::os::unix::net::UnixStream;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandboxd_agent_protocol::{AGENT_KEY_FILE, AGENT_KEY_VAR, LEASE_VAR};

/// The agent key the next worker gets.
type SharedKey = Arc<Mutex<String>>;

/// The exit code of a sandbox whose lease ran out.
const LEASE_EXPIRED: u8 = 3;

/// What the worker writes for each lease it is given: `lease <ms>`.
const LEASE_LINE: &str = "lease ";

/// Called in the worker: hands a lease to the supervisor.
pub fn lease(for_ms: u64) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{LEASE_LINE}{for_ms}");
    let _ = out.flush();
}

/// What the worker writes for a new key it was given: `key <hex>`.
const KEY_LINE: &str = "key ";

/// Whether `key` has the shape of sandboxd's agent keys: 64 hex digits.
pub fn is_key(key: &str) -> bool {
    key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Called in the worker: hands a new key to the supervisor.
pub fn rekey(key: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{KEY_LINE}{key}");
    let _ = out.flush();
}

/// The key a line from the worker gives, if it is one.
fn parse_key(line: &str) -> Option<&str> {
    line.strip_prefix(KEY_LINE)
        .map(str::trim)
        .filter(|key| is_key(key))
}

/// The lease a line from the worker gives, if it is one.
fn parse_lease(line: &str) -> Option<Duration> {
    line.strip_prefix(LEASE_LINE)?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_millis)
}

/// Whether the sandbox must end now.
fn expired(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|deadline| now >= deadline)
}

/// Longest lease line kept; a longer one is dropped (the worker's lines are the sandbox
/// user's process's, not to be trusted with memory).
const MAX_LINE: usize = 256;

/// The dead-man's switch, on one thread: reads the leases every worker passes on (all
/// write into one socket) and waits for each no longer than until the current lease
/// runs out, then ends the sandbox. It wakes only for a lease or at the deadline.
fn keep_leases(leases: UnixStream, first: Option<Duration>, key: SharedKey) {
    use std::io::Read as _;
    let mut deadline = first.and_then(|lease| Instant::now().checked_add(lease));
    std::thread::spawn(move || {
        let mut leases = leases;
        let mut line = Vec::with_capacity(64);
        let mut buf = [0u8; 256];
        loop {
            let now = Instant::now();
            if expired(deadline, now) {
                eprintln!(
                    "sandboxd-agent: the sandbox's lease ran out with no word from sandboxd; ending it"
                );
                std::process::exit(i32::from(LEASE_EXPIRED));
            }
            // `None`: wait for a lease however long it takes (no lease was ever given).
            let wait = deadline.map(|at| (at - now).max(Duration::from_millis(1)));
            if leases.set_read_timeout(wait).is_err() {
                std::thread::sleep(Duration::from_millis(250));
                continue;
            }
            let n = match leases.read(&mut buf) {
                Ok(0) => {
                    // Every writer is gone, which cannot be while this process holds
                    // one; wait out the deadline.
                    std::thread::sleep(wait.unwrap_or(Duration::from_secs(3600)));
                    continue;
                }
                Ok(n) => n,
                Err(_) => continue,
            };
            for &byte in &buf[..n] {
                if byte != b'\n' {
                    if line.len() < MAX_LINE {
                        line.push(byte);
                    }
                    continue;
                }
                let text = String::from_utf8_lossy(&line);
                if let Some(new) = parse_key(&text) {
                    *key.lock().unwrap_or_else(|e| e.into_inner()) = new.to_owned();
                }
                // A lease too long to count is no change.
                if let Some(at) =
                    parse_lease(&text).and_then(|lease| Instant::now().checked_add(lease))
                {
                    deadline = Some(at);
                }
                line.clear();
            }
        }
    });
}

use rustix::io::Errno;
use rustix::process::{WaitOptions, wait};

pub fn run(socket: &str) -> ExitCode {
    let Ok(me) = std::env::current_exe() else {
        eprintln!("sandboxd-agent: cannot find its own executable");
        // Stay alive: the container's main process ending would stop the sandbox.
        loop {
            reap_any();
            std::thread::sleep(Duration::from_secs(1));
        }
    };
    let first = std::env::var(LEASE_VAR)
        .ok()
        .and_then(|ms| parse_lease(&format!("{LEASE_LINE}{ms}")));
    // One socket for the leases of every worker: each gets a copy of its writing end.
    let key: SharedKey = Arc::new(Mutex::new(sandbox_key(socket)));
    let lease_writer = match UnixStream::pair() {
        Ok((reader, writer)) => {
            keep_leases(reader, first, key.clone());
            Some(writer)
        }
        Err(error) => {
            eprintln!("sandboxd-agent: cannot keep leases: {error}");
            None
        }
    };
    let mut backoff = Duration::from_millis(50);
    loop {
        let started = Instant::now();
        let current = key.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match spawn_worker(&me, socket, &current, lease_writer.as_ref()) {
            Ok(worker) => {
                reap_until(worker.id());
                eprintln!("sandboxd-agent: worker ended; restarting");
            }
            Err(error) => eprintln!("sandboxd-agent: cannot start the worker: {error}"),
        }
        // A worker that ran for a while restarts at once; one that keeps dying backs off.
        backoff = if started.elapsed() > Duration::from_secs(10) {
            Duration::from_millis(50)
        } else {
            (backoff * 2).min(Duration::from_secs(2))
        };
        let resume = Instant::now() + backoff;
        while Instant::now() < resume {
            reap_any();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Starts a worker and hands it the key on its standard input (closed once written);
/// its standard output, where it writes its leases, is `leases`. Both are sockets, not
/// pipes: under gVisor the sandbox's code sees the agent's descriptors in `/proc` and
/// could open a pipe there (to read the key, or write a lease), but never a socket.
fn spawn_worker(
    me: &std::path::Path,
    socket: &str,
    key: &str,
    leases: Option<&UnixStream>,
) -> std::io::Result<std::process::Child> {
    use std::io::Write as _;
    use std::os::fd::OwnedFd;
    let (mut to_worker, key_end) = UnixStream::pair()?;
    let stdout = match leases {
        Some(leases) => Stdio::from(OwnedFd::from(leases.try_clone()?)),
        None => Stdio::null(),
    };
    let worker = Command::new(me)
        .args(["serve", "--socket", socket])
        .env_remove(LEASE_VAR)
        .env_remove(AGENT_KEY_VAR)
        .stdin(Stdio::from(OwnedFd::from(key_end)))
        .stdout(stdout)
        .spawn()?;
    let _ = writeln!(to_worker, "{key}");
    Ok(worker)
}

/// Longest key read: sandboxd's are 64 hex digits.
const MAX_KEY: u64 = 256;

/// The sandbox's key, read once as the container starts: from the key file beside the
/// socket (sandboxd takes it away once the agent has connected), else from the
/// environment (a container made by an older sandboxd). Empty: none was given, and
/// sandboxd will refuse the worker.
fn sandbox_key(socket: &str) -> String {
    use std::io::Read as _;
    let file = std::path::Path::new(socket).with_file_name(AGENT_KEY_FILE);
    let mut key = String::new();
    if let Ok(handle) = std::fs::File::open(file) {
        let _ = handle.take(MAX_KEY).read_to_string(&mut key);
    }
    let key = key.trim().to_owned();
    if !key.is_empty() {
        return key;
    }
    std::env::var(AGENT_KEY_VAR).unwrap_or_default()
}

/// Called in the worker: the key its supervisor hands it on its standard input.
pub fn key_from_supervisor() -> String {
    use std::io::Read as _;
    let mut key = String::new();
    let _ = std::io::stdin()
        .lock()
        .take(MAX_KEY)
        .read_to_string(&mut key);
    key.trim().to_owned()
}

/// Reaps children as they end (orphans of the sandbox's commands become PID 1's) until
/// `worker` is among them.
fn reap_until(worker: u32) {
    loop {
        match wait(WaitOptions::empty()) {
            Ok(Some((pid, _))) if pid.as_raw_nonzero().get().unsigned_abs() == worker => return,
            Ok(_) | Err(Errno::INTR) => continue,
            // No child at all: the worker is gone too.
            Err(_) => return,
        }
    }
}

/// Reaps the children that have ended, without waiting.
fn reap_any() {
    while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_read_from_the_workers_lines() {
        assert_eq!(parse_lease("lease 1500"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_lease("lease 0\n"), Some(Duration::ZERO));
        assert_eq!(parse_lease("lease -1"), None);
        assert_eq!(parse_lease("hello"), None);
        let now = Instant::now();
        assert!(!expired(None, now));
        assert!(!expired(Some(now + Duration::from_secs(1)), now));
        assert!(expired(Some(now), now));
    }

    #[test]
    fn a_new_key_is_read_from_the_workers_lines_only_in_the_shape_of_a_key() {
        let key = "ab".repeat(32);
        assert_eq!(parse_key(&format!("key {key}")), Some(key.as_str()));
        assert_eq!(parse_key(&format!("key {key}\n")), Some(key.as_str()));
        assert_eq!(parse_key("key short"), None);
        assert_eq!(parse_key(&format!("key {}", "zz".repeat(32))), None);
        assert_eq!(parse_key(&format!("lease {key}")), None);
        assert_eq!(parse_lease(&format!("key {key}")), None);
    }
}
