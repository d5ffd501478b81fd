//! A background process's output and end, followed by one thread: a `poll` over its
//! pipes and a pidfd of the process, instead of a thread per pipe and one blocked in
//! `wait` (threads count against the sandbox's pids limit, as processes do).
//!
//! The thread is started before the process (`procs.rs`), so that a start past the pids
//! limit is refused, not a panic.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, pidfd_open};
use sandboxd_agent_protocol::ProcessStream;

/// How long output still buffered in the pipes when the process ends is read before the
/// end is recorded (so output comes before the exit that follows it).
const SETTLE: Duration = Duration::from_millis(250);
/// Without a pidfd, how often the process is checked for its end.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Hands every chunk of the child's stdout and stderr (or of its terminal, read as
/// stdout) to `output` and its end to `ended`, until every pipe is closed (pipes held
/// open by the child's own children keep being read after the end).
pub fn pump(
    mut child: Child,
    terminal: Option<File>,
    mut output: impl FnMut(ProcessStream, &[u8]),
    ended: impl FnOnce(std::io::Result<ExitStatus>),
) {
    let pidfd = pidfd_open(Pid::from_child(&child), PidfdFlags::empty()).ok();
    let mut pipes: Vec<(File, ProcessStream)> = Vec::with_capacity(2);
    if let Some(stdout) = child.stdout.take() {
        pipes.push((File::from(OwnedFd::from(stdout)), ProcessStream::Stdout));
    }
    if let Some(stderr) = child.stderr.take() {
        pipes.push((File::from(OwnedFd::from(stderr)), ProcessStream::Stderr));
    }
    if let Some(terminal) = terminal {
        pipes.push((terminal, ProcessStream::Stdout));
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut ended = Some(ended);
    while !pipes.is_empty() {
        let watch_exit = ended.is_some();
        let check = Timespec::try_from(CHECK_EVERY).ok();
        let timeout = (watch_exit && pidfd.is_none()).then_some(check).flatten();
        let exited = match poll_pipes(
            &pipes,
            watch_exit.then_some(pidfd.as_ref()).flatten(),
            timeout.as_ref(),
        ) {
            Some((ready, exited)) => {
                read_ready(&mut pipes, &ready, &mut buf, &mut output);
                exited
            }
            None => break,
        };
        let exited =
            watch_exit && (exited || (pidfd.is_none() && matches!(child.try_wait(), Ok(Some(_)))));
        if exited {
            settle(&mut pipes, &mut buf, &mut output);
            if let Some(ended) = ended.take() {
                ended(child.wait());
            }
        }
    }
    if let Some(ended) = ended {
        ended(child.wait());
    }
}

/// Polls the pipes (and the pidfd); which pipes are ready and whether the process
/// ended, or `None` when polling fails.
fn poll_pipes(
    pipes: &[(File, ProcessStream)],
    pidfd: Option<&OwnedFd>,
    timeout: Option<&Timespec>,
) -> Option<(Vec<bool>, bool)> {
    let mut fds: Vec<PollFd<'_>> = pipes
        .iter()
        .map(|(pipe, _)| PollFd::new(pipe, PollFlags::IN))
        .collect();
    if let Some(pidfd) = pidfd {
        fds.push(PollFd::new(pidfd, PollFlags::IN));
    }
    loop {
        match poll(&mut fds, timeout) {
            Ok(_) => break,
            Err(Errno::INTR) => continue,
            Err(_) => return None,
        }
    }
    let ready = fds
        .iter()
        .take(pipes.len())
        .map(|fd| !fd.revents().is_empty())
        .collect();
    let exited = pidfd.is_some() && fds.last().is_some_and(|fd| !fd.revents().is_empty());
    Some((ready, exited))
}

/// Reads once from each ready pipe; a pipe at its end (or failing) is dropped.
fn read_ready(
    pipes: &mut Vec<(File, ProcessStream)>,
    ready: &[bool],
    buf: &mut [u8],
    output: &mut impl FnMut(ProcessStream, &[u8]),
) {
    for index in (0..pipes.len()).rev() {
        if !ready.get(index).copied().unwrap_or(false) {
            continue;
        }
        let (pipe, stream) = &mut pipes[index];
        match pipe.read(buf) {
            Ok(0) => {
                pipes.remove(index);
            }
            Ok(n) => output(*stream, &buf[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                pipes.remove(index);
            }
        }
    }
}

/// Reads what the pipes hold already, for at most [`SETTLE`].
fn settle(
    pipes: &mut Vec<(File, ProcessStream)>,
    buf: &mut [u8],
    output: &mut impl FnMut(ProcessStream, &[u8]),
) {
    let deadline = Instant::now() + SETTLE;
    let now = Timespec::try_from(Duration::ZERO).ok();
    while !pipes.is_empty() && Instant::now() < deadline {
        let Some((ready, _)) = poll_pipes(pipes, None, now.as_ref()) else {
            return;
        };
        if !ready.contains(&true) {
            return;
        }
        read_ready(pipes, &ready, buf, output);
    }
}
