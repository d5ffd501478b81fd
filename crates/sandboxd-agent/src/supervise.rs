//! The supervisor: the container's main process, PID 1 of the sandbox, so it must never
//! exit on its own. As PID 1 it receives no signal sent from inside the sandbox (the
//! kernel drops those it has no handler for, `SIGKILL` and `SIGSTOP` included), so no
//! command can stop it (`kill -9 -1` kills everything else); it restarts the worker
//! whenever the worker ends, and reaps every orphan the sandbox's commands leave behind.

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

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
    let mut backoff = Duration::from_millis(50);
    loop {
        let started = Instant::now();
        match Command::new(&me)
            .args(["serve", "--socket", socket])
            .spawn()
        {
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
