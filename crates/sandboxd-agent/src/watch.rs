//! Watchers of directories: an inotify instance each, kept until removed (they outlive
//! connections, like background processes). The kernel queues a watcher's events as
//! the changes happen; a read takes what is queued at that moment, so a change made
//! before the read is always in it. A recursive watcher also watches every directory
//! under its root, and each one made later, as its creation is read.
//!
//! Bounded: [`MAX_WATCHERS`] watchers, [`MAX_DIRS`] directories each, [`MAX_EVENTS`]
//! events and [`MAX_EVENT_BYTES`] per read (the rest wait for the next); a kernel queue
//! that overflowed is reported as such.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use sandboxd_agent_protocol::{FailureKind, Frame, Kind, WatchEvent, WatchKind};

use crate::files;
use crate::outbox::Outbox;

/// Watchers kept at most.
pub const MAX_WATCHERS: usize = 32;
/// Directories one recursive watcher watches at most.
pub const MAX_DIRS: usize = 8192;
/// Events one read returns at most.
pub const MAX_EVENTS: usize = 10_000;
/// Bytes of names and paths one read returns at most (the host takes no more).
pub const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

struct Watcher {
    /// Shared, so that a read may wait on it without holding the watchers' lock.
    fd: Arc<OwnedFd>,
    recursive: bool,
    /// Each watch descriptor's directory, relative to the root (`""`: the root).
    dirs: HashMap<i32, PathBuf>,
    root: PathBuf,
}

fn watchers() -> &'static Mutex<HashMap<String, Watcher>> {
    static WATCHERS: OnceLock<Mutex<HashMap<String, Watcher>>> = OnceLock::new();
    WATCHERS.get_or_init(Mutex::default)
}

fn flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::MODIFY
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::ATTRIB
        | WatchFlags::DONT_FOLLOW
        | WatchFlags::ONLYDIR
}

impl Watcher {
    /// Watches `relative` (under the root) and, when recursive, the directories under
    /// it; with `found`, what is in them is reported there (a directory made after the
    /// watcher started was not watched while it was filled: what it holds is reported
    /// as made, and written when not empty).
    fn watch_tree(
        &mut self,
        relative: &Path,
        mut found: Option<&mut Vec<WatchEvent>>,
    ) -> std::io::Result<()> {
        let mut pending = vec![relative.to_path_buf()];
        while let Some(dir) = pending.pop() {
            if self.dirs.len() >= MAX_DIRS {
                return Err(std::io::Error::other(format!(
                    "a watcher watches at most {MAX_DIRS} directories"
                )));
            }
            let wd = inotify::add_watch(&self.fd, self.root.join(&dir), flags())?;
            self.dirs.insert(wd, dir.clone());
            if !self.recursive {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(self.root.join(&dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let inner = dir.join(entry.file_name());
                if let Some(found) = found.as_deref_mut()
                    && found.len() < MAX_EVENTS
                {
                    let event = |kind| WatchEvent {
                        name: inner.to_string_lossy().into_owned(),
                        path: self.root.join(&inner).to_string_lossy().into_owned(),
                        kind,
                    };
                    found.push(event(WatchKind::Create));
                    if kind.is_file() && entry.metadata().is_ok_and(|m| m.len() > 0) {
                        found.push(event(WatchKind::Write));
                    }
                }
                if kind.is_dir() {
                    pending.push(inner);
                }
            }
        }
        Ok(())
    }

    /// The events queued now, at most [`MAX_EVENTS`].
    fn read(&mut self) -> Vec<WatchEvent> {
        let mut buf = [MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut events: Vec<WatchEvent> = Vec::new();
        let mut made_dirs = Vec::new();
        let mut bytes = 0usize;
        {
            let mut reader = inotify::Reader::new(&self.fd, &mut buf);
            while events.len() < MAX_EVENTS && bytes < MAX_EVENT_BYTES {
                if let Some(last) = events.last() {
                    bytes += last.name.len() + last.path.len() + 48;
                }
                let event = match reader.next() {
                    Ok(event) => event,
                    Err(Errno::INTR) => continue,
                    Err(_) => break,
                };
                let flags = event.events();
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    events.push(WatchEvent {
                        name: String::new(),
                        path: self.root.to_string_lossy().into_owned(),
                        kind: WatchKind::Overflow,
                    });
                    continue;
                }
                let (Some(dir), Some(name)) = (self.dirs.get(&event.wd()), event.file_name())
                else {
                    continue;
                };
                let relative = dir.join(OsStr::from_bytes(name.to_bytes()));
                let kind = if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                    WatchKind::Create
                } else if flags.contains(ReadFlags::MODIFY) {
                    WatchKind::Write
                } else if flags.contains(ReadFlags::DELETE) {
                    WatchKind::Remove
                } else if flags.contains(ReadFlags::MOVED_FROM) {
                    WatchKind::Rename
                } else if flags.contains(ReadFlags::ATTRIB) {
                    WatchKind::Chmod
                } else {
                    continue;
                };
                if self.recursive && kind == WatchKind::Create && flags.contains(ReadFlags::ISDIR) {
                    made_dirs.push(relative.clone());
                }
                events.push(WatchEvent {
                    name: relative.to_string_lossy().into_owned(),
                    path: self.root.join(&relative).to_string_lossy().into_owned(),
                    kind,
                });
            }
        }
        for dir in made_dirs {
            let _ = self.watch_tree(&dir, Some(&mut events));
        }
        // What a new directory held is reported within the same bounds; past them, an
        // overflow says that some was left out.
        let mut total = 0usize;
        let fits = events
            .iter()
            .take_while(|event| {
                total += event.name.len() + event.path.len() + 48;
                total <= MAX_EVENT_BYTES
            })
            .count()
            .min(MAX_EVENTS);
        if fits < events.len() {
            events.truncate(fits);
            events.push(WatchEvent {
                name: String::new(),
                path: self.root.to_string_lossy().into_owned(),
                kind: WatchKind::Overflow,
            });
        }
        events
    }
}

/// Starts a watcher of `path`.
pub fn add(outbox: &Outbox, channel: u32, id: String, path: &str, recursive: bool) {
    let root = PathBuf::from(path);
    let made = (|| {
        let Ok(mut all) = watchers().lock() else {
            return Err(std::io::Error::other("the watchers are unavailable"));
        };
        if all.contains_key(&id) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "watcher id in use",
            ));
        }
        if all.len() >= MAX_WATCHERS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::QuotaExceeded,
                format!("{MAX_WATCHERS} watchers are running already: remove one"),
            ));
        }
        if !std::fs::metadata(&root)?.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        let mut watcher = Watcher {
            fd: Arc::new(fd),
            recursive,
            dirs: HashMap::new(),
            root,
        };
        watcher.watch_tree(Path::new(""), None)?;
        all.insert(id, watcher);
        Ok(())
    })();
    match made {
        Ok(()) => files::done(outbox, channel, 0),
        Err(error) if error.kind() == std::io::ErrorKind::QuotaExceeded => {
            files::fail(outbox, channel, FailureKind::Limit, &error.to_string());
        }
        Err(error) => files::fail_io(outbox, channel, path, &error),
    }
}

/// The events of a watcher since the last read.
pub fn events(outbox: &Outbox, channel: u32, id: &str, wait: Duration) {
    if !wait.is_zero() {
        wait_for_events(id, wait.min(MAX_WAIT));
    }
    let read = watchers()
        .lock()
        .ok()
        .and_then(|mut all| all.get_mut(id).map(Watcher::read));
    match read {
        Some(events) => {
            // Batches well under the frame limit.
            let mut batch: Vec<&WatchEvent> = Vec::new();
            let mut bytes = 0;
            for event in &events {
                bytes += event.name.len() + event.path.len() + 48;
                batch.push(event);
                if bytes > 256 * 1024 {
                    outbox.send(&Frame::json(channel, Kind::Data, &batch));
                    batch.clear();
                    bytes = 0;
                }
            }
            if !batch.is_empty() {
                outbox.send(&Frame::json(channel, Kind::Data, &batch));
            }
            files::done(outbox, channel, events.len() as u64);
        }
        None => files::fail(outbox, channel, FailureKind::NotFound, "no such watcher"),
    }
}

/// The longest a read waits for a first event.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// Waits until watcher `id` has an event queued, or `wait` passed, or it is gone,
/// without holding the watchers' lock (a watcher removed meanwhile ends the wait at its
/// deadline at the latest: its descriptor stays open while waited on).
fn wait_for_events(id: &str, wait: Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let fd = watchers()
        .lock()
        .ok()
        .and_then(|all| all.get(id).map(|w| w.fd.clone()));
    let Some(fd) = fd else { return };
    let deadline = std::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&*fd, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Err(Errno::INTR) => continue,
            _ => return,
        }
    }
}

/// Stops a watcher.
pub fn remove(outbox: &Outbox, channel: u32, id: &str) {
    let removed = watchers().lock().ok().and_then(|mut all| all.remove(id));
    match removed {
        Some(_) => files::done(outbox, channel, 0),
        None => files::fail(outbox, channel, FailureKind::NotFound, "no such watcher"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watcher_on(dir: &Path, id: &str) {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap();
        let mut watcher = Watcher {
            fd: Arc::new(fd),
            recursive: false,
            dirs: HashMap::new(),
            root: dir.to_path_buf(),
        };
        watcher.watch_tree(Path::new(""), None).unwrap();
        watchers().lock().unwrap().insert(id.to_owned(), watcher);
    }

    #[test]
    fn a_waiting_read_ends_with_the_first_event_and_a_quiet_one_at_its_wait() {
        let kept = tempfile::tempdir().unwrap();
        let dir = kept.path().to_path_buf();
        watcher_on(&dir, "w_wait");

        // Quiet: the wait runs out.
        let started = std::time::Instant::now();
        wait_for_events("w_wait", Duration::from_millis(150));
        assert!(started.elapsed() >= Duration::from_millis(150));

        // A file made 100 ms in ends a wait of 30 s long before its end.
        let made = dir.join("made");
        let maker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            std::fs::write(made, b"x").unwrap();
        });
        let started = std::time::Instant::now();
        wait_for_events("w_wait", Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(20));
        maker.join().unwrap();
        let events = watchers()
            .lock()
            .unwrap()
            .get_mut("w_wait")
            .map(Watcher::read)
            .unwrap();
        assert!(events.iter().any(|e| e.name == "made"), "{events:?}");

        // A watcher that is gone is not waited on.
        watchers().lock().unwrap().remove("w_wait");
        let started = std::time::Instant::now();
        wait_for_events("w_wait", Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
