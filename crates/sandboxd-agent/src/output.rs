//! A command's output forwarded from the thread that runs it: one `poll` over its
//! pipes and a pidfd of the process, instead of a thread per pipe and one blocked in
//! `wait`. Every thread that sleeps on its own adds a cross-CPU wake-up to a command's
//! round trip, and a command's round trip is short.
//!
//! Where the kernel has no pidfds, a thread per pipe.

use std::cell::Cell;
use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, pidfd_open};
use sandboxd_agent_protocol::Kind;

use crate::outbox::Outbox;

/// Output written by background processes after the command itself ended is forwarded
/// for this long, then dropped (the pipes keep being drained).
pub const LINGER: Duration = Duration::from_millis(250);

/// Output is read in chunks of this size.
const CHUNK: usize = 64 * 1024;

thread_local! {
    /// The read buffer of the request thread, kept for its next command. It is read
    /// into as spare capacity, never zeroed: only the pages output was written to are
    /// ever resident, so the idle threads of a sandbox whose commands printed little
    /// hold little.
    static BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Forwards the child's stdout and stderr as frames on `channel` until the child has
/// ended and its pipes are closed, or [`LINGER`] after it ended; pipes still held open
/// (by background processes) are then drained without forwarding. `None`, with
/// nothing taken from the child, when the kernel offers no pidfd.
pub fn forward(
    child: &mut Child,
    outbox: &Outbox,
    channel: u32,
) -> Option<std::io::Result<ExitStatus>> {
    let pidfd = pidfd_open(Pid::from_child(child), PidfdFlags::empty()).ok()?;
    let mut pipes: Vec<(File, Kind)> = Vec::with_capacity(2);
    if let Some(stdout) = child.stdout.take() {
        pipes.push((File::from(OwnedFd::from(stdout)), Kind::Stdout));
    }
    if let Some(stderr) = child.stderr.take() {
        pipes.push((File::from(OwnedFd::from(stderr)), Kind::Stderr));
    }
    let mut buf = BUFFER.take();
    buf.clear();
    buf.reserve_exact(CHUNK);
    let mut status = None;
    let mut deadline: Option<Instant> = None;
    loop {
        if pipes.is_empty() && status.is_some() {
            break;
        }
        let timeout = match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match Timespec::try_from(left) {
                    Ok(left) => Some(left),
                    Err(_) => break,
                }
            }
            None => None,
        };
        let watch_exit = status.is_none();
        let mut fds: Vec<PollFd<'_>> = pipes
            .iter()
            .map(|(pipe, _)| PollFd::new(pipe, PollFlags::IN))
            .collect();
        if watch_exit {
            fds.push(PollFd::new(&pidfd, PollFlags::IN));
        }
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(_) => break,
        }
        let ready: Vec<bool> = fds
            .iter()
            .take(pipes.len())
            .map(|fd| !fd.revents().is_empty())
            .collect();
        let exited = watch_exit && fds.last().is_some_and(|fd| !fd.revents().is_empty());
        drop(fds);
        for index in (0..pipes.len()).rev() {
            if !ready[index] {
                continue;
            }
            let (pipe, kind) = &pipes[index];
            buf.clear();
            match rustix::io::read(pipe, rustix::buffer::spare_capacity(&mut buf)) {
                Ok(0) => {
                    pipes.remove(index);
                }
                Ok(_) => {
                    outbox.send_bytes(channel, *kind, &buf);
                }
                Err(Errno::INTR) => {}
                Err(_) => {
                    pipes.remove(index);
                }
            }
        }
        if exited {
            status = Some(child.wait());
            deadline = Some(Instant::now() + LINGER);
        }
    }
    BUFFER.set(buf);
    for (pipe, _) in pipes {
        crate::workers::detached(move || drain(pipe));
    }
    Some(status.unwrap_or_else(|| child.wait()))
}

/// Reads a pipe to its end, so whoever writes to it never blocks.
fn drain(mut pipe: File) {
    let mut buf = vec![0u8; 64 * 1024];
    while matches!(pipe.read(&mut buf), Ok(n) if n > 0) {}
}
