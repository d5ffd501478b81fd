//! Background processes: started on request, kept by the worker across connections,
//! each stream's last MiB kept in a ring buffer that can be read from an offset.
//!
//! `followProcess` sends a process's output from offsets as it comes, then its exit,
//! until cancelled.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::process::{Pid, Signal, kill_process_group};
use sandboxd_agent_protocol::{
    Done, Exit, FailureKind, Frame, Kind, OutputSlice, ProcessInfo, ProcessStream, Request, Resize,
};

use crate::exec::{self, Command};
use crate::input::Input;
use crate::outbox::Outbox;
use crate::{files, pump};

/// Bytes kept per stream.
const RING: usize = 1024 * 1024;
/// Processes kept at most (and running at most: a further start is refused); the
/// oldest ended ones are forgotten first.
const MAX_PROCESSES: usize = 64;
/// Bytes of a process's command line a listing shows at most (the start of it): the
/// listing of every process kept stays well within a frame, however long their
/// commands.
const SHOWN_ARGV_BYTES: usize = 8 * 1024;

/// The last [`RING`] bytes of a stream, with the count of all bytes ever written.
#[derive(Debug, Default)]
struct Ring {
    buf: VecDeque<u8>,
    total: u64,
}

impl Ring {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
        self.total += bytes.len() as u64;
        let excess = self.buf.len().saturating_sub(RING);
        self.buf.drain(..excess);
    }

    /// Up to `max` bytes from `offset` (or from the oldest byte kept, if later).
    fn read(&self, offset: u64, max: u64) -> (OutputSlice, Vec<u8>) {
        let first = self.total - self.buf.len() as u64;
        let start = offset.clamp(first, self.total);
        let skip = (start - first) as usize;
        let take = (self.total - start).min(max) as usize;
        let bytes: Vec<u8> = self.buf.iter().skip(skip).take(take).copied().collect();
        (
            OutputSlice {
                start,
                end: start + take as u64,
                exited: false,
            },
            bytes,
        )
    }
}

#[derive(Debug)]
struct State {
    stdout: Ring,
    stderr: Ring,
    exit: Option<Exit>,
    ended_ms: Option<i64>,
}

struct Proc {
    id: String,
    argv: Vec<String>,
    pid: u32,
    started_ms: i64,
    tag: Option<String>,
    cwd: Option<String>,
    state: Mutex<State>,
    changed: Condvar,
    /// Its standard input, or its terminal's input.
    stdin: Mutex<Option<Box<dyn Write + Send>>>,
    /// The controller of its terminal, when it runs on one.
    terminal: Option<std::fs::File>,
}

impl Proc {
    fn info(&self) -> ProcessInfo {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        ProcessInfo {
            id: self.id.clone(),
            argv: shown_argv(&self.argv),
            pid: self.pid,
            started_ms: self.started_ms,
            exit: state.exit,
            ended_ms: state.ended_ms,
            stdin_open: self.stdin.lock().map(|s| s.is_some()).unwrap_or(false),
            stdout_bytes: state.stdout.total,
            stderr_bytes: state.stderr.total,
            tag: self.tag.clone(),
            cwd: self.cwd.clone(),
            pty: self.terminal.is_some(),
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The background processes of this worker.
#[derive(Clone, Default)]
pub struct Processes(Arc<Mutex<HashMap<String, Arc<Proc>>>>);

impl Processes {
    fn get(&self, id: &str) -> Option<Arc<Proc>> {
        self.0.lock().ok()?.get(id).cloned()
    }

    /// How many of the processes have not ended.
    fn running(&self) -> usize {
        let Ok(map) = self.0.lock() else { return 0 };
        map.values()
            .filter(|p| p.state.lock().map(|s| s.exit.is_none()).unwrap_or(false))
            .count()
    }

    fn insert(&self, proc: Arc<Proc>) {
        let Ok(mut map) = self.0.lock() else { return };
        while map.len() >= MAX_PROCESSES {
            let oldest = map
                .values()
                .filter(|p| p.state.lock().map(|s| s.exit.is_some()).unwrap_or(false))
                .min_by_key(|p| p.started_ms)
                .map(|p| p.id.clone());
            match oldest {
                Some(id) => map.remove(&id),
                None => break,
            };
        }
        map.insert(proc.id.clone(), proc);
    }

    /// Serves a process request on `channel`.
    pub fn serve(&self, outbox: &Outbox, channel: u32, request: Request, input: Option<Input>) {
        match request {
            Request::Spawn {
                id,
                argv,
                cwd,
                env,
                marker,
                stdin,
                tag,
                pty,
            } => self.spawn(
                outbox,
                channel,
                (id, tag, pty),
                Command {
                    argv,
                    cwd,
                    env,
                    marker,
                },
                stdin,
            ),
            Request::FollowProcess {
                id,
                stdout_offset,
                stderr_offset,
            } => self.with(outbox, channel, &id, |proc| {
                follow(outbox, channel, proc, (stdout_offset, stderr_offset), input);
            }),
            Request::ResizeProcess { id, cols, rows } => {
                self.with(outbox, channel, &id, |proc| match &proc.terminal {
                    Some(terminal) => match crate::pty::resize(terminal, cols, rows) {
                        Ok(()) => reply(outbox, channel, &proc.info()),
                        Err(error) => files::fail_io(outbox, channel, &id, &error),
                    },
                    None => files::fail(
                        outbox,
                        channel,
                        FailureKind::Invalid,
                        "the process has no terminal",
                    ),
                })
            }
            Request::Processes {} => {
                let infos: Vec<ProcessInfo> = self
                    .0
                    .lock()
                    .map(|map| map.values().map(|p| p.info()).collect())
                    .unwrap_or_default();
                reply(outbox, channel, &infos);
            }
            Request::WaitProcess { id, timeout_ms } => self.with(outbox, channel, &id, |proc| {
                let deadline = Instant::now() + Duration::from_millis(timeout_ms);
                let mut state = proc.state.lock().unwrap_or_else(|e| e.into_inner());
                while state.exit.is_none() {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    state = proc
                        .changed
                        .wait_timeout(state, left)
                        .map(|(s, _)| s)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
                drop(state);
                reply(outbox, channel, &proc.info());
            }),
            Request::SignalProcess { id, signal } => self.with(outbox, channel, &id, |proc| {
                // An ended process's pid may be another process's by now: it is left be.
                let running = proc.state.lock().map(|s| s.exit.is_none()).unwrap_or(false);
                if let (true, Some(group), Some(sig)) = (
                    running,
                    Pid::from_raw(proc.pid as i32),
                    Signal::from_named_raw(signal),
                ) {
                    let _ = kill_process_group(group, sig);
                }
                reply(outbox, channel, &proc.info());
            }),
            Request::ReadProcess {
                id,
                stream,
                offset,
                max,
            } => self.with(outbox, channel, &id, |proc| {
                let (slice, bytes) = {
                    let state = proc.state.lock().unwrap_or_else(|e| e.into_inner());
                    let (slice, bytes) = match stream {
                        ProcessStream::Stdout => state.stdout.read(offset, max),
                        ProcessStream::Stderr => state.stderr.read(offset, max),
                    };
                    let exited = state.exit.is_some();
                    (OutputSlice { exited, ..slice }, bytes)
                };
                outbox.send(&Frame::json(channel, Kind::Data, &slice));
                for chunk in bytes.chunks(256 * 1024) {
                    outbox.send(&Frame::new(channel, Kind::Data, chunk.to_vec()));
                }
                outbox.send(&Frame::json(channel, Kind::Done, &Done { size: slice.end }));
            }),
            Request::WriteProcess { id, close } => self.with(outbox, channel, &id, |proc| {
                let mut written = 0u64;
                let mut broken = false;
                if let Some(input) = &input {
                    while let Some(frame) = input.recv() {
                        if frame.kind == Kind::End {
                            break;
                        }
                        let mut stdin = proc.stdin.lock().unwrap_or_else(|e| e.into_inner());
                        let ok = !broken
                            && stdin
                                .as_mut()
                                .is_some_and(|pipe| pipe.write_all(&frame.payload).is_ok());
                        if ok {
                            written += frame.payload.len() as u64;
                        } else {
                            broken = true;
                        }
                    }
                }
                if close && let Ok(mut stdin) = proc.stdin.lock() {
                    stdin.take();
                }
                if broken {
                    files::fail(
                        outbox,
                        channel,
                        FailureKind::Io,
                        "the process's standard input is closed",
                    );
                } else {
                    outbox.send(&Frame::json(channel, Kind::Done, &Done { size: written }));
                }
            }),
            _ => files::fail(
                outbox,
                channel,
                FailureKind::Invalid,
                "not a process request",
            ),
        }
    }

    fn with(&self, outbox: &Outbox, channel: u32, id: &str, f: impl FnOnce(&Proc)) {
        match self.get(id) {
            Some(proc) => f(&proc),
            None => files::fail(outbox, channel, FailureKind::NotFound, "no such process"),
        }
    }

    fn spawn(
        &self,
        outbox: &Outbox,
        channel: u32,
        (id, tag, pty): (String, Option<String>, Option<Resize>),
        command: Command,
        stdin: bool,
    ) {
        let Some((program, args)) = command.argv.split_first() else {
            return files::fail(outbox, channel, FailureKind::Invalid, "empty command");
        };
        if self.get(&id).is_some() {
            return files::fail(outbox, channel, FailureKind::Invalid, "process id in use");
        }
        if self.running() >= MAX_PROCESSES {
            return files::fail(
                outbox,
                channel,
                FailureKind::Limit,
                &format!(
                    "{MAX_PROCESSES} background processes are running already: wait for one or signal it"
                ),
            );
        }
        // The thread that follows the process starts first: when the sandbox's pids
        // limit leaves no room for it, nothing was started and the caller is told so.
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let argv = command.argv.clone();
        let cwd = command.cwd.clone();
        let (program, args) = (program.to_owned(), args.to_vec());
        let follower = std::thread::Builder::new()
            .name("process".into())
            .spawn(move || {
                let started = match pty {
                    Some(size) => crate::pty::spawn_on_terminal(&command, (size.cols, size.rows))
                        .and_then(|(child, controller)| {
                            let keys = controller.try_clone()?;
                            let reader = controller.try_clone()?;
                            Ok((child, Some((controller, keys, reader))))
                        }),
                    None => command
                        .spawn_piped(&program, &args, stdin)
                        .map(|child| (child, None)),
                };
                let (mut child, terminal) = match started {
                    Ok(started) => started,
                    Err(error) => {
                        let _ = started_tx.send(Err(format!("cannot start {program}: {error}")));
                        return;
                    }
                };
                let (terminal, input, reader): (_, Option<Box<dyn Write + Send>>, _) =
                    match terminal {
                        Some((controller, keys, reader)) => {
                            (Some(controller), Some(Box::new(keys)), Some(reader))
                        }
                        None => (
                            None,
                            child
                                .stdin
                                .take()
                                .map(|pipe| Box::new(pipe) as Box<dyn Write + Send>),
                            None,
                        ),
                    };
                let proc = Arc::new(Proc {
                    id,
                    argv,
                    pid: child.id(),
                    started_ms: now_ms(),
                    tag,
                    cwd,
                    state: Mutex::new(State {
                        stdout: Ring::default(),
                        stderr: Ring::default(),
                        exit: None,
                        ended_ms: None,
                    }),
                    changed: Condvar::new(),
                    stdin: Mutex::new(input),
                    terminal,
                });
                let _ = started_tx.send(Ok(proc.clone()));
                let output = |stream: ProcessStream, bytes: &[u8]| {
                    let mut state = proc.state.lock().unwrap_or_else(|e| e.into_inner());
                    match stream {
                        ProcessStream::Stdout => state.stdout.push(bytes),
                        ProcessStream::Stderr => state.stderr.push(bytes),
                    }
                    drop(state);
                    proc.changed.notify_all();
                };
                let ended = |status| {
                    let mut state = proc.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.exit = Some(exec::exit_of(status));
                    state.ended_ms = Some(now_ms());
                    drop(state);
                    proc.changed.notify_all();
                };
                pump::pump(child, reader, output, ended);
            });
        if follower.is_err() {
            return files::fail(
                outbox,
                channel,
                FailureKind::Limit,
                "cannot start another process: the sandbox's pids limit is reached",
            );
        }
        match started_rx.recv() {
            Ok(Ok(proc)) => {
                let info = proc.info();
                self.insert(proc);
                reply(outbox, channel, &info);
            }
            Ok(Err(message)) => files::fail(outbox, channel, FailureKind::Invalid, &message),
            Err(_) => files::fail(
                outbox,
                channel,
                FailureKind::Io,
                "the process follower ended",
            ),
        }
    }
}

/// Bytes of one stream sent in one frame at most.
const FOLLOW_CHUNK: u64 = 64 * 1024;
/// How often a follower with nothing to send looks whether it was cancelled.
const FOLLOW_TICK: Duration = Duration::from_millis(250);

/// Sends a process's output from the offsets as it comes, then its exit; stops when the
/// host cancels or the connection is gone.
fn follow(
    outbox: &Outbox,
    channel: u32,
    proc: &Proc,
    (mut stdout_at, mut stderr_at): (u64, u64),
    input: Option<Input>,
) {
    let cancelled = || match input.as_ref().map(Input::try_recv) {
        None | Some(Err(std::sync::mpsc::TryRecvError::Empty)) => false,
        Some(Ok(frame)) => frame.kind == Kind::Cancel,
        Some(Err(std::sync::mpsc::TryRecvError::Disconnected)) => true,
    };
    loop {
        let (stdout, stderr, exit) = {
            let mut state = proc.state.lock().unwrap_or_else(|e| e.into_inner());
            let pending = stdout_at < state.stdout.total || stderr_at < state.stderr.total;
            if !pending && state.exit.is_none() {
                state = proc
                    .changed
                    .wait_timeout(state, FOLLOW_TICK)
                    .map(|(s, _)| s)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            let (out_slice, stdout) = state.stdout.read(stdout_at, FOLLOW_CHUNK);
            let (err_slice, stderr) = state.stderr.read(stderr_at, FOLLOW_CHUNK);
            stdout_at = out_slice.end;
            stderr_at = err_slice.end;
            let drained = stdout_at == state.stdout.total && stderr_at == state.stderr.total;
            (stdout, stderr, state.exit.filter(|_| drained))
        };
        for (kind, bytes) in [(Kind::Stdout, stdout), (Kind::Stderr, stderr)] {
            if !bytes.is_empty() && !outbox.send_bytes(channel, kind, &bytes) {
                return;
            }
        }
        if let Some(exit) = exit {
            outbox.send(&Frame::json(channel, Kind::Exit, &exit));
            return;
        }
        if cancelled() {
            outbox.send(&Frame::json(channel, Kind::Done, &Done { size: 0 }));
            return;
        }
    }
}

fn reply(outbox: &Outbox, channel: u32, message: &impl serde::Serialize) {
    let data = Frame::json(channel, Kind::Data, message);
    if data.payload.len() > sandboxd_agent_protocol::MAX_PAYLOAD {
        // Never a reply without its data: the host is told why.
        return files::fail(
            outbox,
            channel,
            FailureKind::Limit,
            "the reply is over the frame limit",
        );
    }
    outbox.send(&data);
    outbox.send(&Frame::json(channel, Kind::Done, &Done { size: 0 }));
}

/// The start of a command line, at most [`SHOWN_ARGV_BYTES`] of its arguments' bytes:
/// whole arguments while they fit, then the start of the next (at a character's
/// boundary), then nothing.
fn shown_argv(argv: &[String]) -> Vec<String> {
    let mut left = SHOWN_ARGV_BYTES;
    let mut shown = Vec::new();
    for arg in argv {
        if left == 0 {
            break;
        }
        if arg.len() <= left {
            left -= arg.len();
            shown.push(arg.clone());
            continue;
        }
        let mut end = left;
        while !arg.is_char_boundary(end) {
            end -= 1;
        }
        shown.push(arg[..end].to_owned());
        left = 0;
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_shows_the_start_of_a_long_command_line() {
        let short = vec!["sh".to_owned(), "-c".to_owned(), "true".to_owned()];
        assert_eq!(shown_argv(&short), short);
        let long = vec![
            "python3".to_owned(),
            "-c".to_owned(),
            "é".repeat(SHOWN_ARGV_BYTES),
            "bash".to_owned(),
        ];
        let shown = shown_argv(&long);
        assert_eq!(shown.len(), 3, "what follows the cut is not shown");
        assert!(long[2].starts_with(&shown[2]));
        let bytes: usize = shown.iter().map(String::len).sum();
        assert!(bytes <= SHOWN_ARGV_BYTES && bytes > SHOWN_ARGV_BYTES - 4);
        // Sixty-four of them, as listed, fit a frame.
        let info = serde_json::to_vec(&vec![shown; MAX_PROCESSES]).unwrap();
        assert!(
            info.len() < sandboxd_agent_protocol::MAX_PAYLOAD,
            "{}",
            info.len()
        );
    }

    #[test]
    fn ring_keeps_the_last_mebibyte_and_reads_from_offsets() {
        let mut ring = Ring::default();
        ring.push(b"hello ");
        ring.push(b"world");
        let (slice, bytes) = ring.read(0, 100);
        assert_eq!(
            (slice.start, slice.end, bytes.as_slice()),
            (0, 11, &b"hello world"[..])
        );
        let (slice, bytes) = ring.read(6, 3);
        assert_eq!(
            (slice.start, slice.end, bytes.as_slice()),
            (6, 9, &b"wor"[..])
        );
        ring.push(&vec![b'x'; RING]);
        let (slice, bytes) = ring.read(0, u64::MAX);
        assert_eq!(slice.start, 11, "older bytes are gone");
        assert_eq!(bytes.len(), RING);
        assert_eq!(ring.read(u64::MAX, 10).0.start, ring.total);
    }
}
