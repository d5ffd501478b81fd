//! Commands: each in its own process group, marked in its environment, output streamed
//! as it comes. A signal reaches the group and every marked process (found through
//! `/proc/*/environ`, read directly: no fork needed, so it works with the pids limit
//! exhausted).

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{self, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use sandboxd_agent_protocol::{AGENT_KEY_VAR, Exit, Frame, Kind};

use crate::input::Input;
use crate::outbox::Outbox;
use crate::output::LINGER;
use crate::{lookup, output, workdir};

/// The running commands of a connection: channel → (pid, marker entry).
pub type Running = Arc<Mutex<HashMap<u32, Slot>>>;

/// A command of the connection, by channel.
#[derive(Debug, Clone)]
pub enum Slot {
    /// Its request is taken and it is not spawned yet; a signal sent meanwhile is kept
    /// and delivered once it runs, so a caller that gives up at once leaves nothing.
    Starting { pending: Option<i32> },
    /// Running: its process group and its marker.
    Running { pid: i32, marker: Vec<u8> },
}

/// What to run.
pub struct Command {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub marker: (String, String),
}

impl Command {
    /// The process to start, without its stdio.
    pub fn build(&self, program: &str, args: &[String]) -> process::Command {
        let mut command = match lookup::resolve(program, &self.env) {
            Some(file) => {
                let mut command = process::Command::new(file);
                command.arg0(program);
                command
            }
            None => process::Command::new(program),
        };
        command
            .args(args)
            // The sandbox's agent key stays with the agent.
            .env_remove(AGENT_KEY_VAR)
            .envs(self.env.iter().cloned())
            .env(&self.marker.0, &self.marker.1);
        if let Some(cwd) = &self.cwd
            && !workdir::is_current(cwd)
        {
            command.current_dir(cwd);
        }
        command
    }

    /// Starts the process in a process group of its own, its output (and standard
    /// input when `stdin`, else `/dev/null`) on pipes; when the file PATH was remembered
    /// to hold is gone, looks again once.
    pub fn spawn_piped(
        &self,
        program: &str,
        args: &[String],
        stdin: bool,
    ) -> std::io::Result<process::Child> {
        let start = || {
            self.build(program, args)
                .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .spawn()
        };
        match start() {
            Err(error)
                if error.kind() == std::io::ErrorKind::NotFound
                    && lookup::forget(program, &self.env) =>
            {
                start()
            }
            other => other,
        }
    }

    /// Reports a command that could not start: a message on stderr, exit 126 or 127.
    pub fn refuse(&self, outbox: &Outbox, channel: u32, program: &str, error: &std::io::Error) {
        let what = match &self.cwd {
            Some(cwd) if !std::path::Path::new(cwd).is_dir() => {
                format!("cannot enter {cwd}: {error}")
            }
            _ => format!("cannot run {program}: {error}"),
        };
        outbox.send(&Frame::new(
            channel,
            Kind::Stderr,
            format!("sandboxd-agent: {what}\n"),
        ));
        let missing = error.kind() == std::io::ErrorKind::NotFound
            && self
                .cwd
                .as_deref()
                .is_none_or(|c| std::path::Path::new(c).is_dir());
        finish(
            outbox,
            channel,
            Exit {
                code: Some(if missing { 127 } else { 126 }),
                signal: None,
            },
        );
    }

    fn marker_entry(&self) -> Vec<u8> {
        format!("{}={}", self.marker.0, self.marker.1).into_bytes()
    }
}

/// Forwards what a pipe or terminal yields as `kind` frames while `open`, and keeps
/// draining after, so writers never block; signals `done` at the end.
pub fn pump(
    mut source: impl std::io::Read + Send + 'static,
    kind: Kind,
    outbox: Outbox,
    channel: u32,
    open: Arc<Mutex<bool>>,
    done: mpsc::Sender<()>,
) {
    crate::workers::detached(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match source.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Ok(open) = open.lock()
                && *open
            {
                outbox.send_bytes(channel, kind, &buf[..n]);
            }
        }
        let _ = done.send(());
    });
}

/// Waits for `count` pumps to finish, at most [`LINGER`], then stops forwarding.
pub fn settle(done: &mpsc::Receiver<()>, count: usize, open: &Mutex<bool>) {
    let deadline = std::time::Instant::now() + LINGER;
    for _ in 0..count {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if done.recv_timeout(left).is_err() {
            break;
        }
    }
    if let Ok(mut open) = open.lock() {
        *open = false;
    }
}

/// Notes a command whose request was taken, before it is handed to a worker.
pub fn starting(running: &Running, channel: u32) {
    if let Ok(mut map) = running.lock() {
        map.insert(channel, Slot::Starting { pending: None });
    }
}

/// Notes a spawned command; a signal that came while it was starting is sent now.
pub fn register(running: &Running, channel: u32, pid: u32, command: &Command) {
    let (pid, marker) = (pid as i32, command.marker_entry());
    let pending = running.lock().ok().and_then(|mut map| {
        let slot = Slot::Running {
            pid,
            marker: marker.clone(),
        };
        match map.insert(channel, slot) {
            Some(Slot::Starting { pending }) => pending,
            _ => None,
        }
    });
    if let Some(signal) = pending {
        deliver(pid, &marker, signal);
    }
}

pub fn unregister(running: &Running, channel: u32) {
    if let Ok(mut map) = running.lock() {
        map.remove(&channel);
    }
}

pub fn exit_of(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    match status {
        Ok(status) => Exit {
            code: status.code(),
            signal: status.signal(),
        },
        Err(_) => Exit {
            code: None,
            signal: None,
        },
    }
}

/// Runs a command with piped output (and standard input when `input` is given).
pub fn run(
    outbox: &Outbox,
    channel: u32,
    running: &Running,
    command: Command,
    input: Option<Input>,
) {
    let Some((program, args)) = command.argv.split_first() else {
        finish(
            outbox,
            channel,
            Exit {
                code: Some(127),
                signal: None,
            },
        );
        return;
    };
    let mut child = match command.spawn_piped(program, args, input.is_some()) {
        Ok(child) => child,
        Err(error) => return command.refuse(outbox, channel, program, &error),
    };
    register(running, channel, child.id(), &command);
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        crate::workers::detached(move || {
            while let Some(frame) = input.recv() {
                if frame.kind == Kind::End || stdin.write_all(&frame.payload).is_err() {
                    break;
                }
            }
        });
    }
    let status = match output::forward(&mut child, outbox, channel) {
        Some(status) => status,
        None => pump_and_wait(&mut child, outbox, channel),
    };
    unregister(running, channel);
    finish(outbox, channel, exit_of(status));
}

/// Forwards the output with a thread per pipe, for kernels without pidfds.
fn pump_and_wait(
    child: &mut process::Child,
    outbox: &Outbox,
    channel: u32,
) -> std::io::Result<process::ExitStatus> {
    let open = Arc::new(Mutex::new(true));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut pumps = 0;
    if let Some(stdout) = child.stdout.take() {
        pump(
            stdout,
            Kind::Stdout,
            outbox.clone(),
            channel,
            open.clone(),
            done_tx.clone(),
        );
        pumps += 1;
    }
    if let Some(stderr) = child.stderr.take() {
        pump(
            stderr,
            Kind::Stderr,
            outbox.clone(),
            channel,
            open.clone(),
            done_tx.clone(),
        );
        pumps += 1;
    }
    drop(done_tx);
    let status = child.wait();
    // Output still in the pipes is forwarded, for a short while if background
    // processes keep them open.
    settle(&done_rx, pumps, &open);
    status
}

pub fn finish(outbox: &Outbox, channel: u32, exit: Exit) {
    outbox.send(&Frame::json(channel, Kind::Exit, &exit));
}

/// Sends `signal` to the process group of the command on `channel` and to every process
/// carrying its marker.
/// A command still starting keeps the signal for when it runs (a kill wins over any
/// other signal).
pub fn signal(running: &Running, channel: u32, signal: i32) {
    let target = running
        .lock()
        .ok()
        .and_then(|mut map| match map.get_mut(&channel) {
            Some(Slot::Running { pid, marker }) => Some((*pid, marker.clone())),
            Some(Slot::Starting { pending }) => {
                if *pending != Some(Signal::KILL.as_raw()) {
                    *pending = Some(signal);
                }
                None
            }
            None => None,
        });
    if let Some((pid, marker)) = target {
        deliver(pid, &marker, signal);
    }
}

fn deliver(pid: i32, marker: &[u8], signal: i32) {
    let Some(sig) = Signal::from_named_raw(signal) else {
        return;
    };
    if let Some(group) = Pid::from_raw(pid) {
        let _ = kill_process_group(group, sig);
    }
    kill_marked(marker, sig);
}

/// Kills every command of a connection that ended.
pub fn kill_all(running: &Running) {
    let targets: Vec<(i32, Vec<u8>)> = running
        .lock()
        .map(|map| {
            map.values()
                .filter_map(|slot| match slot {
                    Slot::Running { pid, marker } => Some((*pid, marker.clone())),
                    Slot::Starting { .. } => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for (pid, marker) in targets {
        if let Some(group) = Pid::from_raw(pid) {
            let _ = kill_process_group(group, Signal::KILL);
        }
        kill_marked(&marker, Signal::KILL);
    }
}

fn kill_marked(marker: &[u8], sig: Signal) {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|e| e == marker)
            && let Some(target) = Pid::from_raw(pid as i32)
        {
            let _ = kill_process(target, sig);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::{CommandExt, ExitStatusExt};

    use super::*;

    fn command() -> Command {
        Command {
            argv: vec!["sleep".into(), "30".into()],
            cwd: None,
            env: Vec::new(),
            marker: ("SANDBOXD_TEST_MARKER".into(), "starting".into()),
        }
    }

    /// The kill of a caller that gave up before its command was spawned is kept, and the
    /// command dies as soon as it runs.
    #[test]
    fn a_signal_sent_while_a_command_starts_reaches_it_once_it_runs() {
        let running: Running = Arc::new(Mutex::new(HashMap::new()));
        starting(&running, 7);
        signal(&running, 7, Signal::TERM.as_raw());
        signal(&running, 7, Signal::KILL.as_raw());
        signal(&running, 7, Signal::TERM.as_raw());
        let mut child = process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        register(&running, 7, child.id(), &command());
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(Signal::KILL.as_raw()), "{status:?}");
        unregister(&running, 7);
        assert!(running.lock().unwrap().is_empty());
    }

    /// A starting command holds no process: a connection that ends kills nothing for it,
    /// and one that ends without a signal runs untouched.
    #[test]
    fn a_command_started_without_a_signal_is_left_running() {
        let running: Running = Arc::new(Mutex::new(HashMap::new()));
        starting(&running, 8);
        kill_all(&running);
        let mut child = process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        register(&running, 8, child.id(), &command());
        assert!(child.try_wait().unwrap().is_none());
        kill_all(&running);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(Signal::KILL.as_raw()));
    }
}
