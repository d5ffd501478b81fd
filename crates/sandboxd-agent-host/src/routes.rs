//! Where the frames of each channel go: a queue per channel, bounded in bytes, on top of
//! the connection's own bound. A channel whose consumer takes nothing for
//! [`ROUTE_STALL`] while its queue is full is cut (and its command killed), so that one
//! slow consumer — a WebSocket client that stops reading — cannot hold the connection's
//! reader, and with it every other operation on the sandbox. A transfer's channel is
//! metered: its Data frames are counted against the credit granted to the agent as they
//! arrive, and the first one past it cuts the channel.
//!
//! 4 MiB per channel and 24 MiB per connection, a frame costing at least 64 bytes of
//! both, so that a flood of empty frames is bounded as bytes are; `ROUTE_STALL` is 3 s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandboxd_agent_protocol::{Frame, Kind};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Bytes queued for one channel and not yet taken by its consumer, at most.
const ROUTE_BYTES: usize = 4 * 1024 * 1024;
/// What a frame costs of the budgets at least, whatever its payload: a queued frame
/// takes memory of its own, so a flood of empty frames is bounded like a flood of bytes.
const FRAME_COST: usize = 64;
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
    /// The credit of a transfer's channel: Data bytes the agent may still send.
    credit: Option<Arc<AtomicU64>>,
}

/// Why a channel was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutFor {
    /// Its consumer took nothing for [`ROUTE_STALL`] while its queue was full.
    Stalled,
    /// The agent sent past the credit it was granted.
    Overdrawn,
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
    /// Channels cut, until their consumers let go of them.
    cut: HashMap<u32, CutFor>,
}

/// What became of a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivery {
    Delivered,
    /// No such channel (anymore): the frame is dropped.
    NoRoute,
    /// The channel's consumer stalled: the channel was cut.
    Cut,
    /// The agent sent past a transfer's credit: the channel was cut.
    Overdrawn,
    /// The connection's budget is gone: the connection is ending.
    Closed,
}

impl Routes {
    /// Opens channel `id`; its frames arrive on the returned receiver. With `credit`,
    /// its Data frames are counted against it as they arrive.
    pub fn open(
        &self,
        id: u32,
        credit: Option<Arc<AtomicU64>>,
    ) -> Option<mpsc::UnboundedReceiver<Delivered>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let route = Route {
            tx,
            budget: Arc::new(Semaphore::new(ROUTE_BYTES)),
            credit,
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

    /// Why channel `id` was cut, if it was.
    pub fn cut_for(&self, id: u32) -> Option<CutFor> {
        self.table.lock().ok()?.cut.get(&id).copied()
    }

    fn cut(&self, id: u32, why: CutFor) {
        if let Ok(mut table) = self.table.lock() {
            table.open.remove(&id);
            table.cut.insert(id, why);
        }
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
        if let Some(credit) = &route.credit
            && frame.kind == Kind::Data
        {
            let len = frame.payload.len() as u64;
            let spent = credit.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(len)
            });
            if spent.is_err() {
                self.cut(frame.channel, CutFor::Overdrawn);
                return Delivery::Overdrawn;
            }
        }
        let bytes = u32::try_from(frame.payload.len().max(FRAME_COST)).unwrap_or(u32::MAX);
        let waited =
            tokio::time::timeout(self.stall, route.budget.clone().acquire_many_owned(bytes)).await;
        let own = match waited {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Delivery::NoRoute,
            Err(_) => {
                self.cut(frame.channel, CutFor::Stalled);
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
    async fn a_flood_of_empty_frames_fills_its_queue_and_is_cut() {
        let routes = Routes {
            stall: Duration::from_millis(100),
            ..Routes::default()
        };
        let conn_budget = Arc::new(Semaphore::new(24 * 1024 * 1024));
        let _idle = routes.open(1, None).unwrap();
        let mut sent = 0;
        let outcome = loop {
            let outcome = routes
                .deliver(Frame::new(1, Kind::Data, Vec::new()), &conn_budget)
                .await;
            if outcome != Delivery::Delivered || sent > 1_000_000 {
                break outcome;
            }
            sent += 1;
        };
        assert_eq!(outcome, Delivery::Cut, "after {sent} frames");
        assert_eq!(
            sent,
            ROUTE_BYTES / FRAME_COST,
            "each empty frame costs FRAME_COST"
        );
    }

    #[tokio::test]
    async fn a_stalled_consumer_is_cut_and_the_others_keep_moving() {
        let routes = Routes {
            stall: Duration::from_millis(100),
            ..Routes::default()
        };
        let conn_budget = Arc::new(Semaphore::new(16 * 1024 * 1024));
        let _slow = routes.open(1, None).unwrap();
        let mut fast = routes.open(2, None).unwrap();
        // The slow consumer's queue fills up...
        for _ in 0..4 {
            let delivered = routes.deliver(frame(1, 1024 * 1024), &conn_budget).await;
            assert_eq!(delivered, Delivery::Delivered);
        }
        // ...the next frame waits for it, then cuts it.
        let cut = routes.deliver(frame(1, 1), &conn_budget).await;
        assert_eq!(cut, Delivery::Cut);
        assert_eq!(routes.cut_for(1), Some(CutFor::Stalled));
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
        assert_eq!(routes.cut_for(1), None);
    }

    #[tokio::test]
    async fn data_past_a_transfers_credit_cuts_its_channel_at_once() {
        let routes = Routes::default();
        let conn_budget = Arc::new(Semaphore::new(16 * 1024 * 1024));
        let credit = Arc::new(AtomicU64::new(100));
        let mut metered = routes.open(1, Some(credit.clone())).unwrap();
        let data = |len| Frame::new(1, Kind::Data, vec![0u8; len]);
        assert_eq!(
            routes.deliver(data(60), &conn_budget).await,
            Delivery::Delivered
        );
        // Control frames are not content.
        let done = Frame::new(1, Kind::Done, vec![0u8; 500]);
        assert_eq!(
            routes.deliver(done, &conn_budget).await,
            Delivery::Delivered
        );
        credit.fetch_add(10, Ordering::AcqRel);
        assert_eq!(
            routes.deliver(data(50), &conn_budget).await,
            Delivery::Delivered
        );
        assert_eq!(
            routes.deliver(data(1), &conn_budget).await,
            Delivery::Overdrawn
        );
        assert_eq!(routes.cut_for(1), Some(CutFor::Overdrawn));
        assert_eq!(
            routes.deliver(data(1), &conn_budget).await,
            Delivery::NoRoute
        );
        assert_eq!(metered.recv().await.unwrap().frame.payload.len(), 60);
    }
}
