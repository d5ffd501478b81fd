//! Input for a running request (file content, standard input, terminal keys and sizes),
//! routed from the connection's reader to the thread serving the request. The reader
//! never blocks on a slow consumer: input is queued, up to a cap per channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandboxd_agent_protocol::Frame;

/// Queued input per channel at most; beyond it, input is dropped (and reported once).
const MAX_QUEUED: usize = 16 * 1024 * 1024;

/// Takes a channel's Credit frames as they arrive, on the connection's reader.
pub type CreditHook = Arc<dyn Fn(&Frame) + Send + Sync>;

#[derive(Clone)]
struct Route {
    tx: Sender<Frame>,
    queued: Arc<AtomicUsize>,
    credit: Option<CreditHook>,
}

/// The input routes of a connection, by channel.
#[derive(Clone, Default)]
pub struct Inputs(Arc<Mutex<HashMap<u32, Route>>>);

/// The receiving end of one channel's input.
pub struct Input {
    rx: Receiver<Frame>,
    queued: Arc<AtomicUsize>,
}

impl Input {
    /// The next input frame; `None` once the channel is closed.
    pub fn recv(&self) -> Option<Frame> {
        let frame = self.rx.recv().ok()?;
        self.queued.fetch_sub(frame.payload.len(), Ordering::AcqRel);
        Some(frame)
    }

    /// The next input frame within `wait`; `None` once the channel is closed or the
    /// time is up (said by the error).
    pub fn recv_timeout(&self, wait: Duration) -> Result<Frame, RecvTimeoutError> {
        let frame = self.rx.recv_timeout(wait)?;
        self.queued.fetch_sub(frame.payload.len(), Ordering::AcqRel);
        Ok(frame)
    }

    /// The next input frame if one is queued now.
    pub fn try_recv(&self) -> Result<Frame, std::sync::mpsc::TryRecvError> {
        let frame = self.rx.try_recv()?;
        self.queued.fetch_sub(frame.payload.len(), Ordering::AcqRel);
        Ok(frame)
    }
}

impl Inputs {
    /// Opens the input of a channel.
    pub fn open(&self, channel: u32) -> Input {
        self.open_route(channel, None)
    }

    /// Opens the input of a channel whose Credit frames go to `credit` as they arrive
    /// instead of waiting behind its other input (a thread that blocks writing what
    /// came must not hold back the credit of the other direction).
    pub fn open_with_credit(&self, channel: u32, credit: CreditHook) -> Input {
        self.open_route(channel, Some(credit))
    }

    fn open_route(&self, channel: u32, credit: Option<CreditHook>) -> Input {
        let (tx, rx) = channel_pair();
        let queued = Arc::new(AtomicUsize::new(0));
        if let Ok(mut routes) = self.0.lock() {
            routes.insert(
                channel,
                Route {
                    tx,
                    queued: queued.clone(),
                    credit,
                },
            );
        }
        Input { rx, queued }
    }

    /// Closes the input of a channel (its request ended).
    pub fn close(&self, channel: u32) {
        if let Ok(mut routes) = self.0.lock() {
            routes.remove(&channel);
        }
    }

    /// Closes every channel's input (the connection ended): a request still waiting for
    /// input sees its end.
    pub fn clear(&self) {
        if let Ok(mut routes) = self.0.lock() {
            routes.clear();
        }
    }

    /// Routes a frame to its channel; frames for channels without input are dropped.
    pub fn route(&self, frame: Frame) {
        let Some(route) = self
            .0
            .lock()
            .ok()
            .and_then(|r| r.get(&frame.channel).cloned())
        else {
            return;
        };
        if frame.kind == sandboxd_agent_protocol::Kind::Credit
            && let Some(credit) = &route.credit
        {
            return credit(&frame);
        }
        let size = frame.payload.len();
        if route.queued.fetch_add(size, Ordering::AcqRel) + size > MAX_QUEUED {
            route.queued.fetch_sub(size, Ordering::AcqRel);
            eprintln!(
                "sandboxd-agent: input of channel {} over its cap; dropped",
                frame.channel
            );
            return;
        }
        let _ = route.tx.send(frame);
    }
}

fn channel_pair() -> (Sender<Frame>, Receiver<Frame>) {
    channel()
}
