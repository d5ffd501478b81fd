//! The threads requests run on. A request hands its work to a thread that is already
//! started and waiting, instead of starting one (and tearing it down after): that takes
//! a thread's start-up (its stack mapped, its signal stack set up) and its teardown off
//! every request's round trip. The pool grows when every thread is busy, keeps a few
//! idle threads for the next requests and lets the rest end after a while without work.
//! Threads already started keep serving when no new one can start (the sandbox's pids
//! limit is reached).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Idle threads kept however long they wait.
const KEEP_IDLE: usize = 2;
/// An idle thread beyond those ends after this long without work.
const IDLE_FOR: Duration = Duration::from_secs(10);

/// A pool of threads for requests. Cheap to clone.
#[derive(Clone, Default)]
pub struct Workers(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    work: Condvar,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting for a job.
    idle: usize,
    /// Threads alive, busy or idle.
    threads: usize,
}

impl Workers {
    /// A pool with [`KEEP_IDLE`] threads started now, while the sandbox has room for
    /// them, so requests find a thread even when its pids limit is reached later.
    pub fn started() -> Self {
        let workers = Self::default();
        for _ in 0..KEEP_IDLE {
            workers.start_thread();
        }
        workers
    }

    /// Runs `job` on a waiting thread, or on a new one when every thread is busy. When
    /// no thread can be started, the job waits for the next thread that is done; with
    /// no thread at all, it runs on the caller's thread.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) {
        let mut state = self.lock();
        state.jobs.push_back(Box::new(job));
        if state.idle >= state.jobs.len() {
            drop(state);
            self.0.work.notify_one();
            return;
        }
        drop(state);
        if self.start_thread() {
            return;
        }
        let mut state = self.lock();
        if state.threads == 0
            && let Some(job) = state.jobs.pop_front()
        {
            drop(state);
            job();
        }
    }

    /// Starts one more thread; `false` when none could start.
    fn start_thread(&self) -> bool {
        self.lock().threads += 1;
        let shared = self.0.clone();
        let started = std::thread::Builder::new()
            .name("request".into())
            .spawn(move || serve(&shared));
        if started.is_err() {
            self.lock().threads -= 1;
        }
        started.is_ok()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn threads(&self) -> (usize, usize) {
        let state = self.lock();
        (state.threads, state.idle)
    }
}

/// A pool thread: runs jobs until it has waited [`IDLE_FOR`] with more than
/// [`KEEP_IDLE`] threads idle.
fn serve(shared: &Shared) {
    let lock = || shared.state.lock().unwrap_or_else(PoisonError::into_inner);
    let mut state = lock();
    loop {
        if let Some(job) = state.jobs.pop_front() {
            drop(state);
            // A job that panics ends its own request only.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            state = lock();
            continue;
        }
        state.idle += 1;
        let (next, waited) = shared
            .work
            .wait_timeout(state, IDLE_FOR)
            .unwrap_or_else(PoisonError::into_inner);
        state = next;
        state.idle -= 1;
        if waited.timed_out() && state.jobs.is_empty() && state.idle >= KEEP_IDLE {
            state.threads -= 1;
            return;
        }
    }
}

/// Starts a thread of its own for `job`; when none can start (the sandbox's pids limit
/// is reached) the job is dropped, with whatever it holds, instead of panicking the
/// request that asked for it. Whether it started.
pub fn detached(job: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new().spawn(job).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn jobs_run_and_threads_are_reused() {
        let workers = Workers::default();
        let (tx, rx) = mpsc::channel();
        for round in 0..20 {
            let tx = tx.clone();
            workers.run(move || tx.send((round, std::thread::current().id())).unwrap());
            let (done, _) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
            assert_eq!(done, round);
            // Let the thread go back to waiting before the next job.
            while workers.threads().1 == 0 {
                std::thread::yield_now();
            }
        }
        assert_eq!(
            workers.threads().0,
            1,
            "one thread served every job in turn"
        );
    }

    #[test]
    fn busy_threads_make_the_pool_grow() {
        let workers = Workers::default();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (started_tx, started_rx) = mpsc::channel();
        for _ in 0..5 {
            let release_rx = release_rx.clone();
            let started_tx = started_tx.clone();
            workers.run(move || {
                started_tx.send(()).unwrap();
                // Every job blocks until released: five must run at once.
                let _ = release_rx.lock().unwrap().recv();
            });
        }
        for _ in 0..5 {
            started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        }
        assert_eq!(workers.threads(), (5, 0));
        for _ in 0..5 {
            release_tx.send(()).unwrap();
        }
    }

    #[test]
    fn a_started_pool_has_threads_waiting() {
        let workers = Workers::started();
        while workers.threads().1 < KEEP_IDLE {
            std::thread::yield_now();
        }
        assert_eq!(workers.threads(), (KEEP_IDLE, KEEP_IDLE));
        let (tx, rx) = mpsc::channel();
        workers.run(move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(
            workers.threads().0,
            KEEP_IDLE,
            "a waiting thread took the job"
        );
    }

    #[test]
    fn a_panicking_job_leaves_its_thread_serving() {
        let workers = Workers::default();
        workers.run(|| panic!("this job fails"));
        while workers.threads().1 == 0 {
            std::thread::yield_now();
        }
        let (tx, rx) = mpsc::channel();
        workers.run(move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(workers.threads().0, 1);
    }
}
