//! Flow control of the streamed transfers. The receiver of a transfer's content grants
//! the sender a window of bytes (Credit frames) and grants more only as its consumer
//! takes what came, so the bytes in flight on a channel never exceed the window: a slow
//! consumer holds the sender back instead of filling the connection's queues. The
//! receiver checks that the sender stays within what was granted.
//!
//! Two small counters: `Outflow` on the sending side, `Inflow` on the receiving side,
//! which catches a sender past its credit (`Overdrawn`).

/// What the agent grants the host for an upload: within the 16 MiB it queues per channel.
pub const UPLOAD_WINDOW: u64 = 4 * 1024 * 1024;
/// What the host grants the agent for a download: within the 4 MiB the host queues per
/// channel, with room left for the channel's control frames.
pub const DOWNLOAD_WINDOW: u64 = 2 * 1024 * 1024;
/// What the agent grants the host for what goes to a port inside the sandbox (a
/// download through the egress proxy, an upload to a preview's app): large enough that
/// the credit's round trip does not hold a fast transfer back (through the proxy,
/// 256 KiB gave 0.25-0.30x of a direct download here, 1 MiB 0.36-0.43x; 2 MiB no more).
/// It is queued in the sandbox's own memory, within the agent's 16 MiB per channel.
pub const PORT_WINDOW_IN: u64 = 1024 * 1024;
/// What the host grants the agent at first for what a port sends back: small, since one
/// connection to the agent carries many of them (a page's requests, WebSockets); the
/// host widens it for a connection whose consumer keeps up (see the host's `port.rs`).
pub const PORT_WINDOW_OUT: u64 = 64 * 1024;

/// The sender sent more than it was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the sender went {by} bytes past the credit it was granted")]
pub struct Overdrawn {
    pub by: u64,
}

/// The sending side: how much it may still send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outflow {
    available: u64,
}

impl Outflow {
    /// The receiver granted `bytes` more.
    pub fn grant(&mut self, bytes: u64) {
        self.available = self.available.saturating_add(bytes);
    }

    /// Bytes that may be sent now.
    pub fn available(&self) -> u64 {
        self.available
    }

    /// Counts `bytes` sent; never more than [`Outflow::available`] (the caller's bound).
    pub fn spend(&mut self, bytes: u64) {
        self.available = self.available.saturating_sub(bytes);
    }
}

/// The receiving side: what it granted and not yet received, and what its consumer took
/// since the last grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inflow {
    window: u64,
    outstanding: u64,
    consumed: u64,
}

impl Inflow {
    /// A receiver with a window of `window` bytes, and the first grant to send for it.
    pub fn new(window: u64) -> (Self, u64) {
        let inflow = Self {
            window,
            outstanding: window,
            consumed: 0,
        };
        (inflow, window)
    }

    /// `bytes` of content arrived; refused when past what was granted.
    pub fn received(&mut self, bytes: u64) -> Result<(), Overdrawn> {
        match self.outstanding.checked_sub(bytes) {
            Some(left) => {
                self.outstanding = left;
                Ok(())
            }
            None => Err(Overdrawn {
                by: bytes - self.outstanding,
            }),
        }
    }

    /// Whether everything granted has arrived: the sender is waiting for more.
    pub fn drained(&self) -> bool {
        self.outstanding == 0
    }

    /// The window now.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Widens the window by `bytes`: the grant to send for it, at once.
    pub fn widen(&mut self, bytes: u64) -> u64 {
        self.window = self.window.saturating_add(bytes);
        self.outstanding = self.outstanding.saturating_add(bytes);
        bytes
    }

    /// The consumer took `bytes`; the grant to send when enough was taken to be worth a
    /// frame (half the window), so that grants never add up past the window.
    pub fn consumed(&mut self, bytes: u64) -> Option<u64> {
        self.consumed = self.consumed.saturating_add(bytes);
        if self.consumed < self.window / 2 {
            return None;
        }
        let grant = std::mem::take(&mut self.consumed);
        self.outstanding = self.outstanding.saturating_add(grant);
        Some(grant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_follow_what_the_consumer_took_and_never_pass_the_window() {
        let (mut inflow, first) = Inflow::new(1000);
        assert_eq!(first, 1000);
        let mut outflow = Outflow::default();
        outflow.grant(first);
        let mut in_flight = 0u64;
        let mut granted = first;
        // The sender sends what it may; the consumer takes a little at a time.
        for step in 0..200u64 {
            let send = outflow.available().min(70 + step % 90);
            outflow.spend(send);
            inflow.received(send).unwrap();
            in_flight += send;
            assert!(in_flight <= 1000, "in flight {in_flight} past the window");
            let take = in_flight.min(35);
            in_flight -= take;
            if let Some(grant) = inflow.consumed(take) {
                assert!(grant >= 500);
                granted += grant;
                outflow.grant(grant);
            }
        }
        assert!(granted > 5000, "the transfer kept moving: {granted}");
    }

    #[test]
    fn a_widened_window_lets_that_much_more_in_flight() {
        let (mut inflow, first) = Inflow::new(100);
        inflow.received(first).unwrap();
        assert!(inflow.drained());
        assert_eq!(inflow.widen(100), 100);
        assert_eq!(inflow.window(), 200);
        assert!(!inflow.drained());
        inflow.received(100).unwrap();
        assert!(inflow.received(1).is_err(), "no more than was granted");
        // Grants now wait for half the wider window.
        assert_eq!(inflow.consumed(99), None);
        assert_eq!(inflow.consumed(1), Some(100));
    }

    #[test]
    fn a_sender_past_its_credit_is_caught() {
        let (mut inflow, _) = Inflow::new(100);
        inflow.received(60).unwrap();
        assert_eq!(inflow.received(41), Err(Overdrawn { by: 1 }));
        inflow.received(40).unwrap();
        assert_eq!(inflow.received(1), Err(Overdrawn { by: 1 }));
        // Nothing is granted back until half the window was taken.
        assert_eq!(inflow.consumed(49), None);
        assert_eq!(inflow.consumed(1), Some(50));
        inflow.received(50).unwrap();
        assert!(inflow.received(1).is_err());
    }
}
