//! Commands: each in its own process group, marked in its environment, output streamed
//! as it comes. A signal reaches the group and every marked process (found through
//! `/proc/*/environ`, read directly: no fork needed, so it works with the pids limit
//! exhausted).

use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use sandboxd_agent_protocol::{Exit, Frame, Kind};

use crate::conn::Outbox;

/// The running commands of a connection: channel → (pid, marker entry).
pub type Running = Arc<Mutex<HashMap<u32, (i32, Vec<u8>)>>>;

/// Output written by background processes after the command itself ended is forwarded
/// for this long, then dropped (the pipes keep being drained).
const LINGER: Duration = Duration::from_millis(250);

pub fn run(
    outbox: &Outbox,
    channel: u32,
    running: &Running,
    argv: Vec<String>,
    cwd: Option<String>,
    env: Vec<(String, String)>,
    marker: (String, String),
) {
    let Some((program, args)) = argv.split_first() else {
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
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env)
        .env(&marker.0, &marker.1)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = &cwd {
        command.current_dir(cwd);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            let what = match &cwd {
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
            let code = if error.kind() == std::io::ErrorKind::NotFound && cwd.is_none() {
                127
            } else {
                126
            };
            finish(
                outbox,
                channel,
                Exit {
                    code: Some(code),
                    signal: None,
                },
            );
            return;
        }
    };
    let pid = child.id() as i32;
    if let Ok(mut map) = running.lock() {
        map.insert(
            channel,
            (pid, format!("{}={}", marker.0, marker.1).into_bytes()),
        );
    }
    let open = Arc::new(Mutex::new(true));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let pipes: [(Option<Box<dyn std::io::Read + Send>>, Kind); 2] = [
        (
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            Kind::Stdout,
        ),
        (
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            Kind::Stderr,
        ),
    ];
    for (pipe, kind) in pipes {
        let Some(mut pipe) = pipe else { continue };
        let outbox = outbox.clone();
        let open = open.clone();
        let done = done_tx.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                if let Ok(open) = open.lock()
                    && *open
                {
                    outbox.send(&Frame::new(channel, kind, buf[..n].to_vec()));
                }
            }
            let _ = done.send(());
        });
    }
    drop(done_tx);
    let status = child.wait();
    // Output still in the pipes is forwarded, for a short while if background
    // processes keep them open.
    let deadline = std::time::Instant::now() + LINGER;
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    if let Ok(mut open) = open.lock() {
        *open = false;
    }
    if let Ok(mut map) = running.lock() {
        map.remove(&channel);
    }
    let exit = match status {
        Ok(status) => Exit {
            code: status.code(),
            signal: status.signal(),
        },
        Err(_) => Exit {
            code: None,
            signal: None,
        },
    };
    finish(outbox, channel, exit);
}

fn finish(outbox: &Outbox, channel: u32, exit: Exit) {
    outbox.send(&Frame::json(channel, Kind::Exit, &exit));
}

/// Sends `signal` to the process group of the command on `channel` and to every process
/// carrying its marker.
pub fn signal(running: &Running, channel: u32, signal: i32) {
    let target = running
        .lock()
        .ok()
        .and_then(|map| map.get(&channel).cloned());
    let (Some((pid, marker)), Some(sig)) = (target, Signal::from_named_raw(signal)) else {
        return;
    };
    if let Some(group) = Pid::from_raw(pid) {
        let _ = kill_process_group(group, sig);
    }
    kill_marked(&marker, sig);
}

/// Kills every command of a connection that ended.
pub fn kill_all(running: &Running) {
    let targets: Vec<(i32, Vec<u8>)> = running
        .lock()
        .map(|map| map.values().cloned().collect())
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
