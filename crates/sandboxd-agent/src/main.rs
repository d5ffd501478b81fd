//! `sandboxd-agent`: a sandbox's main process, PID 1 of its container. The
//! supervisor (`supervise`) keeps one worker (`serve`) alive; the worker connects to the
//! socket sandboxd listens on, announces itself and serves requests until the
//! connection ends, then connects again. It is linked statically, so it runs in any
//! image, with or without a shell or libc, as the sandbox user. It proves itself to
//! sandboxd with the sandbox's agent key, which the sandbox's code never sees.
//!
//! Plain std with threads, no async runtime: one reader per connection dispatches
//! requests to a pool of threads started ahead (`workers.rs`) and routes input to them
//! (`input.rs`); one mutex-guarded writer sends each frame in one vectored write
//! (`outbox.rs`). A command's output is forwarded by the thread that runs it
//! (`output.rs`); a background process is followed by one thread (`pump.rs`). What E2B's
//! daemon does (protocol version 5) is the agent's too: processes on a terminal and
//! followed (`pty.rs`, `procs.rs`), owners' names (`names.rs`), file metadata
//! (`xattrs.rs`), watchers (`watch.rs`). See `docs/agent-protocol.md`.
#![forbid(unsafe_code)]

mod conn;
mod egress;
mod exec;
mod files;
mod input;
mod lookup;
mod names;
mod outbox;
mod output;
mod port;
mod procs;
mod pty;
mod pump;
mod supervise;
mod transfer;
mod watch;
mod workdir;
mod workers;
mod xattrs;

use std::process::ExitCode;

// The allocator is the C library's. Every sandbox runs the agent twice (supervisor and
// worker), idle most of their lives: glibc's malloc holds about 110 and 180 KiB of
// anonymous memory in them where mimalloc held 250 and 310, and gives back what a
// transfer used (mimalloc kept 7.6 MiB after 256 MiB up and down), at the same
// throughput (docs/performance.md).

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("pty-exec") {
        return pty::exec_on_terminal(args.get(3..).unwrap_or_default());
    }
    let socket = match args.iter().position(|a| a == "--socket") {
        Some(i) => args.get(i + 1).cloned(),
        None => None,
    };
    let Some(socket) = socket else {
        eprintln!("usage: sandboxd-agent (supervise|serve) --socket PATH");
        return ExitCode::from(2);
    };
    // The sandbox's code runs under the same uid: it must neither trace the agent nor
    // read its memory, environment or descriptors (the agent key, the connection). The
    // binary is mounted execute-only, which makes the kernel start it non-dumpable
    // already; this holds even for an operator's readable copy.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    match args.get(1).map(String::as_str) {
        Some("supervise") => supervise::run(&socket),
        Some("serve") => conn::serve_forever(&socket),
        _ => {
            eprintln!("usage: sandboxd-agent (supervise|serve) --socket PATH");
            ExitCode::from(2)
        }
    }
}
