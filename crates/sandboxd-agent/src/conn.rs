//! One connection to sandboxd: announce, then read frames and dispatch them. Writes are
//! serialized through [`Outbox`]; each request runs on a thread of [`Workers`].

use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandboxd_agent_protocol::{
    Decoder, FailureKind, Frame, Hello, Kind, PROTOCOL_VERSION, Request,
};

use crate::egress::Egress;
use crate::exec::Running;
use crate::input::Inputs;
use crate::outbox::Outbox;
use crate::procs::Processes;
use crate::workers::Workers;
use crate::{exec, files, pty, transfer, watch};

/// What the connection's socket may hold on its way to the host.
const SEND_BUFFER: usize = 1024 * 1024;

/// How often the agent tries to connect again in the first moments after a connection
/// ended (sandboxd paused listening for a checkpoint, or restarts), then after
/// [`QUICK_RETRIES`] tries, at intervals doubling up to [`SLOW_RETRY`].
const QUICK_RETRY: Duration = Duration::from_millis(10);
const QUICK_RETRIES: u32 = 200;
const SLOW_RETRY: Duration = Duration::from_secs(1);

/// The wait before the `failed`-th attempt in a row to connect (from 1). The quick ones
/// cover a checkpoint: the sandbox is frozen in the middle of them and, once restored,
/// its agent is back within one interval.
fn retry_delay(failed: u32) -> Duration {
    if failed <= QUICK_RETRIES {
        return QUICK_RETRY;
    }
    let doublings = (failed - QUICK_RETRIES).min(7);
    (QUICK_RETRY * 2u32.pow(doublings)).min(SLOW_RETRY)
}

pub fn serve_forever(socket: &str) -> ExitCode {
    let mut failed = 0u32;
    // Background processes and the request threads outlive connections.
    let processes = Processes::default();
    let egress = Egress::default();
    let workers = Workers::started();
    // Replaced by a rekey: the next connection presents the new one.
    let key = Arc::new(Mutex::new(crate::supervise::key_from_supervisor()));
    loop {
        match UnixStream::connect(socket) {
            Ok(stream) => {
                failed = 0;
                serve(stream, &key, &processes, &egress, &workers);
            }
            Err(_) => {
                failed = failed.saturating_add(1);
                std::thread::sleep(retry_delay(failed));
            }
        }
    }
}

fn hello(key: &str) -> Hello {
    Hello {
        version: PROTOCOL_VERSION,
        pid: std::process::id(),
        uid: rustix::process::getuid().as_raw(),
        gid: rustix::process::getgid().as_raw(),
        key: key.to_owned(),
    }
}

/// Serves one connection until it ends; every command it started is killed then
/// (background processes are not).
fn serve(
    stream: UnixStream,
    key: &Mutex<String>,
    processes: &Processes,
    egress: &Egress,
    workers: &Workers,
) {
    // Room for a few frames in the socket, so that a fast stream (a download through a
    // port) does not wait on the host's every read; the kernel caps it at its maximum.
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, SEND_BUFFER);
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let outbox = Outbox::new(writer);
    let hello = hello(&key.lock().unwrap_or_else(|e| e.into_inner()));
    if !outbox.send(&Frame::json(0, Kind::Hello, &hello)) {
        return;
    }
    let running: Running = Arc::new(Mutex::new(HashMap::new()));
    let inputs = Inputs::default();
    let mut reader = stream;
    let mut decoder = Decoder::default();
    let mut buf = vec![0u8; 64 * 1024];
    'read: loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        decoder.feed(&buf[..n]);
        loop {
            let frame = match decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => break 'read,
            };
            let held = Held {
                processes,
                egress,
                workers,
                key,
            };
            dispatch(frame, &outbox, &running, &inputs, &held);
        }
    }
    exec::kill_all(&running);
    inputs.clear();
}

/// What outlives a connection: background processes, the egress proxy's connections,
/// the request threads and the agent's key.
struct Held<'a> {
    processes: &'a Processes,
    egress: &'a Egress,
    workers: &'a Workers,
    key: &'a Mutex<String>,
}

fn dispatch(frame: Frame, outbox: &Outbox, running: &Running, inputs: &Inputs, held: &Held<'_>) {
    let Held {
        processes,
        egress,
        workers,
        key,
    } = *held;
    let channel = frame.channel;
    match frame.kind {
        Kind::Request => {
            let request: Request = match frame.parse() {
                Ok(request) => request,
                Err(error) => {
                    files::fail(
                        outbox,
                        channel,
                        sandboxd_agent_protocol::FailureKind::Invalid,
                        &error.to_string(),
                    );
                    return;
                }
            };
            let outbox = outbox.clone();
            let running = running.clone();
            let inputs = inputs.clone();
            match request {
                Request::Exec {
                    argv,
                    cwd,
                    env,
                    marker,
                    stdin,
                } => {
                    let input = stdin.then(|| inputs.open(channel));
                    let command = exec::Command {
                        argv,
                        cwd,
                        env,
                        marker,
                    };
                    exec::starting(&running, channel);
                    workers.run(move || {
                        exec::run(&outbox, channel, &running, command, input);
                        // Also clears the slot of a command that could not start.
                        exec::unregister(&running, channel);
                        inputs.close(channel);
                    });
                }
                Request::Pty {
                    argv,
                    cwd,
                    env,
                    marker,
                    cols,
                    rows,
                } => {
                    let input = inputs.open(channel);
                    let command = exec::Command {
                        argv,
                        cwd,
                        env,
                        marker,
                    };
                    exec::starting(&running, channel);
                    workers.run(move || {
                        pty::run(&outbox, channel, &running, command, (cols, rows), input);
                        exec::unregister(&running, channel);
                        inputs.close(channel);
                    });
                }
                Request::WriteFile { path, mode } => {
                    let input = inputs.open(channel);
                    workers.run(move || {
                        files::write(&outbox, channel, &path, mode, &input);
                        inputs.close(channel);
                    });
                }
                Request::WriteProcess { .. } => {
                    let input = inputs.open(channel);
                    let processes = processes.clone();
                    workers.run(move || {
                        processes.serve(&outbox, channel, request, Some(input));
                        inputs.close(channel);
                    });
                }
                Request::FollowProcess { .. } => {
                    let input = inputs.open(channel);
                    let processes = processes.clone();
                    workers.run(move || {
                        processes.serve(&outbox, channel, request, Some(input));
                        inputs.close(channel);
                    });
                }
                Request::AddWatcher {
                    id,
                    path,
                    recursive,
                } => {
                    workers.run(move || watch::add(&outbox, channel, id, &path, recursive));
                }
                Request::WatcherEvents { id, wait_ms } => {
                    let wait = std::time::Duration::from_millis(u64::from(wait_ms));
                    workers.run(move || watch::events(&outbox, channel, &id, wait));
                }
                Request::RemoveWatcher { id } => {
                    workers.run(move || watch::remove(&outbox, channel, &id));
                }
                Request::Stat { path } => {
                    workers.run(move || files::stat(&outbox, channel, &path));
                }
                Request::Rename { from, to } => {
                    workers.run(move || files::rename(&outbox, channel, &from, &to));
                }
                Request::Remove { path } => {
                    workers.run(move || files::remove(&outbox, channel, &path));
                }
                Request::Spawn { .. }
                | Request::ResizeProcess { .. }
                | Request::Processes {}
                | Request::WaitProcess { .. }
                | Request::SignalProcess { .. }
                | Request::ReadProcess { .. } => {
                    let processes = processes.clone();
                    workers.run(move || processes.serve(&outbox, channel, request, None));
                }
                Request::Upload {
                    path,
                    shape,
                    mode,
                    size,
                    in_place,
                } => {
                    let input = inputs.open(channel);
                    workers.run(move || {
                        let upload = transfer::Upload {
                            path,
                            shape,
                            mode,
                            size,
                            in_place,
                        };
                        transfer::upload(&outbox, channel, upload, &input);
                        inputs.close(channel);
                    });
                }
                Request::OpenPort { port } => {
                    crate::port::serve(outbox, channel, port, inputs, workers);
                }
                Request::AcceptEgress {} => egress.serve(outbox, channel, inputs, workers),
                Request::Download { path, shape, max } => {
                    let input = inputs.open(channel);
                    workers.run(move || {
                        transfer::download(&outbox, channel, &path, shape, max, &input);
                        inputs.close(channel);
                    });
                }
                Request::Lease { for_ms } => {
                    crate::supervise::lease(for_ms);
                    files::done(&outbox, channel, 0);
                }
                Request::Rekey { key: new } if crate::supervise::is_key(&new.0) => {
                    crate::supervise::rekey(&new.0);
                    *key.lock().unwrap_or_else(|e| e.into_inner()) = new.0;
                    files::done(&outbox, channel, 0);
                }
                Request::Rekey { .. } => {
                    files::fail(&outbox, channel, FailureKind::Invalid, "not an agent key");
                }
                Request::ReadFile { path, max } => {
                    workers.run(move || files::read(&outbox, channel, &path, max));
                }
                Request::ListDir { path, metadata } => {
                    workers.run(move || files::list(&outbox, channel, &path, metadata));
                }
                Request::SetMetadata { path, metadata } => {
                    workers.run(move || files::set_metadata(&outbox, channel, &path, &metadata));
                }
                Request::Mkdir { path, mode } => {
                    workers.run(move || files::mkdir(&outbox, channel, &path, mode));
                }
            }
        }
        Kind::Data | Kind::End | Kind::Resize | Kind::Credit | Kind::Cancel => inputs.route(frame),
        Kind::Signal => {
            if let Ok(signal) = frame.parse::<sandboxd_agent_protocol::Signal>() {
                exec::signal(running, channel, signal.signal);
            }
        }
        // Frames only the agent sends are ignored if the host ever sends them.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_are_quick_at_first_then_slow_down_to_a_second() {
        assert_eq!(retry_delay(1), QUICK_RETRY);
        assert_eq!(retry_delay(QUICK_RETRIES), QUICK_RETRY);
        assert_eq!(retry_delay(QUICK_RETRIES + 1), Duration::from_millis(20));
        assert_eq!(retry_delay(QUICK_RETRIES + 3), Duration::from_millis(80));
        assert_eq!(retry_delay(QUICK_RETRIES + 7), SLOW_RETRY);
        assert_eq!(retry_delay(u32::MAX), SLOW_RETRY);
    }
}
