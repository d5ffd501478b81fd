//! Terminals: a pseudo-terminal per session, the command in its own session with the
//! terminal as its controlling terminal. The child side is set up by re-running this
//! binary as `pty-exec`, which makes itself a session leader, takes the terminal and
//! replaces itself with the command, so no code runs between fork and exec.
//!
//! `spawn_on_terminal` also starts a background process on a terminal, whose `pump.rs`
//! thread reads the terminal as its stdout.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex, mpsc};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};
use sandboxd_agent_protocol::{Exit, Kind, Resize};

use crate::exec::{self, Command, Running};
use crate::input::Input;
use crate::outbox::Outbox;

/// `TERM` of a terminal session unless the request sets one.
const DEFAULT_TERM: &str = "xterm-256color";

fn size(cols: u16, rows: u16) -> Winsize {
    Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Opens a terminal pair: the controller and the path of the terminal.
fn open_pair(cols: u16, rows: u16) -> std::io::Result<(std::fs::File, std::ffi::CString)> {
    let controller = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY)?;
    grantpt(&controller)?;
    unlockpt(&controller)?;
    let name = ptsname(&controller, Vec::new())?;
    tcsetwinsize(&controller, size(cols, rows))?;
    Ok((std::fs::File::from(controller), name))
}

/// Runs a command on a new terminal.
pub fn run(
    outbox: &Outbox,
    channel: u32,
    running: &Running,
    command: Command,
    (cols, rows): (u16, u16),
    input: Input,
) {
    let Some(program) = command.argv.first().cloned() else {
        exec::finish(
            outbox,
            channel,
            Exit {
                code: Some(127),
                signal: None,
            },
        );
        return;
    };
    let (mut child, controller) = match spawn_on_terminal(&command, (cols, rows)) {
        Ok(started) => started,
        Err(error) => return command.refuse(outbox, channel, &program, &error),
    };
    exec::register(running, channel, child.id(), &command);
    let Ok(mut keys) = controller.try_clone() else {
        let _ = child.kill();
        exec::finish(outbox, channel, exec::exit_of(child.wait()));
        return;
    };
    let resizer = controller.try_clone().ok();
    crate::workers::detached(move || {
        while let Some(frame) = input.recv() {
            match frame.kind {
                Kind::Data if keys.write_all(&frame.payload).is_err() => break,
                Kind::Resize => {
                    if let (Ok(resize), Some(controller)) = (frame.parse::<Resize>(), &resizer) {
                        let _ = tcsetwinsize(controller.as_fd(), size(resize.cols, resize.rows));
                    }
                }
                _ => {}
            }
        }
    });
    let open = Arc::new(Mutex::new(true));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    exec::pump(
        controller,
        Kind::Stdout,
        outbox.clone(),
        channel,
        open.clone(),
        done_tx,
    );
    let status = child.wait();
    exec::settle(&done_rx, 1, &open);
    exec::unregister(running, channel);
    exec::finish(outbox, channel, exec::exit_of(status));
}

/// Starts `command` on a new terminal of `cols` × `rows`, in a session of its own with
/// the terminal as its controlling terminal: the process, and the terminal's
/// controller (its output to read, its input to write).
pub fn spawn_on_terminal(
    command: &Command,
    (cols, rows): (u16, u16),
) -> std::io::Result<(std::process::Child, std::fs::File)> {
    let (controller, name) = open_pair(cols, rows)?;
    let path = std::path::PathBuf::from(std::ffi::OsStr::from_bytes_compat(name.as_bytes()));
    let terminal = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
        .open(path)?;
    let me = std::env::current_exe()?;
    let helper_args: Vec<String> = ["pty-exec".to_owned(), "--".to_owned()]
        .into_iter()
        .chain(command.argv.iter().cloned())
        .collect();
    let mut process = command.build(&me.to_string_lossy(), &helper_args);
    if !command.env.iter().any(|(k, _)| k == "TERM") {
        process.env("TERM", DEFAULT_TERM);
    }
    let stdio = |file: &std::fs::File| file.try_clone().map(Stdio::from);
    process
        .stdin(stdio(&terminal)?)
        .stdout(stdio(&terminal)?)
        .stderr(stdio(&terminal)?);
    let child = process.spawn()?;
    drop(terminal);
    Ok((child, controller))
}

/// Sets a terminal's size through its controller.
pub fn resize(controller: &std::fs::File, cols: u16, rows: u16) -> std::io::Result<()> {
    tcsetwinsize(controller.as_fd(), size(cols, rows)).map_err(std::io::Error::from)
}

/// `sandboxd-agent pty-exec -- ARGV…`: runs with the terminal as stdin, stdout and
/// stderr; becomes a session leader, takes the terminal, and replaces itself with ARGV.
pub fn exec_on_terminal(argv: &[String]) -> ExitCode {
    let Some((program, args)) = argv.split_first() else {
        return ExitCode::from(127);
    };
    if let Err(error) = rustix::process::setsid() {
        eprintln!("sandboxd-agent: setsid: {error}");
        return ExitCode::from(126);
    }
    if let Err(error) = rustix::process::ioctl_tiocsctty(std::io::stdin().as_fd()) {
        eprintln!("sandboxd-agent: cannot take the terminal: {error}");
        return ExitCode::from(126);
    }
    let error = std::process::Command::new(program).args(args).exec();
    eprintln!("sandboxd-agent: cannot run {program}: {error}");
    ExitCode::from(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

/// `OsStr` from bytes on unix.
trait FromBytesCompat {
    fn from_bytes_compat(bytes: &[u8]) -> &std::ffi::OsStr;
}

impl FromBytesCompat for std::ffi::OsStr {
    fn from_bytes_compat(bytes: &[u8]) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt as _;
        std::ffi::OsStr::from_bytes(bytes)
    }
}
