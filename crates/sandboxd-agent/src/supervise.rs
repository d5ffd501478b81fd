//! The supervisor: the container's main process, so it must never exit on its own. It
//! restarts the worker whenever it ends (killed from inside the sandbox, say).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

pub fn run(socket: &str) -> ExitCode {
    let Ok(me) = std::env::current_exe() else {
        eprintln!("sandboxd-agent: cannot find its own executable");
        // Stay alive: the container's main process ending would stop the sandbox.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    };
    let mut backoff = Duration::from_millis(50);
    loop {
        let started = Instant::now();
        match Command::new(&me)
            .args(["serve", "--socket", socket])
            .status()
        {
            Ok(status) => eprintln!("sandboxd-agent: worker ended ({status}); restarting"),
            Err(error) => eprintln!("sandboxd-agent: cannot start the worker: {error}"),
        }
        // A worker that ran for a while restarts at once; one that keeps dying backs off.
        backoff = if started.elapsed() > Duration::from_secs(10) {
            Duration::from_millis(50)
        } else {
            (backoff * 2).min(Duration::from_secs(2))
        };
        std::thread::sleep(backoff);
    }
}
