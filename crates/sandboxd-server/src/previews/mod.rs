//! Previews: a sandbox's exposed port reached from outside. `addresses.rs` makes the
//! address a preview is reached at (a host of its own on the preview domain, or a path
//! on sandboxd's address); `proxy.rs` admits the requests that arrive there and
//! `to_app.rs` carries them into the sandbox's app; `e2b_ports.rs` carries a sandbox's
//! ports on the E2B domain, which E2B's rules let in (`crate::e2b::ports`). The
//! procedures that expose and list ports are `procedures/ports.rs`'s; the decisions (who
//! may enter, the link's token, activity) are the service's `ports.rs`.

mod addresses;
pub(crate) mod e2b_ports;
mod place;
pub(crate) mod proxy;
mod to_app;

pub use addresses::PreviewSettings;
