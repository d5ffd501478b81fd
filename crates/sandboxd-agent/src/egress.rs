//! The egress proxy's address inside the sandbox: the agent listens on
//! `127.0.0.1:`[`EGRESS_PROXY_PORT`] and hands each connection a program makes there to
//! a waiting `acceptEgress` request, whose channel then carries it to sandboxd (which
//! speaks the proxy's HTTP and decides what may be reached). One thread accepts, and
//! only while a request waits: connections that arrive while none does wait in the
//! listener's backlog, so the host's requests pace how many are taken.
//!
//! Each connection goes to the oldest request still waiting.

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use sandboxd_agent_protocol::{EGRESS_PROXY_PORT, FailureKind};

use crate::files::fail;
use crate::input::Inputs;
use crate::outbox::Outbox;
use crate::port::Carriage;
use crate::workers::Workers;

/// The listener and the requests waiting for its connections; one per agent process,
/// kept across its connections to sandboxd.
#[derive(Clone, Default)]
pub struct Egress(Arc<Shared>);

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    waiting_changed: Condvar,
}

#[derive(Default)]
struct State {
    listener: Option<Arc<TcpListener>>,
    waiting: VecDeque<Waiter>,
    accepting: bool,
}

struct Waiter {
    carriage: Carriage,
    inputs: Inputs,
}

impl Egress {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves `acceptEgress`: the request waits for the next connection (listening
    /// first, if nothing listens yet), then carries it.
    pub fn serve(&self, outbox: Outbox, channel: u32, inputs: Inputs, workers: &Workers) {
        let carriage = Carriage::open(outbox, channel, &inputs);
        let mut state = self.lock();
        let listener = match &state.listener {
            Some(listener) => listener.clone(),
            None => {
                match TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], EGRESS_PROXY_PORT))) {
                    Ok(listener) => {
                        let listener = Arc::new(listener);
                        state.listener = Some(listener.clone());
                        listener
                    }
                    Err(error) => {
                        drop(state);
                        let message = format!(
                            "cannot listen on 127.0.0.1:{EGRESS_PROXY_PORT} for the egress proxy: {error}"
                        );
                        fail(carriage.outbox(), channel, FailureKind::Io, &message);
                        inputs.close(channel);
                        return;
                    }
                }
            }
        };
        state.waiting.push_back(Waiter { carriage, inputs });
        if !state.accepting {
            let egress = self.clone();
            let workers = workers.clone();
            let started = std::thread::Builder::new()
                .name("egress".into())
                .spawn(move || egress.accept_forever(&listener, &workers));
            state.accepting = started.is_ok();
        }
        drop(state);
        self.0.waiting_changed.notify_all();
    }

    /// Accepts while requests wait, handing each connection to the oldest request still
    /// wanted; a connection whose requests were all withdrawn waits for the next one.
    fn accept_forever(&self, listener: &TcpListener, workers: &Workers) {
        let mut held: Option<TcpStream> = None;
        loop {
            self.wait_for_a_request();
            let stream = match held.take() {
                Some(stream) => stream,
                None => match listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    }
                },
            };
            match self.next_wanted() {
                Some(Waiter { carriage, inputs }) => {
                    let pool = workers.clone();
                    workers.run(move || {
                        carriage.carry(stream, &pool);
                        inputs.close(carriage.channel());
                    });
                }
                None => held = Some(stream),
            }
        }
    }

    fn wait_for_a_request(&self) {
        let mut state = self.lock();
        while state.waiting.is_empty() {
            state = self
                .0
                .waiting_changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The oldest waiting request the host still wants; withdrawn ones are closed.
    fn next_wanted(&self) -> Option<Waiter> {
        let mut state = self.lock();
        while let Some(waiter) = state.waiting.pop_front() {
            if waiter.carriage.withdrawn() {
                waiter.inputs.close(waiter.carriage.channel());
                continue;
            }
            return Some(waiter);
        }
        None
    }
}
