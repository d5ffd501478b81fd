//! Where the frames of each channel go: a queue per channel, bounded in bytes, on top of
//! the connection's own bound. A channel whose consumer takes nothing for
//! [`ROUTE_STALL`] while its queue is full is cut (and its command killed), so that one
//! slow consumer — a WebSocket client that stops reading — cannot hold the connection's
//! reader, and with it every other operation on the sandbox.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandboxd_agent_protocol::Frame;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Bytes queued for one channel and not yet taken by its consumer, at most.
const ROUTE_BYTES: usize = 4 * 1024 * 1024;
/// How long the connection's reader waits for a consumer whose queue is full.
pub const ROUTE_STALL: Duration = Duration::from_secs(3);

/// A frame on its way to its consumer, holding its share of the channel's and the
/// connection's budgets.
#[derive(Debug)]
pub struct Delivered {
    pub frame: Frame,
    _route: OwnedSemaphorePermit,
    _conn: OwnedSemaphorePermit,
}

#[derive(Debug, Clone)]
struct Route {
    tx: mpsc::UnboundedSender<Delivered>,
    budget: Arc<Semaphore>,
}

/// The channels of one connection.
#[derive(Debug, Clone)]
pub struct Routes {
    table: Arc<Mutex<Table>>,
    stall: Duration,
}

impl Default for Routes {
    fn default() -> Self {
        Self {
            table: Arc::default(),
            stall: ROUTE_STALL,
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    open: HashMap<u32, Route>,
    /// Channels cut for a stalled consumer, until the consumer lets go of them.
    cut: HashSet<u32>,
}

/// What became of a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivery {
    Delivered,
    /// No such channel (anymore): the frame is dropped.
    NoRoute,
    /// The channel's consumer stalled: the channel was cut.
    Cut,
    /// The connection's budget is gone: the connection is ending.
    Closed,
}

impl Routes {
    /// Opens channel `id`; its frames arrive on the returned receiver.
    pub fn open(&self, id: u32) -> Option<mpsc::UnboundedReceiver<Delivered>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let route = Route {
            tx,
            budget: Arc::new(Semaphore::new(ROUTE_BYTES)),
        };
        self.table.lock().ok()?.open.insert(id, route);
        Some(rx)
    }

    /// Forgets channel `id` (its consumer is done with it).
    pub fn close(&self, id: u32) {
        if let Ok(mut table) = self.table.lock() {
            table.open.remove(&id);
            table.cut.remove(&id);
        }
    }

    /// Ends every channel (the connection ended).
    pub fn clear(&self) {
        if let Ok(mut table) = self.table.lock() {
            table.open.clear();
        }
    }

    /// Whether channel `id` was cut for a stalled consumer.
    pub fn was_cut(&self, id: u32) -> bool {
        self.table.lock().is_ok_and(|table| table.cut.contains(&id))
    }

    /// Hands `frame` to its channel's consumer, waiting at most [`ROUTE_STALL`] for room
    /// in the channel's queue, then as long as needed for the connection's budget.
    pub async fn deliver(&self, frame: Frame, conn_budget: &Arc<Semaphore>) -> Delivery {
        let route = match self.table.lock() {
            Ok(table) => table.open.get(&frame.channel).cloned(),
            Err(_) => None,
        };
        let Some(route) = route else {
            return Delivery::NoRoute;
        };
        let bytes = u32::try_from(frame.payload.len()).unwrap_or(u32::MAX);
        let waited =
            tokio::time::timeout(self.stall, route.budget.clone().acquire_many_owned(bytes)).await;
        let own = match waited {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Delivery::NoRoute,
            Err(_) => {
                if let Ok(mut table) = self.table.lock() {
                    table.open.remove(&frame.channel);
                    table.cut.insert(frame.channel);
                }
                return Delivery::Cut;
            }
        };
        let Ok(conn) = conn_budget.clone().acquire_many_owned(bytes).await else {
            return Delivery::Closed;
        };
        // A consumer that went away is not the agent's fault.
        let _ = route.tx.send(Delivered {
            frame,
            _route: own,
            _conn: conn,
        });
        Delivery::Delivered
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use sandboxd_agent_protocol::Kind;

    use super::*;

    fn frame(channel: u32, len: usize) -> Frame {
        Frame::new(channel, Kind::Stdout, vec![b'x'; len])
    }

    #[tokio::test]
    async fn a_stalled_consumer_is_cut_and_the_others_keep_moving() {
        let routes = Routes {
            stall: Duration::from_millis(100),
            ..Routes::default()
        };
        let conn_budget = Arc::new(Semaphore::new(16 * 1024 * 1024));
        let _slow = routes.open(1).unwrap();
        let mut fast = routes.open(2).unwrap();
        // The slow consumer's queue fills up...
        for _ in 0..4 {
            let delivered = routes.deliver(frame(1, 1024 * 1024), &conn_budget).await;
            assert_eq!(delivered, Delivery::Delivered);
        }
        // ...the next frame waits for it, then cuts it.
        let cut = routes.deliver(frame(1, 1), &conn_budget).await;
        assert_eq!(cut, Delivery::Cut);
        assert!(routes.was_cut(1));
        assert_eq!(
            routes.deliver(frame(1, 1), &conn_budget).await,
            Delivery::NoRoute
        );
        // Another channel is served at once.
        assert_eq!(
            routes.deliver(frame(2, 10), &conn_budget).await,
            Delivery::Delivered
        );
        assert_eq!(fast.recv().await.unwrap().frame.payload.len(), 10);
        routes.close(1);
        assert!(!routes.was_cut(1));
    }
}
